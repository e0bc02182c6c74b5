"""``python -m a2a_trio.cli``: the same as the ``a2a-trio`` command."""

from . import main

main(prog_name="a2a-trio")

"""``python -m bench``: run the benchmark (see :mod:`bench.run` and ``--help``)."""

from __future__ import annotations

import sys

from .run import main

sys.exit(main())

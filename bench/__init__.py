"""The a2a-trio benchmark harness: a2a-trio against the a2a-sdk reference server.

``python -m bench --help`` (or ``nox -s bench -- --help``) for the options;
``bench/README.md`` for what is measured and how.
"""

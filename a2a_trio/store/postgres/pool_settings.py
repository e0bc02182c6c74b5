"""The ``[storage]`` knobs for PostgreSQL, in a module that imports no psycopg.

Settings and the app name them whatever the database; psycopg is imported
only when a PostgreSQL database is opened (:mod:`.database`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PoolSettings"]


@dataclass(frozen=True)
class PoolSettings:
    """The ``[storage]`` knobs for PostgreSQL."""

    size: int = 10
    connect_timeout: float = 5.0
    statement_timeout: float = 30.0
    # How long a cancelled caller waits for the server to abandon its query before
    # the connection is given up on instead of reused.
    cancel_grace: float = 5.0
    # A connection unused this long is closed (close_idle): an idle process
    # holds none of the pool's.
    idle_seconds: float = 30.0

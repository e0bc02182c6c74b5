"""PostgreSQL through psycopg 3, driven from trio without asyncio.

The store (``PostgresStore``, an implementation of :class:`a2a_trio.store.Store`),
the connection pool it runs on (``Database``), the LISTEN connection
(``Listener``) and their errors; docs/storage.md describes the schema.
"""

from __future__ import annotations

from .database import Connection, Database, PoolSettings
from .errors import ConnectionLost, DatabaseUnavailable, PostgresError, StatementTimeout
from .listener import Listener, Notification
from .store import PostgresStore

__all__ = [
    "Connection",
    "ConnectionLost",
    "Database",
    "DatabaseUnavailable",
    "Listener",
    "Notification",
    "PoolSettings",
    "PostgresError",
    "PostgresStore",
    "StatementTimeout",
]

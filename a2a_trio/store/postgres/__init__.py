"""PostgreSQL through psycopg 3, driven from trio without asyncio.

Exists today: the connection pool (``Database``), the LISTEN connection (``Listener``)
and their errors. The PostgreSQL task store is planned (docs/storage.md).
"""

from __future__ import annotations

from .database import Connection, Database, PoolSettings
from .errors import ConnectionLost, DatabaseUnavailable, PostgresError, StatementTimeout
from .listener import Listener, Notification

__all__ = [
    "Connection",
    "ConnectionLost",
    "Database",
    "DatabaseUnavailable",
    "Listener",
    "Notification",
    "PoolSettings",
    "PostgresError",
    "StatementTimeout",
]

"""PostgreSQL through psycopg 3, driven from trio without asyncio.

The store (``PostgresStore``, an implementation of :class:`a2a_trio.store.Store`),
the connection pool it runs on (``Database``), the LISTEN connection
(``Listener``) and their errors; docs/storage.md describes the schema.

The settings and errors are imported with the package; the rest, and with it
psycopg, on first use (:func:`__getattr__`): a process serving SQLite never
imports psycopg.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import ConnectionLost, DatabaseUnavailable, PostgresError, StatementTimeout
from .pool_settings import PoolSettings

if TYPE_CHECKING:
    from .database import Connection, Database
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

#: Where each name that needs psycopg lives (imported on first use).
_HOMES = {
    "Connection": ".database",
    "Database": ".database",
    "Listener": ".listener",
    "Notification": ".listener",
    "PostgresStore": ".store",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value

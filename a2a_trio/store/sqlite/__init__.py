"""SQLite through the standard library's :mod:`sqlite3`, the embedded default.

The store (``SqliteStore``, an implementation of :class:`a2a_trio.store.Store`);
docs/storage.md describes the schema.
"""

from __future__ import annotations

from .database import DatabaseUnopenable
from .store import SqliteStore

__all__ = ["DatabaseUnopenable", "SqliteStore"]

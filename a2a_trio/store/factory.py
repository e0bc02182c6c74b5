"""The store a setting names: a SQLite file or a PostgreSQL database."""

from __future__ import annotations

from pathlib import Path

from .base import Store
from .postgres.pool_settings import PoolSettings
from .sqlite import SqliteStore
from .url import DatabaseLocation, PostgresLocation, SqliteLocation, parse_database_url

__all__ = ["store_at"]


def store_at(
    database: str | Path | DatabaseLocation,
    *,
    secret_key: str | bytes | None = None,
    pool: PoolSettings | None = None,
    key: str = "storage.url",
    lease_seconds: float = 10.0,
) -> Store:
    """A store (not yet open) for a path, a URL or a parsed location.

    A string is parsed as ``storage.url`` is (``key`` names the setting in
    errors): a plain path or ``sqlite:///path`` is a SQLite file,
    ``postgresql://...`` a PostgreSQL database (``lease_seconds``: how long a
    serving process lives there without a heartbeat).
    """
    if isinstance(database, Path):
        database = SqliteLocation(database, key)
    elif isinstance(database, str):
        database = parse_database_url(database, key=key)
    if isinstance(database, PostgresLocation):
        from .postgres.store import PostgresStore

        return PostgresStore(
            database, secret_key=secret_key, pool=pool, lease_seconds=lease_seconds
        )
    return SqliteStore(database.path, secret_key=secret_key, key=database.key)

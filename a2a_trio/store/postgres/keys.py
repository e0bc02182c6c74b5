"""The development secret key of a PostgreSQL database, kept in the database itself.

SQLite keeps a development key in a file beside the database
(:func:`a2a_trio.store.secrets.development_key`); a PostgreSQL database has no
"beside", and every process serving it must seal and open push secrets with
the same key. So the first process to open a database without a configured
key makes one and stores it in ``a2a_settings``; every later one reads it.
Like the key file, it lets a fresh set-up run and protects nothing from anyone
who can read the database (or its dumps): production configures
``storage.secret_key``, and then this row is neither made nor read.
"""

from __future__ import annotations

import logging

from cryptography.fernet import Fernet

from .database import Connection

__all__ = ["DEVELOPMENT_KEY", "development_key"]

log = logging.getLogger("a2a_trio.store")

#: The ``a2a_settings`` row that holds the key.
DEVELOPMENT_KEY = "development_secret_key"


def development_key(conn: Connection, display: str) -> bytes:
    """The database's development key, made on first use (in the caller's transaction).

    Processes opening a fresh database together all end with the first one's
    key: the losers' inserts do nothing, and the read that follows sees the
    winner's row once its transaction has committed.
    """
    made = conn.execute(
        "INSERT INTO a2a_settings (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
        (DEVELOPMENT_KEY, Fernet.generate_key().decode("ascii")),
    ).rowcount
    row = conn.execute(
        "SELECT value FROM a2a_settings WHERE key = %s", (DEVELOPMENT_KEY,)
    ).fetchone()
    assert row is not None, "the row was inserted or was there"
    if made:
        log.warning(
            "no secret key configured: generated a development key in table a2a_settings"
            " of %s; set storage.secret_key for production",
            display,
        )
    return str(row[0]).encode("ascii")

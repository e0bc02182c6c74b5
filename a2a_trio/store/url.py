"""Where the store lives: ``storage.url`` or ``A2A_TRIO_DATABASE``, parsed once.

A plain path and ``sqlite:///path`` name a SQLite file; ``postgresql://...`` (or
``postgres://...``) names a PostgreSQL database. Errors name the settings key and the
host, and never repeat the password: URLs end up in logs and support tickets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

DEFAULT_URL = "sqlite:///a2a.db"
#: The environment variable that overrides ``storage.url`` (for every app, the kit's too).
DATABASE_ENV = "A2A_TRIO_DATABASE"
_POSTGRES_SCHEMES = ("postgresql", "postgres")


class DatabaseURLError(ValueError):
    """A storage URL that cannot be used; the message names the key (and host)."""


@dataclass(frozen=True)
class SqliteLocation:
    """A SQLite database file."""

    path: Path
    #: The setting it came from (``storage.url``, ``agents[0].storage``), for messages.
    key: str = field(default="storage.url", compare=False)


@dataclass(frozen=True)
class PostgresLocation:
    """A PostgreSQL database; ``password`` is kept out of ``repr`` and ``display``."""

    host: str
    port: int
    dbname: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    # libpq parameters from the query string (sslmode=require, ...), passed through.
    options: tuple[tuple[str, str], ...] = ()
    #: The setting it came from (``storage.url``, ``A2A_TRIO_DATABASE``), for messages.
    key: str = field(default="storage.url", compare=False)

    @property
    def display(self) -> str:
        """``host:port/dbname`` (with the user): safe to log."""
        who = f"{self.user}@" if self.user else ""
        return f"{who}{self.host}:{self.port}/{self.dbname}"

    def conninfo_kwargs(self) -> dict[str, str]:
        """Keyword arguments for ``psycopg.connect`` (the password included)."""
        kwargs = dict(self.options)
        kwargs.update(host=self.host, port=str(self.port), dbname=self.dbname)
        if self.user is not None:
            kwargs["user"] = self.user
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs


DatabaseLocation = SqliteLocation | PostgresLocation


def parse_database_url(value: str, *, key: str = "storage.url") -> DatabaseLocation:
    """Parse a storage setting into where the database is.

    ``key`` is the setting's name as the operator wrote it (``storage.url`` or
    ``A2A_TRIO_DATABASE``); every error starts with it. A value without ``://`` is a
    path to a SQLite file, so ``A2A_TRIO_DATABASE=/var/lib/a2a.db`` keeps working.
    """
    if not value.strip():
        raise DatabaseURLError(f"{key}: empty; give a path or a URL such as {DEFAULT_URL}")
    # No file name and no PostgreSQL name can hold one (libpq would cut the
    # name short there: another database). A URL's %00 is one too.
    if "\x00" in (unquote(value) if "://" in value else value):
        raise DatabaseURLError(f"{key}: holds U+0000 (NUL), which no file or database name can")
    if "://" not in value:
        return SqliteLocation(Path(value), key)
    scheme = value.split("://", 1)[0].lower()
    if scheme == "sqlite":
        return _parse_sqlite(value, key)
    if scheme in _POSTGRES_SCHEMES:
        return _parse_postgres(value, key)
    raise DatabaseURLError(
        f"{key}: unsupported scheme {scheme!r}; use sqlite:///path or postgresql://host/db"
    )


def _parse_sqlite(value: str, key: str) -> SqliteLocation:
    # sqlite:///relative.db and sqlite:////absolute.db, as SQLAlchemy spells them.
    rest = value.split("://", 1)[1]
    if not rest.startswith("/") or rest == "/":
        raise DatabaseURLError(f"{key}: a SQLite URL is sqlite:///path/to/file.db")
    return SqliteLocation(Path(unquote(rest[1:])), key)


def _parse_postgres(value: str, key: str) -> PostgresLocation:
    # urlsplit never validates; each part is checked here so the message can say which.
    parts = urlsplit(value)
    try:
        host = parts.hostname
        port = parts.port or 5432
    except ValueError:
        # The port is the only part urlsplit rejects; the netloc may hold a password.
        raise DatabaseURLError(
            f"{key}: the port of PostgreSQL host {_host_only(parts.netloc)!r} is not a number"
        ) from None
    if not host:
        raise DatabaseURLError(f"{key}: a PostgreSQL URL needs a host (postgresql://host/db)")
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname or "/" in dbname:
        raise DatabaseURLError(
            f"{key}: the PostgreSQL URL for host {host!r} needs one database name after the host"
        )
    options = tuple(parse_qsl(parts.query, keep_blank_values=True))
    for name, _ in options:
        if name in ("password", "host", "port", "dbname", "user"):
            raise DatabaseURLError(
                f"{key}: put {name!r} in the URL itself, not in its query (host {host!r})"
            )
    return PostgresLocation(
        host=host,
        port=port,
        dbname=dbname,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        options=options,
        key=key,
    )


def _host_only(netloc: str) -> str:
    """The netloc without its user and password."""
    return netloc.rsplit("@", 1)[-1].split(":", 1)[0]

"""What the PostgreSQL driver raises, in words an operator can act on."""

from __future__ import annotations

from ..outage import StoreUnreachable


class PostgresError(Exception):
    """Base of the driver's own errors; messages never contain a password."""


class DatabaseUnavailable(PostgresError, StoreUnreachable):
    """No connection could be opened (server down, refused, wrong name, timeout)."""


class ConnectionLost(PostgresError, StoreUnreachable):
    """The connection broke during a query; the work may or may not have committed
    only if the break came during COMMIT; a later call gets a fresh connection."""


class StatementTimeout(PostgresError):
    """The server cancelled a statement that ran past ``statement_timeout``."""

"""The push outbox's units of work on PostgreSQL that take more than one statement.

Each is a plain function of a connection, run by
:meth:`~a2a_trio.store.postgres.Database.run` in a worker thread inside one
transaction. The rows are queued by :mod:`.recording`, with their round.
"""

from __future__ import annotations

from typing import Any, Literal

from .. import queries
from ..records import Notification
from .database import Connection, Params

__all__ = ["delivery_rows", "record_attempt"]


def record_attempt(
    conn: Connection,
    notification: Notification,
    *,
    outcome: Literal["delivered", "retry", "failed"],
    status: int | None,
    error: str | None,
    duration_ms: float,
    next_attempt_at: float,
) -> None:
    """Log one delivery attempt and move the notification on (pending again on a retry)."""
    attempt = notification.attempts + 1
    state = "pending" if outcome == "retry" else outcome
    conn.execute(
        "INSERT INTO push_attempts (outbox_id, attempt, at, status, error, duration_ms)"
        " VALUES (%s, %s, now(), %s, %s, %s)",
        (notification.id, attempt, status, error, duration_ms),
    )
    conn.execute(
        "UPDATE push_outbox SET state = %s, attempts = %s, next_attempt_at = %s,"
        " last_error = %s, updated_at = now() WHERE id = %s",
        (state, attempt, next_attempt_at, error, notification.id),
    )


def delivery_rows(
    conn: Connection, query: str, args: Params
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The outbox rows ``query`` selects, and the attempts made for them."""
    rows = conn.execute(query, args).fetchall()
    attempts = conn.execute(
        queries.attempts("= ANY(%s::bigint[])"), ([row[0] for row in rows],)
    ).fetchall()
    return rows, attempts

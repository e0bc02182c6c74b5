"""Pruning on PostgreSQL: finished tasks past a cutoff, with everything of theirs.

One statement each way, run by :meth:`~a2a_trio.store.postgres.Database.run`:
:func:`count` says what :func:`delete` would delete, and :func:`delete` returns
the same counts of what it did.
"""

from __future__ import annotations

from datetime import datetime

from .. import queries
from .database import Connection

__all__ = ["PRUNED", "count", "delete"]

#: What prune counts, in the order its queries return them.
PRUNED = ("tasks", "events", "push_configs", "notifications", "attempts", "receipts")

_DOOMED = "SELECT agent, id FROM tasks WHERE updated_at < %(cutoff)s AND state = ANY(%(finals)s)"

_COUNT = f"""
    WITH doomed AS ({_DOOMED}),
    outbox AS (SELECT id FROM push_outbox WHERE (agent, task_id) IN (SELECT * FROM doomed))
    SELECT
        (SELECT count(*) FROM doomed),
        (SELECT count(*) FROM task_events WHERE (agent, task_id) IN (SELECT * FROM doomed)),
        (SELECT count(*) FROM push_configs WHERE (agent, task_id) IN (SELECT * FROM doomed)),
        (SELECT count(*) FROM outbox),
        (SELECT count(*) FROM push_attempts WHERE outbox_id IN (SELECT id FROM outbox)),
        (SELECT count(*) FROM message_receipts WHERE created_at < %(cutoff)s)
"""

# One statement, one snapshot: the counts are exactly the rows deleted.
_DELETE = """
    WITH doomed AS (
        DELETE FROM tasks WHERE updated_at < %(cutoff)s AND state = ANY(%(finals)s)
        RETURNING agent, id
    ),
    events AS (
        DELETE FROM task_events WHERE (agent, task_id) IN (SELECT * FROM doomed) RETURNING 1
    ),
    configs AS (
        DELETE FROM push_configs WHERE (agent, task_id) IN (SELECT * FROM doomed) RETURNING 1
    ),
    outbox AS (
        DELETE FROM push_outbox WHERE (agent, task_id) IN (SELECT * FROM doomed) RETURNING id
    ),
    attempts AS (
        DELETE FROM push_attempts WHERE outbox_id IN (SELECT id FROM outbox) RETURNING 1
    ),
    receipts AS (
        DELETE FROM message_receipts WHERE created_at < %(cutoff)s RETURNING 1
    )
    SELECT
        (SELECT count(*) FROM doomed),
        (SELECT count(*) FROM events),
        (SELECT count(*) FROM configs),
        (SELECT count(*) FROM outbox),
        (SELECT count(*) FROM attempts),
        (SELECT count(*) FROM receipts)
"""


def count(conn: Connection, cutoff: datetime) -> dict[str, int]:
    """What :func:`delete` would delete now, under the keys of :data:`PRUNED`."""
    return _counts(conn, _COUNT, cutoff)


def delete(conn: Connection, cutoff: datetime) -> dict[str, int]:
    """Delete finished tasks last updated before ``cutoff``, their rows and older receipts."""
    return _counts(conn, _DELETE, cutoff)


def _counts(conn: Connection, statement: str, cutoff: datetime) -> dict[str, int]:
    row = conn.execute(statement, {"cutoff": cutoff, "finals": queries.FINAL_STATES}).fetchone()
    assert row is not None
    return dict(zip(PRUNED, (int(number) for number in row), strict=True))

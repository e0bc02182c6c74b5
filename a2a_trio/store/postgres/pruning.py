"""Pruning on PostgreSQL: finished tasks past a cutoff, with everything of theirs.

One statement each way, run by :meth:`~a2a_trio.store.postgres.Database.run`:
:func:`count` says what would go, and :func:`delete_batch` deletes a batch of
it and returns the counts of what it did (``a2a-trio prune`` and the
scheduled pruner both delete batch by batch, see
:mod:`a2a_trio.store.retention`).
"""

from __future__ import annotations

from datetime import datetime

from .. import queries
from ..retention import PRUNED_KINDS, Pruned, doomed_tasks
from .database import Connection

__all__ = ["count", "delete_batch"]

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
_BATCH = f"""
    WITH doomed AS (
        DELETE FROM tasks WHERE (agent, id) IN (
{doomed_tasks("%(cutoff)s", "%(limit)s")}) RETURNING agent, id
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
        DELETE FROM message_receipts WHERE (agent, owner, message_id, digest) IN (
            SELECT agent, owner, message_id, digest FROM message_receipts
            WHERE created_at < %(cutoff)s ORDER BY created_at LIMIT %(limit)s
        ) RETURNING 1
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
    """What would go now, under the keys of :data:`~a2a_trio.store.retention.PRUNED_KINDS`."""
    row = conn.execute(_COUNT, {"cutoff": cutoff, "finals": queries.FINAL_STATES}).fetchone()
    assert row is not None
    return dict(zip(PRUNED_KINDS, (int(number) for number in row), strict=True))


def delete_batch(conn: Connection, cutoff: datetime, limit: int) -> Pruned:
    """Delete up to ``limit`` finished tasks last updated before ``cutoff`` with
    everything of theirs, and up to ``limit`` receipts stored before it."""
    row = conn.execute(_BATCH, {"cutoff": cutoff, "limit": limit}).fetchone()
    assert row is not None
    return Pruned(*(int(number) for number in row))

"""Pruning on SQLite: finished tasks past a cutoff, with everything of theirs.

:func:`count` reads what would go; :func:`delete_batch`, inside the caller's
transaction, deletes a batch of it (``a2a-trio prune`` and the scheduled
pruner both delete batch by batch, see :mod:`a2a_trio.store.retention`).
Both take the cutoff as an :func:`~a2a_trio.store.records.order_key`.
"""

from __future__ import annotations

import sqlite3

from .. import queries
from ..retention import Pruned, doomed_tasks

__all__ = ["count", "delete_batch"]

_DOOMED = "SELECT agent, id FROM tasks WHERE updated_at < ? AND state IN (?, ?, ?, ?)"
_RECEIPTS = "FROM message_receipts WHERE created_at < ?"
_COUNTING = {
    "tasks": f"SELECT count(*) FROM ({_DOOMED})",
    "events": f"SELECT count(*) FROM task_events WHERE (agent, task_id) IN ({_DOOMED})",
    "push_configs": f"SELECT count(*) FROM push_configs WHERE (agent, task_id) IN ({_DOOMED})",
    "notifications": f"SELECT count(*) FROM push_outbox WHERE (agent, task_id) IN ({_DOOMED})",
    "attempts": "SELECT count(*) FROM push_attempts WHERE outbox_id IN (SELECT id FROM"
    f" push_outbox WHERE (agent, task_id) IN ({_DOOMED}))",
}


def count(conn: sqlite3.Connection, cutoff: str) -> dict[str, int]:
    """How many tasks, events, push configs, notifications, attempts and receipts would go."""
    args = (cutoff, *queries.FINAL_STATES)
    counts = {name: _number(conn, query, args) for name, query in _COUNTING.items()}
    counts["receipts"] = _number(conn, f"SELECT count(*) {_RECEIPTS}", (cutoff,))
    return counts


def _number(conn: sqlite3.Connection, query: str, args: tuple[str, ...]) -> int:
    return int(conn.execute(query, args).fetchone()[0])


def delete_batch(conn: sqlite3.Connection, cutoff: str, limit: int) -> Pruned:
    """Delete up to ``limit`` of the tasks :func:`count` counts, with everything of
    theirs, and up to ``limit`` of its receipts (inside the caller's transaction)."""
    keys = conn.execute(
        doomed_tasks(":cutoff", ":limit"), {"cutoff": cutoff, "limit": limit}
    ).fetchall()
    attempts = conn.executemany(
        "DELETE FROM push_attempts WHERE outbox_id IN"
        " (SELECT id FROM push_outbox WHERE agent = ? AND task_id = ?)",
        keys,
    ).rowcount
    events, configs, notifications = (
        conn.executemany(f"DELETE FROM {table} WHERE agent = ? AND task_id = ?", keys).rowcount
        for table in ("task_events", "push_configs", "push_outbox")
    )
    tasks = conn.executemany("DELETE FROM tasks WHERE agent = ? AND id = ?", keys).rowcount
    receipts = conn.execute(
        f"DELETE FROM message_receipts WHERE (agent, owner, message_id, digest) IN"
        f" (SELECT agent, owner, message_id, digest {_RECEIPTS} ORDER BY created_at LIMIT ?)",
        (cutoff, limit),
    ).rowcount
    return Pruned(tasks, events, configs, notifications, attempts, receipts)

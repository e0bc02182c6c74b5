"""Pruning on SQLite: finished tasks past a cutoff, with everything of theirs.

:func:`count` reads what would go; :func:`delete`, inside the caller's
transaction, deletes it. Both take the cutoff as an
:func:`~a2a_trio.store.records.order_key`.
"""

from __future__ import annotations

import sqlite3

from .. import queries

__all__ = ["count", "delete"]

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


def delete(conn: sqlite3.Connection, cutoff: str) -> None:
    """Delete what :func:`count` counts (inside the caller's transaction)."""
    args = (cutoff, *queries.FINAL_STATES)
    conn.execute(f"DELETE {_RECEIPTS}", (cutoff,))
    conn.execute(
        "DELETE FROM push_attempts WHERE outbox_id IN (SELECT id FROM push_outbox"
        f" WHERE (agent, task_id) IN ({_DOOMED}))",
        args,
    )
    for table in ("push_outbox", "push_configs", "task_events"):
        conn.execute(f"DELETE FROM {table} WHERE (agent, task_id) IN ({_DOOMED})", args)
    conn.execute(f"DELETE FROM tasks WHERE (agent, id) IN ({_DOOMED})", args)

"""Reads of a task and its log on PostgreSQL that take more than one statement.

Each is a plain function of a connection, run by
:meth:`~a2a_trio.store.postgres.Database.run` in a worker thread: one thread
hop, however many statements it takes. :class:`~.store.PostgresStore` runs
them; its one-statement reads use :data:`TASK` and :data:`EVENTS_AFTER` directly.
"""

from __future__ import annotations

from typing import Any

from ...protocol import Message
from ...protocol.limits import Limits
from ..history import HISTORY_KINDS, read_history
from ..records import READ_BACK_KINDS, LoggedEvent, StoredTask, read_task
from .database import Connection, Params
from .recording import HISTORY_ROWS

__all__ = ["EVENTS_AFTER", "TASK", "TASK_SINCE", "history", "task_page", "task_since"]

#: The task's row as :func:`~a2a_trio.store.records.read_task` reads it.
TASK = (
    "SELECT owner, snapshot::text, last_seq, context_id, state FROM tasks"
    " WHERE agent = %s AND id = %s"
)
#: The task's streamed events after a sequence number, in order.
EVENTS_AFTER = (
    "SELECT seq, kind, payload::text FROM task_events WHERE agent = %s AND task_id = %s"
    " AND seq > %s AND kind = ANY(%s::text[]) ORDER BY seq"
)


#: The task's row (its seq NULL: first), then its events after a sequence number:
#: (seq, kind, payload) then the row as :data:`TASK` reads it.
TASK_SINCE = """
    SELECT NULL::bigint, NULL::text, owner, snapshot::text, last_seq, context_id, state
    FROM tasks WHERE agent = %s AND id = %s
    UNION ALL
    SELECT seq, kind, payload::text, NULL, NULL, NULL, NULL FROM task_events
    WHERE agent = %s AND task_id = %s AND seq > %s AND kind = ANY(%s::text[])
    ORDER BY 1 NULLS FIRST
"""


def history(
    conn: Connection,
    agent: str,
    task_id: str,
    *,
    limits: Limits,
    length: int | None,
    through: int | None,
) -> list[Message]:
    """The task's history through event ``through``, read page by page from its log."""
    kinds = list(HISTORY_KINDS)

    def fetch(below: int, limit: int) -> list[tuple[Any, ...]]:
        return conn.execute(HISTORY_ROWS, (agent, task_id, below, kinds, limit)).fetchall()

    return read_history(fetch, through, limits, length)


def task_since(
    conn: Connection, agent: str, task_id: str, seq: int
) -> tuple[StoredTask | None, list[LoggedEvent]]:
    """The task, then its events above ``seq`` (``READ_BACK_KINDS``: see ``Store.task_since``).

    One statement (:data:`TASK_SINCE`), so one round trip, and the events are
    those of the task's row as read (none past it).
    """
    rows = conn.execute(
        TASK_SINCE, (agent, task_id, agent, task_id, seq, list(READ_BACK_KINDS))
    ).fetchall()
    if not rows or rows[0][0] is not None:  # no task row (first, its seq NULL)
        return None, []
    first, *events = rows
    task = read_task(agent, task_id, first[2:])
    return task, [LoggedEvent(int(r[0]), r[1], r[2]) for r in events]


def task_page(
    conn: Connection, filters: str, args: Params, page: str, page_args: Params, size: int
) -> tuple[int, list[tuple[Any, ...]]]:
    """How many tasks match ``filters``, and the rows of one page (``page``: its filter).

    The rows are at most ``size + 1``, most recently updated first: one past
    the page says that another follows.
    """
    count = conn.execute(f"SELECT count(*) FROM tasks WHERE {filters}", args).fetchone()
    rows = conn.execute(
        "SELECT id, updated_at, snapshot::text, context_id, state FROM tasks"
        f" WHERE {page} ORDER BY updated_at DESC, id DESC LIMIT %s",
        [*page_args, size + 1],
    ).fetchall()
    return (int(count[0]) if count else 0), rows

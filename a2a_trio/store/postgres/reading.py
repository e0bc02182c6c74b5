"""Reads of a task and its log on PostgreSQL that take more than one statement.

Each is a plain function of a connection, run by
:meth:`~a2a_trio.store.postgres.Database.run` in a worker thread: one thread
hop, however many statements it takes. :class:`~.store.PostgresStore` runs
them; its one-statement reads use :data:`TASK` and :data:`EVENTS_AFTER` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...protocol import Message
from ...protocol.limits import Limits
from ..history import HISTORY_KINDS, read_history
from ..records import READ_BACK_KINDS, LoggedEvent, StoredTask, read_task
from .database import Connection, Params
from .recording import HISTORY_ROWS

__all__ = ["EVENTS_AFTER", "TASK", "TASKS_SINCE", "history", "task_page", "tasks_since"]

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


#: Tasks' rows, each followed by its events after its own sequence number, by
#: task: (task, seq, kind, payload) then the row as :data:`TASK` reads it; a
#: task's row comes first (its seq NULL). Each task and each task's events are
#: probes of their keys (the subqueries kept apart by their LIMIT and ORDER BY),
#: as the reads of :mod:`.task_reads` are, and for the same reason.
TASKS_SINCE = """
    SELECT t.id, NULL::bigint, NULL::text, t.owner, t.snapshot::text, t.last_seq, t.context_id,
        t.state
    FROM unnest(%s::text[]) AS k (id) CROSS JOIN LATERAL
        (SELECT * FROM tasks WHERE agent = %s AND id = k.id LIMIT 1) t
    UNION ALL
    SELECT c.task_id, e.seq, e.kind, e.payload::text, NULL, NULL, NULL, NULL
    FROM unnest(%s::text[], %s::bigint[]) AS c (task_id, seq) CROSS JOIN LATERAL
        (SELECT seq, kind, payload FROM task_events WHERE agent = %s AND task_id = c.task_id
            AND seq > c.seq AND kind = ANY(%s::text[]) ORDER BY seq) e
    ORDER BY 1, 2 NULLS FIRST
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


def tasks_since(
    conn: Connection, agent: str, cursors: Sequence[tuple[str, int]]
) -> dict[str, tuple[StoredTask | None, list[LoggedEvent]]]:
    """Each task, then its events above its sequence (``Store.tasks_since``), by task id.

    One statement (:data:`TASKS_SINCE`), so one round trip, and the events are
    those of the tasks' rows as read (none past them). A task without a row
    is left out.
    """
    ids = [task_id for task_id, _ in cursors]
    seqs = [seq for _, seq in cursors]
    params = (ids, agent, ids, seqs, agent, list(READ_BACK_KINDS))
    read: dict[str, tuple[StoredTask | None, list[LoggedEvent]]] = {}
    for task_id, seq, kind, *rest in conn.execute(TASKS_SINCE, params):
        if seq is None:
            read[task_id] = (read_task(agent, task_id, rest), [])
        elif task_id in read:
            read[task_id][1].append(LoggedEvent(int(seq), kind, rest[0]))
    return read


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

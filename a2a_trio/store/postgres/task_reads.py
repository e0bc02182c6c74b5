"""Task reads coalesced: the tasks asked for in one scheduling pass, read by one query.

Every follow-up reads its task before anything else (the request's checks),
each read a hop to a database thread and a round trip of its own; under load
several arrive together. The first read waits one checkpoint for the others
asked in the same pass, then reads them all in one statement: one hop, one
round trip. A read asked once that query is sent waits for the next one.

A read whose leader is cancelled (its request went away) or fails asks again,
itself: no read gets another's error, and none is lost.

A follow-up's read may take its task's lease with it (several processes: one
execution of a task at a time, anywhere), in the same statement: the lease is
inserted only if none is in the statement's snapshot, so that the row read is
the one the lease's last holder left (a lease let go, or taken, by a
transaction still under way makes the read leaseless: its reader waits for
the lease as before). One statement for all the reads of the query, the
leases inserted in (agent, task) order, as a round locks its tasks.

Every query is one statement, so the store runs it as its own transaction
(``Database.run(single=True)``): no ``BEGIN`` before it nor ``COMMIT`` after
it, each a round trip that a loaded machine makes as slow as the read itself
(a follow-up's read took 60 ms against 29 ms at load 12, 3 processes).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio

from ...protocol import TaskState
from ..records import StoredTask, read_task
from .database import Connection
from .reading import TASK

__all__ = ["TASKS_BY_KEY", "TASKS_LEASED", "Lease", "TaskReads", "unstorable"]

Key = tuple[str, str]
Row = tuple[Any, ...]
#: The tasks of the keys given as one JSON array of ``[agent, id]`` pairs, as ``t``:
#: each found by its own probe of the primary key. A join of the keys with
#: ``tasks`` would leave the plan to the estimates: the plan a connection keeps
#: (``plan_cache_mode``, see database.py) guesses 10 keys, and while ``tasks``
#: holds a few thousand rows a hash join on a scan of the whole table comes
#: out cheaper, so a follow-up's read cost grew with the tasks stored (0.76 ms
#: of PostgreSQL's time each at 3,400 tasks). A ``LIMIT`` keeps the subquery
#: apart (never pulled up into a join): one probe per key, whatever the sizes.
#:
#: The keys travel as one JSON text, read as ``jsonb``, not as arrays: psycopg
#: dumps an array in Python, element by element (some 650 bytecodes a
#: follow-up's read), a text in C. Six keys, one connection, 7 x 1,000 reads:
#: 270 us a read with two arrays, 141 us as ``jsonb`` (164 us as ``json``,
#: whose every ``->>`` parses its element again); PostgreSQL's own part
#: 19.1, 16.1 and 20.9 us.
_BY_KEY = (
    "jsonb_array_elements(%s::jsonb) AS k CROSS JOIN LATERAL"
    " (SELECT * FROM tasks WHERE agent = k->>0 AND id = k->>1 LIMIT 1) t"
)
#: A lease to take with a read: (owner the task must have, holder, token).
Lease = tuple[str, str, str]
#: The final states, as a literal of the statement (fixed names: nothing to quote).
_FINAL = ", ".join(f"'{state.value}'" for state in TaskState if state.is_final)

#: The rows of the tasks asked for, as :data:`TASKS_BY_KEY` reads them, each with whether
#: its lease was taken: the task the lease's owner's and open, and no lease seen. The
#: leases asked for are one JSON array of ``[agent, id, owner, holder, token]``.
TASKS_LEASED = (
    "WITH wanted AS (SELECT w->>0 AS agent, w->>1 AS id, w->>2 AS owner, w->>3 AS holder,"
    " w->>4 AS token FROM jsonb_array_elements(%s::jsonb) AS w),"
    " leased AS (INSERT INTO task_leases (agent, task_id, holder, token, since)"
    " SELECT t.agent, t.id, w.holder, w.token, now() FROM wanted w CROSS JOIN LATERAL"
    " (SELECT agent, id FROM tasks WHERE agent = w.agent AND id = w.id AND owner = w.owner"
    f" AND state NOT IN ({_FINAL}) AND NOT EXISTS (SELECT FROM task_leases l"
    " WHERE l.agent = tasks.agent AND l.task_id = tasks.id) LIMIT 1) t"
    " ORDER BY t.agent, t.id ON CONFLICT (agent, task_id) DO NOTHING RETURNING agent, task_id)"
    " SELECT t.agent, t.id, t.owner, t.snapshot::text, t.last_seq, t.context_id, t.state,"
    " EXISTS (SELECT FROM leased WHERE leased.agent = t.agent AND leased.task_id = t.id)"
    f" FROM {_BY_KEY}"
)

#: The rows of several tasks, keyed by (agent, id), as :data:`TASK` reads one.
TASKS_BY_KEY = (
    "SELECT t.agent, t.id, t.owner, t.snapshot::text, t.last_seq, t.context_id, t.state"
    f" FROM {_BY_KEY}"
)


def _read(
    conn: Connection, keys: list[Key], leases: dict[Key, Lease]
) -> tuple[dict[Key, Row], set[Key]]:
    if not leases:
        return _select(conn, keys), set()
    asked = json.dumps([[*key, *leases[key]] for key in sorted(leases)])
    rows = conn.execute(TASKS_LEASED, (asked, json.dumps(keys))).fetchall()
    found = {(r[0], r[1]): r[2:-1] for r in rows}
    return found, {(r[0], r[1]) for r in rows if r[-1]}


def _select(conn: Connection, keys: list[Key]) -> dict[Key, Row]:
    if len(keys) == 1:
        row = conn.execute(TASK, keys[0]).fetchone()
        return {} if row is None else {keys[0]: row}
    return {(r[0], r[1]): r[2:] for r in conn.execute(TASKS_BY_KEY, (json.dumps(keys),))}


@dataclass(eq=False)
class _Batch:
    keys: set[Key]
    #: The leases to take with the reads (one per task at most).
    leases: dict[Key, Lease] = field(default_factory=dict)
    done: trio.Event = field(default_factory=trio.Event)
    #: The rows found (a task missing: no key), once read.
    rows: dict[Key, Row] | None = None
    #: The tasks whose lease was taken, once read.
    leased: set[Key] = field(default_factory=set)


class TaskReads:
    """Reads tasks' rows (as :data:`TASK` does), those asked together in one query."""

    def __init__(self, run: Callable[[Callable[[Connection], Any]], Awaitable[Any]]) -> None:
        self._run = run
        self._gathering: _Batch | None = None

    async def task(
        self, agent: str, task_id: str, owner: str | None, lease: tuple[str, str] | None = None
    ) -> tuple[StoredTask | None, bool]:
        """The task if it exists and is ``owner``'s (any owner's: None); whether the
        task's lease ``(holder, token)`` was taken with it (see :meth:`row_leased`)."""
        if unstorable(agent, task_id):
            return None, False
        taken = None if lease is None or owner is None else (owner, *lease)
        row, leased = await self.row_leased(agent, task_id, taken)
        if row is None or (owner is not None and row[0] != owner):
            return None, False
        return read_task(agent, task_id, row), leased

    async def row(self, agent: str, task_id: str) -> Row | None:
        """The task's row (owner, snapshot, last_seq, context_id, state), or None."""
        row, _ = await self.row_leased(agent, task_id, None)
        return row

    async def row_leased(
        self, agent: str, task_id: str, lease: Lease | None
    ) -> tuple[Row | None, bool]:
        """:meth:`row`, and whether the task's ``lease`` was taken with it.

        Taken if the task is the lease's owner's and not final and nobody
        else holds its lease; one lease a task per query (another read asking
        for one in the same query gets the row only).
        """
        key = (agent, task_id)
        while True:
            batch = self._gathering
            if batch is None:
                batch = self._gathering = _Batch({key})
                mine = self._ask(batch, key, lease)
                await self._lead(batch)
            else:
                batch.keys.add(key)
                mine = self._ask(batch, key, lease)
                await batch.done.wait()
            if batch.rows is not None:
                return batch.rows.get(key), mine and key in batch.leased
            # Its leader went away or failed before reading: ask again.

    @staticmethod
    def _ask(batch: _Batch, key: Key, lease: Lease | None) -> bool:
        """Add ``lease`` to the batch; whether it is this read's (one a task per query)."""
        if lease is None or key in batch.leases:
            return False
        batch.leases[key] = lease
        return True

    async def _lead(self, batch: _Batch) -> None:
        try:
            await trio.lowlevel.checkpoint()  # the reads asked in this pass join
            self._gathering = None  # later ones wait for the next query
            work = partial(_read, keys=sorted(batch.keys), leases=batch.leases)
            batch.rows, batch.leased = await self._run(work)
        finally:
            if self._gathering is batch:
                self._gathering = None
            batch.done.set()


def unstorable(*keys: str) -> bool:
    """Whether a key holds U+0000, which no PostgreSQL text can: it names nothing stored.

    The protocol accepts it in ids; SQLite looks such a key up and finds
    nothing, and so does this store, without asking the database (which
    would refuse the parameter).
    """
    return any("\0" in key for key in keys)

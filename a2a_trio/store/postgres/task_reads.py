"""Task reads coalesced: the tasks asked for in one scheduling pass, read by one query.

Every follow-up reads its task before anything else (the request's checks),
each read a hop to a database thread and a round trip of its own; under load
several arrive together. The first read waits one checkpoint for the others
asked in the same pass, then reads them all in one statement: one hop, one
round trip. A read asked once that query is sent waits for the next one.

A read whose leader is cancelled (its request went away) or fails asks again,
itself: no read gets another's error, and none is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio

from .database import Connection
from .reading import TASK

__all__ = ["TaskReads"]

Key = tuple[str, str]
Row = tuple[Any, ...]

#: The rows of several tasks, keyed by (agent, id), as :data:`TASK` reads one.
_TASKS = (
    "SELECT agent, id, owner, snapshot::text, last_seq, context_id, state FROM tasks"
    " WHERE (agent, id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
)


@dataclass(eq=False)
class _Batch:
    keys: set[Key]
    done: trio.Event = field(default_factory=trio.Event)
    #: The rows found (a task missing: no key), once read.
    rows: dict[Key, Row] | None = None


def _read(conn: Connection, keys: list[Key]) -> dict[Key, Row]:
    if len(keys) == 1:
        row = conn.execute(TASK, keys[0]).fetchone()
        return {} if row is None else {keys[0]: row}
    agents, ids = [agent for agent, _ in keys], [task_id for _, task_id in keys]
    return {(r[0], r[1]): r[2:] for r in conn.execute(_TASKS, (agents, ids)).fetchall()}


class TaskReads:
    """Reads tasks' rows (as :data:`TASK` does), those asked together in one query."""

    def __init__(self, run: Callable[[Callable[[Connection], Any]], Awaitable[Any]]) -> None:
        self._run = run
        self._gathering: _Batch | None = None

    async def row(self, agent: str, task_id: str) -> Row | None:
        """The task's row (owner, snapshot, last_seq, context_id, state), or None."""
        key = (agent, task_id)
        while True:
            batch = self._gathering
            if batch is None:
                return await self._lead(key)
            batch.keys.add(key)
            await batch.done.wait()
            if batch.rows is not None:
                return batch.rows.get(key)
            # Its leader went away or failed before reading: ask again.

    async def _lead(self, key: Key) -> Row | None:
        batch = self._gathering = _Batch({key})
        try:
            await trio.lowlevel.checkpoint()  # the reads asked in this pass join
            self._gathering = None  # later ones wait for the next query
            rows: dict[Key, Row] = await self._run(partial(_read, keys=sorted(batch.keys)))
            batch.rows = rows
        finally:
            if self._gathering is batch:
                self._gathering = None
            batch.done.set()
        return rows.get(key)

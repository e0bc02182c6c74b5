"""PostgreSQL task reads asked together are one query (see store/postgres/task_reads.py).

The reads run on the real database; ``queries`` notes the keys of each query
the reads send through the pool, as :class:`PostgresStore` runs them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
import trio

from a2a_trio.store.postgres import Database
from a2a_trio.store.postgres.database import Connection
from a2a_trio.store.postgres.task_reads import TaskReads
from a2a_trio.store.url import PostgresLocation

from .postgres import database_of_tasks
from .writes import AGENT


class Noted:
    """The pool's ``run``, noting the keys each read sends (the query itself runs)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.queries: list[list[tuple[str, str]]] = []

    async def run(self, work: Callable[[Connection], Any]) -> Any:
        self.queries.append(list(work.keywords["keys"]))  # type: ignore[attr-defined]
        return await self.db.run(work)


@pytest.fixture
async def noted(postgres: PostgresLocation) -> AsyncIterator[Noted]:
    async with database_of_tasks(postgres, 4) as (location, _), Database.open(location) as db:
        yield Noted(db)


async def read_all(reads: TaskReads, ids: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def read(task_id: str) -> None:
        found[task_id] = await reads.row(AGENT, task_id)

    async with trio.open_nursery() as nursery:
        for task_id in ids:
            nursery.start_soon(read, task_id)
    return found


async def test_reads_asked_together_are_one_query(noted: Noted) -> None:
    reads = TaskReads(noted.run)
    found = await read_all(reads, ["t-0", "t-1", "t-2", "missing"])
    assert len(noted.queries) == 1
    assert sorted(noted.queries[0]) == sorted((AGENT, t) for t in ("t-0", "t-1", "t-2", "missing"))
    assert found["missing"] is None
    for task_id in ("t-0", "t-1", "t-2"):
        owner, snapshot, last_seq, *_ = found[task_id]
        assert (owner, last_seq) == ("alice", 1) and task_id in snapshot


async def test_a_read_asked_alone_is_the_one_row_query(noted: Noted) -> None:
    reads = TaskReads(noted.run)
    row = await reads.row(AGENT, "t-3")
    assert row is not None and row[2] == 1
    assert noted.queries == [[(AGENT, "t-3")]]


class FailingFirst(Noted):
    """The first query sent fails on the database (a division by zero)."""

    async def run(self, work: Callable[[Connection], Any]) -> Any:
        if not self.queries:
            self.queries.append(list(work.keywords["keys"]))  # type: ignore[attr-defined]
            return await self.db.run(lambda conn: conn.execute("SELECT 1 / 0").fetchone())
        return await super().run(work)


async def test_the_reads_that_joined_a_failed_read_are_read_again(noted: Noted) -> None:
    failing = FailingFirst(noted.db)
    reads = TaskReads(failing.run)
    found: dict[str, Any] = {}
    failed: list[str] = []

    async def read(task_id: str) -> None:
        try:
            found[task_id] = await reads.row(AGENT, task_id)
        except psycopg.errors.DivisionByZero:
            failed.append(task_id)

    async with trio.open_nursery() as nursery:
        for task_id in ("t-0", "t-1", "t-2"):
            nursery.start_soon(read, task_id)
    # The read that sent the failed query gets its error; the others, their rows.
    [leader] = failed
    assert sorted(found) == sorted({"t-0", "t-1", "t-2"} - {leader})
    assert all(row is not None for row in found.values())
    assert [sorted(keys) for keys in failing.queries] == [
        [(AGENT, "t-0"), (AGENT, "t-1"), (AGENT, "t-2")],
        sorted((AGENT, task_id) for task_id in found),
    ]

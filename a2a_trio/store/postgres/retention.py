"""Retention on PostgreSQL (see :mod:`a2a_trio.store.retention`): each batch one statement.

The batch is :func:`.pruning.delete_batch`, as ``a2a-trio prune`` deletes;
the runs' table is made by the schema (:mod:`.schema`). Liveness of a run's
lease is judged by the database's clock (``now()``), as the members' are, so
the processes' clocks may disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from ..records import order_key
from ..retention import RUN_COUNTS, Pruned, Retention, RunOutcome, RunRecord, read_run
from .database import Connection
from .pruning import delete_batch
from .times import utc

__all__ = ["PostgresRetention"]

T = TypeVar("T")
Run = Callable[[Callable[[Connection], T]], Any]

_SET_COUNTS = ", ".join(f"{name} = %s" for name in RUN_COUNTS)


class PostgresRetention(Retention):
    """On the store's pool: ``run`` is its transaction runner (``Database.run``)."""

    def __init__(self, run: Run[Any]) -> None:
        self._run = run

    async def prune_batch(self, older_than: datetime, limit: int) -> Pruned:
        batch = partial(delete_batch, cutoff=utc(older_than), limit=limit)
        result: Pruned = await self._run(batch)
        return result

    async def begin_run(self, holder: str, lease_seconds: float) -> int | None:
        def begin(conn: Connection) -> int | None:
            conn.execute(
                "UPDATE retention_runs SET lease = NULL, outcome = 'abandoned',"
                " finished_at = expires_at WHERE lease IS NOT NULL AND expires_at < now()"
            )
            row = conn.execute(
                "INSERT INTO retention_runs (holder, lease, started_at, expires_at)"
                " VALUES (%s, 'held', clock_timestamp(),"
                " clock_timestamp() + %s * interval '1 second')"
                " ON CONFLICT (lease) DO NOTHING RETURNING id",
                (holder, lease_seconds),
            ).fetchone()
            return None if row is None else int(row[0])

        result: int | None = await self._run(begin)
        return result

    async def renew_run(
        self, run: int, pruned: Pruned, batches: int, largest: int, lease_seconds: float
    ) -> bool:
        def renew(conn: Connection) -> bool:
            cursor = conn.execute(
                "UPDATE retention_runs SET"
                " expires_at = clock_timestamp() + %s * interval '1 second',"
                f" {_SET_COUNTS} WHERE id = %s AND lease IS NOT NULL",
                (lease_seconds, batches, largest, *pruned.as_dict().values(), run),
            )
            return bool(cursor.rowcount)

        result: bool = await self._run(renew)
        return result

    async def end_run(
        self,
        run: int,
        pruned: Pruned,
        batches: int,
        largest: int,
        outcome: RunOutcome,
        forget_before: datetime,
    ) -> None:
        def end(conn: Connection) -> None:
            conn.execute(
                "UPDATE retention_runs SET lease = NULL, finished_at = clock_timestamp(),"
                f" outcome = %s, {_SET_COUNTS} WHERE id = %s AND lease IS NOT NULL",
                (outcome, batches, largest, *pruned.as_dict().values(), run),
            )
            conn.execute("DELETE FROM retention_runs WHERE finished_at < %s", (utc(forget_before),))

        await self._run(end)

    async def runs(self, limit: int = 100) -> list[RunRecord]:
        def read(conn: Connection) -> list[RunRecord]:
            rows = conn.execute(
                "SELECT id, holder, started_at, finished_at, outcome,"
                f" {', '.join(RUN_COUNTS)} FROM retention_runs ORDER BY id DESC LIMIT %s",
                (limit,),
            ).fetchall()
            return [
                read_run(
                    (row[0], row[1], order_key(row[2]), row[3] and order_key(row[3]), *row[4:])
                )
                for row in rows
            ]

        result: list[RunRecord] = await self._run(read)
        return result

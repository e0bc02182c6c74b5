"""Retention on SQLite (see :mod:`a2a_trio.store.retention`): each batch one ``BEGIN IMMEDIATE``.

SQLite runs its statements on the trio thread, so a batch holds up the
process for as long as it takes: the batch size bounds that stall. The batch
is :func:`.pruning.delete_batch`, as ``a2a-trio prune`` deletes; the runs'
table is made by the schema (:mod:`a2a_trio.store.schema`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ...protocol import utcnow
from ..records import order_key
from ..retention import RUN_COUNTS, Pruned, Retention, RunOutcome, RunRecord, read_run
from .database import Database
from .pruning import delete_batch

__all__ = ["SqliteRetention"]

#: ``batches = ?, largest_batch = ?`` and each count's ``= ?``.
_SET_COUNTS = ", ".join(f"{name} = ?" for name in RUN_COUNTS)


class SqliteRetention(Retention):
    """On the store's writing connection, one transaction at a time."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def prune_batch(self, older_than: datetime, limit: int) -> Pruned:
        async with self._database.transaction() as conn:
            return delete_batch(conn, order_key(older_than), limit)

    async def begin_run(self, holder: str, lease_seconds: float) -> int | None:
        now = utcnow()
        async with self._database.transaction() as conn:
            conn.execute(
                "UPDATE retention_runs SET lease = NULL, outcome = 'abandoned',"
                " finished_at = expires_at WHERE lease IS NOT NULL AND expires_at < ?",
                (order_key(now),),
            )
            cursor = conn.execute(
                "INSERT INTO retention_runs (holder, lease, started_at, expires_at)"
                " VALUES (?, 'held', ?, ?) ON CONFLICT (lease) DO NOTHING",
                (holder, order_key(now), order_key(now + timedelta(seconds=lease_seconds))),
            )
            return cursor.lastrowid if cursor.rowcount else None

    async def renew_run(
        self, run: int, pruned: Pruned, batches: int, largest: int, lease_seconds: float
    ) -> bool:
        expires = order_key(utcnow() + timedelta(seconds=lease_seconds))
        async with self._database.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE retention_runs SET expires_at = ?, {_SET_COUNTS}"
                " WHERE id = ? AND lease IS NOT NULL",
                (expires, batches, largest, *pruned.as_dict().values(), run),
            )
            return bool(cursor.rowcount)

    async def end_run(
        self,
        run: int,
        pruned: Pruned,
        batches: int,
        largest: int,
        outcome: RunOutcome,
        forget_before: datetime,
    ) -> None:
        async with self._database.transaction() as conn:
            conn.execute(
                f"UPDATE retention_runs SET lease = NULL, finished_at = ?, outcome = ?,"
                f" {_SET_COUNTS} WHERE id = ? AND lease IS NOT NULL",
                (order_key(utcnow()), outcome, batches, largest, *pruned.as_dict().values(), run),
            )
            conn.execute(
                "DELETE FROM retention_runs WHERE finished_at < ?", (order_key(forget_before),)
            )

    async def runs(self, limit: int = 100) -> list[RunRecord]:
        rows = self._database.reads.execute(
            "SELECT id, holder, started_at, finished_at, outcome,"
            f" {', '.join(RUN_COUNTS)} FROM retention_runs ORDER BY id DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [read_run(row) for row in rows]

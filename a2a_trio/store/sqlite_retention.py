"""Retention on SQLite (see :mod:`.retention`): each batch one ``BEGIN IMMEDIATE``.

SQLite runs its statements on the trio thread, so a batch holds up the
process for as long as it takes: the batch size bounds that stall.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta

import sqlite_utils

from ..protocol import utcnow
from .records import order_key
from .retention import (
    RUN_COUNTS,
    Pruned,
    Retention,
    RunOutcome,
    RunRecord,
    doomed_tasks,
    read_run,
)

__all__ = ["SqliteRetention", "create_retention_tables"]

Transaction = Callable[[], AbstractAsyncContextManager[sqlite3.Connection]]

#: ``batches = ?, largest_batch = ?`` and each count's ``= ?``.
_SET_COUNTS = ", ".join(f"{name} = ?" for name in RUN_COUNTS)


def create_retention_tables(db: sqlite_utils.Database) -> None:
    """The runs' records (``lease`` is 'held' while one runs: one at a time), and
    the outbox by task, which a batch deletes by."""
    db.execute(
        f"""
        CREATE TABLE IF NOT EXISTS retention_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            holder TEXT NOT NULL,
            lease TEXT UNIQUE,
            started_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            finished_at TEXT,
            outcome TEXT,
            {", ".join(f"{name} INTEGER NOT NULL DEFAULT 0" for name in RUN_COUNTS)}
        )
        """
    )
    db.execute("CREATE INDEX IF NOT EXISTS push_outbox_by_task ON push_outbox (agent, task_id, id)")


class SqliteRetention(Retention):
    """On the store's writing connection, one transaction at a time."""

    def __init__(self, transaction: Transaction, reads: Callable[[], sqlite3.Connection]) -> None:
        self._transaction = transaction
        self._reads = reads

    async def prune_batch(self, older_than: datetime, limit: int) -> Pruned:
        cutoff = order_key(older_than)
        async with self._transaction() as conn:
            keys = conn.execute(
                doomed_tasks(":cutoff", ":limit"), {"cutoff": cutoff, "limit": limit}
            ).fetchall()
            attempts = conn.executemany(
                "DELETE FROM push_attempts WHERE outbox_id IN"
                " (SELECT id FROM push_outbox WHERE agent = ? AND task_id = ?)",
                keys,
            ).rowcount
            counts = [
                conn.executemany(
                    f"DELETE FROM {table} WHERE agent = ? AND task_id = ?", keys
                ).rowcount
                for table in ("task_events", "push_configs", "push_outbox")
            ]
            tasks = conn.executemany("DELETE FROM tasks WHERE agent = ? AND id = ?", keys).rowcount
            receipts = conn.execute(
                "DELETE FROM message_receipts WHERE (agent, owner, message_id, digest) IN"
                " (SELECT agent, owner, message_id, digest FROM message_receipts"
                "  WHERE created_at < ? ORDER BY created_at LIMIT ?)",
                (cutoff, limit),
            ).rowcount
        events, configs, notifications = counts
        return Pruned(tasks, events, configs, notifications, attempts, receipts)

    async def begin_run(self, holder: str, lease_seconds: float) -> int | None:
        now = utcnow()
        async with self._transaction() as conn:
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
        async with self._transaction() as conn:
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
        async with self._transaction() as conn:
            conn.execute(
                f"UPDATE retention_runs SET lease = NULL, finished_at = ?, outcome = ?,"
                f" {_SET_COUNTS} WHERE id = ? AND lease IS NOT NULL",
                (order_key(utcnow()), outcome, batches, largest, *pruned.as_dict().values(), run),
            )
            conn.execute(
                "DELETE FROM retention_runs WHERE finished_at < ?", (order_key(forget_before),)
            )

    async def runs(self, limit: int = 100) -> list[RunRecord]:
        rows = (
            self._reads()
            .execute(
                "SELECT id, holder, started_at, finished_at, outcome,"
                f" {', '.join(RUN_COUNTS)} FROM retention_runs ORDER BY id DESC LIMIT ?",
                (limit,),
            )
            .fetchall()
        )
        return [read_run(row) for row in rows]

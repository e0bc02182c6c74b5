"""Retention on PostgreSQL (see :mod:`..retention`): each batch one statement.

Liveness of a run's lease is judged by the database's clock (``now()``), as
the members' are, so the processes' clocks may disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from ..records import order_key
from ..retention import (
    RUN_COUNTS,
    Pruned,
    Retention,
    RunOutcome,
    RunRecord,
    doomed_tasks,
    read_run,
)
from .database import Connection
from .times import utc

__all__ = ["RETENTION_TABLES", "PostgresRetention"]

T = TypeVar("T")
Run = Callable[[Callable[[Connection], T]], Any]

#: The runs' records: ``lease`` is 'held' while one runs (unique: one at a time).
RETENTION_TABLES = (
    f"""
    CREATE TABLE retention_runs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        holder text COLLATE "C" NOT NULL,
        lease text UNIQUE,
        started_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        finished_at timestamptz,
        outcome text,
        {", ".join(f"{name} bigint NOT NULL DEFAULT 0" for name in RUN_COUNTS)}
    )
    """,
)

# One statement, one snapshot: the counts are exactly the rows deleted.
_BATCH = f"""
    WITH doomed AS (
        DELETE FROM tasks WHERE (agent, id) IN (
{doomed_tasks("%(cutoff)s", "%(limit)s")}) RETURNING agent, id
    ),
    events AS (
        DELETE FROM task_events WHERE (agent, task_id) IN (SELECT * FROM doomed) RETURNING 1
    ),
    configs AS (
        DELETE FROM push_configs WHERE (agent, task_id) IN (SELECT * FROM doomed) RETURNING 1
    ),
    outbox AS (
        DELETE FROM push_outbox WHERE (agent, task_id) IN (SELECT * FROM doomed) RETURNING id
    ),
    attempts AS (
        DELETE FROM push_attempts WHERE outbox_id IN (SELECT id FROM outbox) RETURNING 1
    ),
    receipts AS (
        DELETE FROM message_receipts WHERE (agent, owner, message_id, digest) IN (
            SELECT agent, owner, message_id, digest FROM message_receipts
            WHERE created_at < %(cutoff)s ORDER BY created_at LIMIT %(limit)s
        ) RETURNING 1
    )
    SELECT
        (SELECT count(*) FROM doomed),
        (SELECT count(*) FROM events),
        (SELECT count(*) FROM configs),
        (SELECT count(*) FROM outbox),
        (SELECT count(*) FROM attempts),
        (SELECT count(*) FROM receipts)
"""

_SET_COUNTS = ", ".join(f"{name} = %s" for name in RUN_COUNTS)


class PostgresRetention(Retention):
    """On the store's pool: ``run`` is its transaction runner (``Database.run``)."""

    def __init__(self, run: Run[Any]) -> None:
        self._run = run

    async def prune_batch(self, older_than: datetime, limit: int) -> Pruned:
        params = {"cutoff": utc(older_than), "limit": limit}

        def batch(conn: Connection) -> Pruned:
            row = conn.execute(_BATCH, params).fetchone()
            assert row is not None
            return Pruned(*(int(count) for count in row))

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

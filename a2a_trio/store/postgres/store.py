"""The store on PostgreSQL: every method of :class:`~a2a_trio.store.Store`, as SQLite has it.

Each call is one unit of work on a pooled connection in a worker thread
(:meth:`Database.run`): one thread hop and one transaction, however many
statements it takes. What comes back is what the SQLite store returns for the
same calls, down to the time strings and page tokens; docs/storage.md lists
what is stored where.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from datetime import datetime
from functools import partial
from typing import Any, Literal, TypeVar

import psycopg

from ...protocol import PROTOCOL_VERSION, Message, TaskPushNotificationConfig, TaskState
from ...protocol.limits import Limits
from .. import browse, queries
from ..base import Store
from ..browse import OutboxSummary, SummaryPage, TimelineEntry
from ..outbox_caps import cap_parameters, cap_statement
from ..records import (
    READ_BACK_KINDS,
    STREAMED_KINDS,
    Delivery,
    Lane,
    LoggedEvent,
    Notification,
    Receipt,
    StoredTask,
    TaskPage,
    decode_page_token,
    order_key,
    read_deliveries,
    read_push_config,
    read_task,
    read_task_page,
)
from ..retention import prune_in_batches
from ..rounds import Round, ShareOutcome
from ..secrets import SecretBox
from ..space import StorageCondition
from ..url import PostgresLocation
from . import outbox, pruning, reading
from .cluster import PostgresCoordination
from .database import Connection, Database, PoolSettings
from .keys import development_key
from .reading import EVENTS_AFTER
from .recording import RefusedShare, insert_push_config, write_round
from .retention import PostgresRetention
from .schema import SCHEMA_VERSION, migrate, schema_version
from .task_reads import TaskReads, unstorable
from .times import page_time, utc

__all__ = ["PostgresStore"]

_CAP_OUTBOX = cap_statement("%s", "now()")

T = TypeVar("T")


class PostgresStore(Store):
    """The durable state of every agent mounted on one PostgreSQL database.

    Without ``secret_key`` push secrets are sealed with a development key kept
    in the database (:mod:`.keys`); production configures one. Any number of
    processes may serve one database: they coordinate through
    :attr:`coordination` (``lease_seconds`` is how long a member lives
    without a heartbeat).
    """

    def __init__(
        self,
        location: PostgresLocation,
        *,
        secret_key: str | bytes | None = None,
        pool: PoolSettings | None = None,
        lease_seconds: float = 10.0,
    ) -> None:
        self.location = location
        self.display = location.display
        self._secret_key = secret_key
        self._pool = pool or PoolSettings()
        self._lease_seconds = lease_seconds
        self._db: Database | None = None
        self._box: SecretBox | None = None
        self._coordination: PostgresCoordination | None = None
        self._resources: AsyncExitStack | None = None
        self.space = StorageCondition(self.display)
        # Each query of the reads is one statement: its own transaction, no
        # BEGIN and COMMIT round trips around it (see Database.run).
        self._task_reads = TaskReads(partial(self._run, single=True))

    # --- lifetime -----------------------------------------------------------------

    async def open(self, *, exclusive: bool = False) -> None:
        # ``exclusive`` holds nothing here: several processes serve one
        # PostgreSQL database, each a member of :attr:`coordination`.
        if self._db is None:
            # A malformed key is refused before anything is connected.
            box = None if self._secret_key is None else SecretBox(self._secret_key)
            async with AsyncExitStack() as resources:
                db = await resources.enter_async_context(Database.open(self.location, self._pool))
                key = await db.run(partial(_prepare, display=self.display, keyed=box is not None))
                if box is None:
                    assert key is not None
                    box = SecretBox(key)
                self._db, self._box, self._resources = db, box, resources.pop_all()
                self._coordination = PostgresCoordination(db, lease_seconds=self._lease_seconds)

    async def check(self) -> None:
        found = await self._run(schema_version)
        if found != SCHEMA_VERSION:
            raise RuntimeError(f"schema version {found}; this a2a-trio uses {SCHEMA_VERSION}")

    @property
    def coordination(self) -> PostgresCoordination | None:
        return self._coordination

    async def aclose(self) -> None:
        resources, self._resources = self._resources, None
        self._db = self._box = self._coordination = None
        if resources is not None:
            await resources.aclose()

    async def _run(self, work: Callable[[Connection], T], *, single: bool = False) -> T:
        """``work`` in one transaction (``single``: of its one statement; see Database.run)."""
        if self._db is None:
            raise RuntimeError(f"the store for {self.display} is not open: await open() first")
        try:
            return await self._db.run(work, single=single)
        except psycopg.errors.DiskFull as error:  # SQLSTATE 53100: nothing was stored
            raise self.space.refused(error) from error

    async def _write(self, work: Callable[[Connection], T], *, single: bool = False) -> T:
        """:meth:`_run` for work that writes: its success says there is space."""
        result = await self._run(work, single=single)
        self.space.wrote()
        return result

    async def _fetchall(self, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
        return await self._run(lambda conn: conn.execute(query, params).fetchall(), single=True)

    async def _fetchone(self, query: str, params: Any = ()) -> tuple[Any, ...] | None:
        return await self._run(lambda conn: conn.execute(query, params).fetchone(), single=True)

    async def _execute(self, query: str, params: Any = ()) -> int:
        return await self._write(lambda conn: conn.execute(query, params).rowcount, single=True)

    @property
    def _secrets(self) -> SecretBox:
        if self._box is None:
            raise RuntimeError(f"the store for {self.display} is not open: await open() first")
        return self._box

    # --- tasks and their log ------------------------------------------------------------

    async def record(self, round: Round) -> list[ShareOutcome]:
        if not round.shares:
            return []
        try:
            return await self._write(partial(self._write_round, round=round, box=self._secrets))
        except RefusedShare as refused:  # rolled back: nothing of the round is stored
            return [ShareOutcome(error=refused.error)]

    def _write_round(self, conn: Connection, round: Round, box: SecretBox) -> list[ShareOutcome]:
        """:func:`write_round`, then the outbox caps of the tasks it queued for."""
        outcomes = write_round(conn, round, box)
        for share, outcome in zip(round.shares, outcomes, strict=True):
            if outcome.queued:
                conn.execute(
                    _CAP_OUTBOX, cap_parameters(self.outbox_caps, share.agent, share.task_id)
                )
        return outcomes

    async def get_task(self, agent: str, task_id: str, *, owner: str | None) -> StoredTask | None:
        return (await self._task_reads.task(agent, task_id, owner))[0]

    async def get_task_leased(
        self, agent: str, task_id: str, *, owner: str, lease: tuple[str, str]
    ) -> tuple[StoredTask | None, bool]:
        return await self._task_reads.task(agent, task_id, owner, lease)

    async def events_after(
        self, agent: str, task_id: str, seq: int, *, messages: bool = False
    ) -> list[LoggedEvent]:
        if unstorable(agent, task_id):
            return []
        kinds = list(READ_BACK_KINDS if messages else STREAMED_KINDS)
        rows = await self._fetchall(EVENTS_AFTER, (agent, task_id, seq, kinds))
        return [LoggedEvent(int(r[0]), r[1], r[2]) for r in rows]

    async def history(
        self,
        agent: str,
        task_id: str,
        *,
        limits: Limits,
        length: int | None = None,
        through: int | None = None,
    ) -> list[Message]:
        if unstorable(agent, task_id):
            return []
        read = partial(
            reading.history,
            agent=agent,
            task_id=task_id,
            limits=limits,
            length=length,
            through=through,
        )
        return await self._run(read)

    async def task_since(
        self, agent: str, task_id: str, seq: int
    ) -> tuple[StoredTask | None, list[LoggedEvent]]:
        if unstorable(agent, task_id):
            return None, []
        read = await self.tasks_since(agent, [(task_id, seq)])
        return read.get(task_id, (None, []))

    async def tasks_since(
        self, agent: str, cursors: Sequence[tuple[str, int]]
    ) -> dict[str, tuple[StoredTask | None, list[LoggedEvent]]]:
        cursors = [(task_id, seq) for task_id, seq in cursors if not unstorable(task_id)]
        if unstorable(agent) or not cursors:
            return {}
        work = partial(reading.tasks_since, agent=agent, cursors=cursors)
        return await self._run(work, single=True)

    async def list_tasks(
        self,
        agent: str,
        owner: str,
        *,
        context_id: str | None = None,
        state: TaskState | None = None,
        updated_after: datetime | None = None,
        page_size: int = 50,
        page_token: str | None = None,
    ) -> TaskPage:
        cursor = None
        if page_token:
            updated, last_id = decode_page_token(page_token)
            cursor = (page_time(updated), last_id)
        if unstorable(agent, owner, context_id or ""):
            return TaskPage([], "", 0)
        filters, args = queries.task_filters(
            "%s", utc, agent, owner, context_id=context_id, state=state, updated_after=updated_after
        )
        page_where, page_args = filters, list(args)
        if cursor is not None:
            page_where += " AND (updated_at, id) < (%s, %s)"
            page_args += [cursor[0], cursor[1]]
        total, rows = await self._run(
            lambda conn: reading.task_page(conn, filters, args, page_where, page_args, page_size)
        )
        return read_task_page(rows, page_size, total, order_key)

    async def unfinished_tasks(
        self, agent: str | None = None, *, task_id: str | None = None
    ) -> list[StoredTask]:
        continued = queries.continued("e.payload->>'role'")
        clause, args = queries.where(
            "%s",
            f"(t.state = ANY(%s) OR (t.state = ANY(%s) AND {continued}))",
            agent=agent,
            id=task_id,
        )
        rows = await self._fetchall(
            "SELECT agent, id, owner, snapshot::text, last_seq, context_id, state FROM tasks t"
            f"{clause} ORDER BY updated_at, agent, id",
            [queries.UNFINISHED_STATES, queries.PAUSED_STATES, *args],
        )
        return [read_task(row[0], row[1], row[2:]) for row in rows]

    async def prune(self, older_than: datetime, *, dry_run: bool = False) -> dict[str, int]:
        if dry_run:
            return await self._run(partial(pruning.count, cutoff=utc(older_than)))
        return (await prune_in_batches(self.retention, older_than)).as_dict()

    @property
    def retention(self) -> PostgresRetention:
        return PostgresRetention(self._run)

    # --- message receipts (retries, spec 3.3.1) ----------------------------------------

    async def remembered_messages(self, agent: str, since: datetime) -> list[tuple[str, str]]:
        rows = await self._fetchall(
            "SELECT owner, message_id FROM message_receipts WHERE agent = %s AND created_at >= %s",
            (agent, utc(since)),
        )
        return [(row[0], row[1]) for row in rows]

    async def find_message(
        self, agent: str, owner: str, message_id: str, digest: str, since: datetime
    ) -> Receipt | None:
        if unstorable(agent, owner, message_id, digest):
            return None
        row = await self._fetchone(
            "SELECT task_id, seq, answer FROM message_receipts WHERE agent = %s AND owner = %s"
            " AND message_id = %s AND digest = %s AND created_at >= %s",
            (agent, owner, message_id, digest, utc(since)),
        )
        return None if row is None else Receipt(row[0], int(row[1]), row[2])

    async def forget_message(self, agent: str, owner: str, message_id: str, digest: str) -> None:
        if unstorable(agent, owner, message_id, digest):
            return
        await self._execute(
            "DELETE FROM message_receipts WHERE agent = %s AND owner = %s AND message_id = %s"
            " AND digest = %s",
            (agent, owner, message_id, digest),
        )

    # --- push notification configs ---------------------------------------------------

    async def save_push_config(
        self,
        agent: str,
        owner: str,
        config: TaskPushNotificationConfig,
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> None:
        assert config.id and config.task_id
        box = self._secrets
        await self._run(lambda conn: insert_push_config(conn, agent, owner, config, protocol, box))

    async def get_push_config(
        self, agent: str, task_id: str, config_id: str, *, owner: str | None
    ) -> TaskPushNotificationConfig | None:
        if unstorable(agent, task_id, config_id):
            return None
        row = await self._fetchone(
            f"SELECT {queries.PUSH_CONFIG_COLUMNS} FROM push_configs"
            " WHERE agent = %s AND task_id = %s AND id = %s",
            (agent, task_id, config_id),
        )
        if row is None or (owner is not None and row[2] != owner):
            return None
        return read_push_config(row, self._secrets)

    async def list_push_configs(
        self, agent: str, task_id: str, *, owner: str | None
    ) -> list[TaskPushNotificationConfig]:
        if unstorable(agent, task_id, owner or ""):
            return []
        rows = await self._fetchall(*queries.push_configs("%s", agent, task_id, owner))
        return [read_push_config(row, self._secrets) for row in rows]

    async def delete_push_config(
        self, agent: str, task_id: str, config_id: str, *, owner: str
    ) -> bool:
        if unstorable(agent, task_id, config_id, owner):
            return False
        deleted = await self._execute(
            "DELETE FROM push_configs WHERE agent = %s AND task_id = %s AND id = %s AND owner = %s",
            (agent, task_id, config_id, owner),
        )
        return deleted > 0

    # --- push outbox --------------------------------------------------------------------

    async def pending_lanes(
        self, agent: str | None = None, task_id: str | None = None
    ) -> list[Lane]:
        query, args = queries.pending_lanes("%s", agent, task_id)
        rows = await self._fetchall(query + " ORDER BY agent, task_id, config_id", args)
        return [Lane(*row) for row in rows]

    async def next_notification(self, lane: Lane) -> Notification | None:
        row = await self._fetchone(
            "SELECT id, notification_id, seq, payload::text, attempts, next_attempt_at"
            " FROM push_outbox WHERE state = 'pending' AND agent = %s AND task_id = %s"
            " AND config_id = %s ORDER BY id LIMIT 1",
            (lane.agent, lane.task_id, lane.config_id),
        )
        if row is None:
            return None
        return Notification(
            lane, int(row[0]), row[1], int(row[2]), row[3], int(row[4]), float(row[5])
        )

    async def record_attempt(
        self,
        notification: Notification,
        *,
        outcome: Literal["delivered", "retry", "failed"],
        status: int | None,
        error: str | None,
        duration_ms: float,
        next_attempt_at: float = 0.0,
    ) -> None:
        attempt = partial(
            outbox.record_attempt,
            notification=notification,
            outcome=outcome,
            status=status,
            error=error,
            duration_ms=duration_ms,
            next_attempt_at=next_attempt_at,
        )
        await self._run(attempt)

    async def abandon_notification(self, notification: Notification, reason: str) -> None:
        await self._execute(
            "UPDATE push_outbox SET state = 'failed', last_error = %s, updated_at = now()"
            " WHERE id = %s",
            (reason, notification.id),
        )

    async def requeue_notification(self, outbox_id: int) -> bool:
        requeued = await self._execute(
            "UPDATE push_outbox SET state = 'pending', next_attempt_at = 0, updated_at = now()"
            " WHERE id = %s AND state = 'failed'",
            (outbox_id,),
        )
        return requeued > 0

    async def deliveries(
        self, agent: str | None = None, task_id: str | None = None
    ) -> list[Delivery]:
        return await self._read_deliveries(*queries.deliveries("%s", agent, task_id))

    async def _read_deliveries(self, query: str, args: Any) -> list[Delivery]:
        """The outbox rows ``query`` selects, each with its attempts (one connection)."""
        rows, attempts = await self._run(partial(outbox.delivery_rows, query=query, args=args))
        return read_deliveries(rows, attempts, order_key)

    # --- the operator console ----------------------------------------------------------

    async def browse_tasks(
        self,
        agent: str | None = None,
        *,
        state: TaskState | None = None,
        page_size: int = 50,
        page_token: str | None = None,
    ) -> SummaryPage:
        cursor = None
        if page_token:
            updated, last_agent, last_id = browse.decode_token(page_token, 3)
            cursor = (page_time(updated), last_agent, last_id)
        if unstorable(agent or ""):
            return SummaryPage([], "")
        rows = await self._fetchall(*browse.browse_query("%s", agent, state, cursor, page_size))
        return browse.read_summary_page(rows, page_size, order_key)

    async def timeline(
        self, agent: str, task_id: str, *, after: int = 0, limit: int = 500
    ) -> list[TimelineEntry]:
        if unstorable(agent, task_id):
            return []
        query, args = browse.timeline_query("%s", agent, task_id, after, limit)
        rows = await self._fetchall(query.replace("payload,", "payload::text,", 1), args)
        return [TimelineEntry(int(row[0]), row[1], row[2], order_key(row[3])) for row in rows]

    async def task_counts(self) -> dict[tuple[str, TaskState], int]:
        return browse.read_task_counts(await self._fetchall(browse.TASK_COUNTS))

    async def outbox_summary(self) -> OutboxSummary:
        row = await self._fetchone(browse.OUTBOX_SUMMARY)
        assert row is not None
        pending, failed, oldest = row
        return OutboxSummary(int(pending or 0), int(failed or 0), oldest)

    async def delivery_page(
        self,
        agent: str | None = None,
        task_id: str | None = None,
        *,
        state: str | None = None,
        before: int | None = None,
        limit: int = 50,
    ) -> list[Delivery]:
        if unstorable(agent or "", task_id or ""):
            return []
        return await self._read_deliveries(
            *browse.delivery_page_query("%s", agent, task_id, state, before, limit)
        )


def _prepare(conn: Connection, *, display: str, keyed: bool) -> bytes | None:
    """At open: migrate, and without a configured key, fetch the development key."""
    migrate(conn)
    return None if keyed else development_key(conn, display)

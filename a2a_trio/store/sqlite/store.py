"""Tasks, their append-only event log, and push configs in one SQLite file.

The embedded default behind :class:`~a2a_trio.store.Store`. Its methods are
``async`` for the interface's sake but never leave the trio thread: SQLite
in WAL mode commits a round in microseconds, far less than a thread hop
would cost, and a single owner needs no locks. A serving store holds its
database exclusively (see :mod:`..lock`); other processes (the CLI) open their
own connection without that lock, and WAL lets them read while the server writes.
The file and its connections are :class:`.database.Database`'s; a round is
written by :func:`.recording.write_round`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

import sqlite_utils

from ...protocol import Message, TaskPushNotificationConfig, TaskState, utcnow
from ...protocol.limits import Limits
from ...protocol.versions import PROTOCOL_VERSION
from .. import browse, queries
from ..base import Store
from ..browse import OutboxSummary, SummaryPage, TimelineEntry
from ..history import read_history
from ..records import (
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
from ..secrets import SecretBox, development_token
from ..space import StorageCondition
from . import pruning
from .database import Database, Synchronous
from .recording import history_rows, insert_push_config, round_chars, write_round
from .retention import SqliteRetention

__all__ = ["SqliteStore"]


class SqliteStore(Store):
    """The durable state of every agent mounted on one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        secret_key: str | bytes | None = None,
        synchronous: Synchronous = "NORMAL",
        key: str = "storage.url",
    ) -> None:
        self.path = self.display = str(path)
        #: Rounds carrying this many characters of payload or more are written
        #: on a worker thread (see :meth:`record`).
        self.thread_chars = 256 * 1024
        #: Characters of events and snapshots written (a gauge of WAL growth).
        self.written = 0
        self.space = StorageCondition(self.display)
        #: The file, its connections and its WAL.
        self.database = Database(
            self.path, space=self.space, secret_key=secret_key, synchronous=synchronous, key=key
        )

    # --- lifetime -----------------------------------------------------------------

    async def open(self, *, exclusive: bool = False) -> None:
        self.connect(exclusive=exclusive)

    async def aclose(self) -> None:
        self.close()

    async def check(self) -> None:
        self.database.check()

    def development_token(self) -> str | None:
        """Kept beside the file (``NAME.console-token``), as the generated secret key is."""
        if self.database.in_memory:
            return None
        return development_token(Path(self.path))

    def connect(self, *, exclusive: bool = False) -> SqliteStore:
        """:meth:`open`, synchronously (SQLite only): for tools, tests and :attr:`db`.

        Every other method opens on first use. ``exclusive`` is as for
        :meth:`open`, until :meth:`close`; the lock is taken before
        connecting, and an in-memory database needs none.
        """
        self.database.connect(exclusive=exclusive)
        return self

    def close(self) -> None:
        """:meth:`aclose`, synchronously (SQLite only)."""
        self.database.close()

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the database (for tools; the server uses the methods)."""
        return self.database.db

    @property
    def _reads(self) -> sqlite3.Connection:
        return self.database.reads

    @property
    def _box(self) -> SecretBox:
        return self.database.box

    def _transaction(self) -> AbstractAsyncContextManager[sqlite3.Connection]:
        return self.database.transaction()

    # --- WAL checkpoints (see a2a_trio.store.checkpoint_periodically) ---------------

    def defer_checkpoints(self, deferred: bool) -> None:
        """See :meth:`.database.Database.defer_checkpoints`."""
        self.database.defer_checkpoints(deferred)

    @property
    def commits(self) -> int:
        """Transactions committed since the store was created."""
        return self.database.commits

    def checkpoint(self) -> int:
        """See :meth:`.database.Database.checkpoint` (thread-safe)."""
        return self.database.checkpoint()

    async def empty_wal(self) -> int:
        """See :meth:`.database.Database.empty_wal`."""
        return await self.database.empty_wal()

    # --- tasks and events ---------------------------------------------------

    async def record(self, round: Round) -> list[ShareOutcome]:
        """See :meth:`Store.record`; a large round is written on a worker thread.

        A round of small events commits in microseconds, less than a thread
        hop. One carrying megabytes (a 10 MiB message is written about four
        times: event, snapshot, and their WAL frames) would hold the event
        loop for a fifth of a second; from :attr:`thread_chars` on, it is
        written on a worker thread while the loop serves everyone else.
        Readers use their own connection, so none sees it before its commit.
        """
        written = await self.database.write(
            partial(write_round, round=round, box=self._box, caps=self.outbox_caps),
            on_thread=round_chars(round) >= self.thread_chars,
        )
        self.written += written.chars
        return written.outcomes

    # --- message receipts (retries, spec 3.3.1) ------------------------------

    async def remembered_messages(self, agent: str, since: datetime) -> list[tuple[str, str]]:
        rows = self._reads.execute(
            "SELECT owner, message_id FROM message_receipts WHERE agent = ? AND created_at >= ?",
            (agent, order_key(since)),
        ).fetchall()
        return [(row[0], row[1]) for row in rows]

    async def forget_message(self, agent: str, owner: str, message_id: str, digest: str) -> None:
        async with self._transaction() as conn:
            conn.execute(
                "DELETE FROM message_receipts WHERE agent = ? AND owner = ? AND message_id = ?"
                " AND digest = ?",
                (agent, owner, message_id, digest),
            )

    async def find_message(
        self, agent: str, owner: str, message_id: str, digest: str, since: datetime
    ) -> Receipt | None:
        row = self._reads.execute(
            "SELECT task_id, seq, answer FROM message_receipts WHERE agent = ? AND owner = ?"
            " AND message_id = ? AND digest = ? AND created_at >= ?",
            (agent, owner, message_id, digest, order_key(since)),
        ).fetchone()
        return None if row is None else Receipt(row[0], int(row[1]), row[2])

    async def get_task(self, agent: str, task_id: str, *, owner: str | None) -> StoredTask | None:
        row = self._reads.execute(
            "SELECT owner, snapshot, last_seq, context_id, state FROM tasks"
            " WHERE agent = ? AND id = ?",
            (agent, task_id),
        ).fetchone()
        if row is None or (owner is not None and row[0] != owner):
            return None
        return read_task(agent, task_id, row)

    async def events_after(
        self, agent: str, task_id: str, seq: int, *, messages: bool = False
    ) -> list[LoggedEvent]:
        kinds = "'task', 'status', 'artifact'" + (", 'message'" if messages else "")
        rows = self._reads.execute(
            "SELECT seq, kind, payload FROM task_events WHERE agent = ? AND task_id = ?"
            f" AND seq > ? AND kind IN ({kinds}) ORDER BY seq",
            (agent, task_id, seq),
        ).fetchall()
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
        rows = history_rows(self._reads, agent, task_id)
        return read_history(rows, through, limits, length)

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
        filters, args = queries.task_filters(
            "?",
            order_key,
            agent,
            owner,
            context_id=context_id,
            state=state,
            updated_after=updated_after,
        )
        total = int(
            self._reads.execute(f"SELECT count(*) FROM tasks WHERE {filters}", args).fetchone()[0]
        )
        page_where, page_args = filters, list(args)
        if page_token:
            updated, last_id = decode_page_token(page_token)
            page_where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            page_args += [updated, updated, last_id]
        rows = self._reads.execute(
            f"SELECT id, updated_at, snapshot, context_id, state FROM tasks WHERE {page_where}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            [*page_args, page_size + 1],
        ).fetchall()
        return read_task_page(rows, page_size, total)

    async def unfinished_tasks(
        self, agent: str | None = None, *, task_id: str | None = None
    ) -> list[StoredTask]:
        continued = queries.continued("json_extract(e.payload, '$.role')")
        clause, args = queries.where(
            "?",
            f"(t.state IN (?, ?) OR (t.state IN (?, ?) AND {continued}))",
            agent=agent,
            id=task_id,
        )
        rows = self._reads.execute(
            f"SELECT agent, id, owner, snapshot, last_seq, context_id, state FROM tasks t{clause}",
            [*queries.UNFINISHED_STATES, *queries.PAUSED_STATES, *args],
        ).fetchall()
        return [read_task(row[0], row[1], row[2:]) for row in rows]

    async def prune(self, older_than: datetime, *, dry_run: bool = False) -> dict[str, int]:
        if dry_run:
            return pruning.count(self._reads, order_key(older_than))
        return (await prune_in_batches(self.retention, older_than)).as_dict()

    @property
    def retention(self) -> SqliteRetention:
        return SqliteRetention(self.database)

    # --- push notification configs -----------------------------------------

    async def save_push_config(
        self,
        agent: str,
        owner: str,
        config: TaskPushNotificationConfig,
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> None:
        assert config.id and config.task_id
        box = self._box
        async with self._transaction() as conn:
            insert_push_config(conn, agent, owner, config, protocol, box)

    async def get_push_config(
        self, agent: str, task_id: str, config_id: str, *, owner: str | None
    ) -> TaskPushNotificationConfig | None:
        row = self._reads.execute(
            f"SELECT {queries.PUSH_CONFIG_COLUMNS} FROM push_configs"
            " WHERE agent = ? AND task_id = ? AND id = ?",
            (agent, task_id, config_id),
        ).fetchone()
        if row is None or (owner is not None and row[2] != owner):
            return None
        return read_push_config(row, self._box)

    async def list_push_configs(
        self, agent: str, task_id: str, *, owner: str | None
    ) -> list[TaskPushNotificationConfig]:
        rows = self._reads.execute(*queries.push_configs("?", agent, task_id, owner)).fetchall()
        return [read_push_config(row, self._box) for row in rows]

    async def delete_push_config(
        self, agent: str, task_id: str, config_id: str, *, owner: str
    ) -> bool:
        async with self._transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM push_configs WHERE agent = ? AND task_id = ? AND id = ? AND owner = ?",
                (agent, task_id, config_id, owner),
            )
        return cursor.rowcount > 0

    # --- push outbox --------------------------------------------------------------

    async def pending_lanes(
        self, agent: str | None = None, task_id: str | None = None
    ) -> list[Lane]:
        rows = self._reads.execute(*queries.pending_lanes("?", agent, task_id)).fetchall()
        return [Lane(*row) for row in rows]

    async def next_notification(self, lane: Lane) -> Notification | None:
        row = self._reads.execute(
            "SELECT id, notification_id, seq, payload, attempts, next_attempt_at FROM push_outbox"
            " WHERE state = 'pending' AND agent = ? AND task_id = ? AND config_id = ?"
            " ORDER BY id LIMIT 1",
            (lane.agent, lane.task_id, lane.config_id),
        ).fetchone()
        if row is None:
            return None
        return Notification(lane, int(row[0]), row[1], int(row[2]), row[3], int(row[4]), row[5])

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
        attempt = notification.attempts + 1
        now = order_key(utcnow())
        state = "pending" if outcome == "retry" else outcome
        async with self._transaction() as conn:
            conn.execute(
                "INSERT INTO push_attempts (outbox_id, attempt, at, status, error, duration_ms)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (notification.id, attempt, now, status, error, duration_ms),
            )
            conn.execute(
                "UPDATE push_outbox SET state = ?, attempts = ?, next_attempt_at = ?,"
                " last_error = ?, updated_at = ? WHERE id = ?",
                (state, attempt, next_attempt_at, error, now, notification.id),
            )

    async def abandon_notification(self, notification: Notification, reason: str) -> None:
        async with self._transaction() as conn:
            conn.execute(
                "UPDATE push_outbox SET state = 'failed', last_error = ?, updated_at = ?"
                " WHERE id = ?",
                (reason, order_key(utcnow()), notification.id),
            )

    async def requeue_notification(self, outbox_id: int) -> bool:
        async with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE push_outbox SET state = 'pending', next_attempt_at = 0, updated_at = ?"
                " WHERE id = ? AND state = 'failed'",
                (order_key(utcnow()), outbox_id),
            )
        return cursor.rowcount > 0

    async def deliveries(
        self, agent: str | None = None, task_id: str | None = None
    ) -> list[Delivery]:
        return self._read_deliveries(*queries.deliveries("?", agent, task_id))

    def _read_deliveries(self, query: str, args: list[Any]) -> list[Delivery]:
        """The outbox rows ``query`` selects, each with its attempts."""
        rows = self._reads.execute(query, args).fetchall()
        attempts: Iterable[tuple[Any, ...]] = ()
        if rows:
            marks = ",".join("?" * len(rows))
            attempts = self._reads.execute(
                queries.attempts(f"IN ({marks})"), [row[0] for row in rows]
            )
        return read_deliveries(rows, attempts)

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
            cursor = (updated, last_agent, last_id)
        rows = self._reads.execute(
            *browse.browse_query("?", agent, state, cursor, page_size)
        ).fetchall()
        return browse.read_summary_page(rows, page_size, str)

    async def timeline(
        self, agent: str, task_id: str, *, after: int = 0, limit: int = 500
    ) -> list[TimelineEntry]:
        rows = self._reads.execute(
            *browse.timeline_query("?", agent, task_id, after, limit)
        ).fetchall()
        return [TimelineEntry(int(row[0]), row[1], row[2], row[3]) for row in rows]

    async def task_counts(self) -> dict[tuple[str, TaskState], int]:
        return browse.read_task_counts(self._reads.execute(browse.TASK_COUNTS).fetchall())

    async def outbox_summary(self) -> OutboxSummary:
        pending, failed, oldest = self._reads.execute(browse.OUTBOX_SUMMARY).fetchone()
        return OutboxSummary(
            int(pending or 0),
            int(failed or 0),
            datetime.fromisoformat(oldest) if oldest else None,
        )

    async def delivery_page(
        self,
        agent: str | None = None,
        task_id: str | None = None,
        *,
        state: str | None = None,
        before: int | None = None,
        limit: int = 50,
    ) -> list[Delivery]:
        return self._read_deliveries(
            *browse.delivery_page_query("?", agent, task_id, state, before, limit)
        )

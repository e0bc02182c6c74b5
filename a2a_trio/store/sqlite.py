"""Tasks, their append-only event log, and push configs in one SQLite file.

The embedded default behind :class:`~a2a_trio.store.Store`. Its methods are
``async`` for the interface's sake but never leave the trio thread: SQLite
in WAL mode commits a round in microseconds, far less than a thread hop
would cost, and a single owner needs no locks. A serving store holds its
database exclusively (see :mod:`.lock`); other processes (the CLI) open their
own connection without that lock, and WAL lets them read while the server writes.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import sqlite_utils
import trio
from cryptography.fernet import Fernet

from .._locks import held
from ..protocol import Message, TaskPushNotificationConfig, TaskState, utcnow
from ..protocol.limits import Limits
from ..protocol.versions import LEGACY_VERSION, PROTOCOL_VERSION
from . import browse, queries
from .base import Store
from .browse import OutboxSummary, SummaryPage, TimelineEntry
from .history import HISTORY_KINDS, FetchRows, read_history
from .lock import ServingLock
from .outbox_caps import cap_parameters, cap_statement
from .records import (
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
from .retention import prune_in_batches
from .rounds import Round, Share, ShareOutcome, StaleTask, v0_3_webhook_body
from .schema import SCHEMA_VERSION, migrate
from .secrets import SecretBox, development_key
from .space import StorageCondition, is_disk_full
from .sqlite_retention import SqliteRetention

__all__ = ["SqliteStore"]


@dataclass(frozen=True, slots=True)
class _OpenDatabase:
    """What :meth:`SqliteStore.connect` opens, all at once."""

    db: sqlite_utils.Database
    #: ``db``'s connection, the only one that writes.
    writer: sqlite3.Connection
    #: While a write runs on a worker thread (see :meth:`SqliteStore.record`),
    #: reads go through this connection of their own, so that none sees the
    #: write before it commits. Otherwise they share the writing connection,
    #: whose page cache a write of its own leaves warm. An in-memory database
    #: has one connection for both.
    reader: sqlite3.Connection
    box: SecretBox


class SqliteStore(Store):
    """The durable state of every agent mounted on one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        secret_key: str | bytes | None = None,
        synchronous: Literal["OFF", "NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        self.path = self.display = str(path)
        self._secret_key = secret_key
        #: Rounds carrying this many characters of payload or more are written
        #: on a worker thread (see :meth:`record`).
        self.thread_chars = 256 * 1024
        self._synchronous = synchronous
        self._open_db: _OpenDatabase | None = None
        self._writing_elsewhere = False
        #: One write at a time on the writing connection, whichever thread runs it.
        self._writing = trio.Lock()
        #: Held while this store serves the database (``open(exclusive=True)``).
        self._lock: ServingLock | None = None
        self._commits = 0
        #: Characters of events and snapshots written (a gauge of WAL growth).
        self.written = 0
        #: The connection :meth:`checkpoint` uses, from a worker thread.
        self._checkpointer: sqlite3.Connection | None = None
        self._page_size = 4096
        self.space = StorageCondition(self.display)
        #: (device, inode) of the file opened: a file moved or deleted under a
        #: serving process takes its writes with it, so it is not ready.
        self._file_id: tuple[int, int] | None = None

    async def open(self, *, exclusive: bool = False) -> None:
        self.connect(exclusive=exclusive)

    async def aclose(self) -> None:
        self.close()

    async def check(self) -> None:
        if self._file_id is not None:
            try:
                stat = os.stat(self.path)
            except OSError as error:
                raise RuntimeError(f"the database file is unreachable: {error.strerror}") from None
            if (stat.st_dev, stat.st_ino) != self._file_id:
                raise RuntimeError("the database file was replaced since it was opened")
        found = int(self.db.execute("PRAGMA user_version").fetchone()[0])
        if found != SCHEMA_VERSION:
            raise RuntimeError(f"schema version {found}; this a2a-trio uses {SCHEMA_VERSION}")

    def connect(self, *, exclusive: bool = False) -> SqliteStore:
        """:meth:`open`, synchronously (SQLite only): for tools, tests and :attr:`db`.

        Every other method opens on first use. ``exclusive`` is as for
        :meth:`open`, until :meth:`close`; the lock is taken before
        connecting, and an in-memory database needs none.
        """
        locked_now = False
        if exclusive and self._lock is None and not self._in_memory:
            lock = ServingLock(self.path)
            lock.acquire()
            self._lock, locked_now = lock, True
        if self._open_db is None:
            try:
                self._connect()
            except BaseException:
                if locked_now:
                    self._release_lock()
                raise
        return self

    @property
    def _in_memory(self) -> bool:
        return self.path == ":memory:" or self.path.startswith("file::memory:")

    def _connect(self) -> None:
        conn = self._new_connection()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        db = sqlite_utils.Database(conn)
        try:
            migrate(db)
        except BaseException:
            conn.close()
            raise
        key = self._secret_key
        if key is None:
            key = Fernet.generate_key() if self._in_memory else development_key(Path(self.path))
        box = SecretBox(key)
        reader = conn if self._in_memory else self._new_connection()
        if not self._in_memory:
            stat = os.stat(self.path)
            self._file_id = (stat.st_dev, stat.st_ino)
        self._open_db = _OpenDatabase(db, conn, reader, box)

    def _new_connection(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=5.0
        )

    @property
    def _opened(self) -> _OpenDatabase:
        if self._open_db is None:
            self.connect()
        assert self._open_db is not None
        return self._open_db

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the database (for tools; the server uses the methods)."""
        return self._opened.db

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._opened.writer

    @property
    def _reads(self) -> sqlite3.Connection:
        opened = self._opened
        return opened.reader if self._writing_elsewhere else opened.writer

    @property
    def _box(self) -> SecretBox:
        return self._opened.box

    def close(self) -> None:
        """:meth:`aclose`, synchronously (SQLite only)."""
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        opened, self._open_db = self._open_db, None
        if opened is not None:
            if opened.reader is not opened.writer:
                opened.reader.close()
            opened.writer.close()
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # --- WAL checkpoints ----------------------------------------------------

    def defer_checkpoints(self, deferred: bool) -> None:
        """Whether commits leave WAL checkpoints to :meth:`checkpoint`.

        By default SQLite checkpoints inside the commit that fills the WAL
        past 1,000 pages: that commit copies the pages into the database and
        syncs it while the event loop waits (~0.2 s after a 10 MiB message).
        Deferred, commits only append to the WAL, and a worker thread calls
        :meth:`checkpoint` (see :func:`a2a_trio.store.checkpoint_periodically`).
        """
        if self._open_db is not None or deferred:
            self._conn.execute(f"PRAGMA wal_autocheckpoint={0 if deferred else 1000}")

    @property
    def commits(self) -> int:
        """Transactions committed since the store was created."""
        return self._commits

    def checkpoint(self) -> int:
        """Copy the WAL into the database (PASSIVE: never waits for a reader or writer).

        Returns the bytes the WAL holds (copied or not). Thread-safe against
        the serving connection: it runs on a connection of its own, which
        only one thread at a time may use.
        """
        return self._checkpoint("PASSIVE")

    async def empty_wal(self) -> int:
        """Copy the whole WAL into the database and empty its file, between two writes.

        A passive checkpoint copies only what no write has touched meanwhile,
        and SQLite starts the WAL over only after one that copied it all: under
        steady writes that never happens, and the WAL grows without bound (a
        gigabyte a minute at 1,100 SendMessage/s). This one holds the write
        turn, so the store's own writes wait (in memory, off the event loop)
        while a worker thread copies and truncates. Returns the bytes left in
        the WAL: 0, unless a reader of another process held it.
        """
        async with held(self._writing):
            # Not abandoned on cancel: the turn must not pass while it runs.
            return await trio.to_thread.run_sync(self._checkpoint, "TRUNCATE")

    def _checkpoint(self, mode: str) -> int:
        if self._checkpointer is None:
            self._checkpointer = self._new_connection()
            self._page_size = int(self._checkpointer.execute("PRAGMA page_size").fetchone()[0])
        _busy, frames, _copied = self._checkpointer.execute(
            f"PRAGMA wal_checkpoint({mode})"
        ).fetchone()
        return max(int(frames), 0) * self._page_size

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
        async with held(self._writing):
            if self._in_memory or _round_chars(round) < self.thread_chars:
                return self._record(round)
            self._writing_elsewhere = True
            try:
                # Not abandoned on cancel: the write ends before the turn passes.
                return await trio.to_thread.run_sync(self._record, round)
            finally:
                self._writing_elsewhere = False

    def _record(self, round: Round) -> list[ShareOutcome]:
        now = order_key(utcnow())
        outcomes: list[ShareOutcome] = []
        with self._committing() as conn:
            for share in round.shares:
                conn.execute("SAVEPOINT share")
                try:
                    queued = self._write_share(conn, share, now, round)
                except Exception as error:
                    if is_disk_full(error):
                        raise  # no share of the round can be stored: see _committing
                    conn.execute("ROLLBACK TO share")
                    conn.execute("RELEASE share")
                    outcomes.append(ShareOutcome(error=error))
                    continue
                conn.execute("RELEASE share")
                outcomes.append(ShareOutcome(queued))
        return outcomes

    def _write_share(self, conn: sqlite3.Connection, share: Share, now: str, round: Round) -> int:
        """Write one share (inside its savepoint); returns the notifications queued."""
        agent, task_id, events = share.agent, share.task_id, share.events
        if events:
            snapshot = events[-1].snapshot
            text = snapshot.to_json()
            self.written += len(text) + sum(len(e.payload) for e in events)
            values = (
                snapshot.status.state.value,
                order_key(snapshot.status.timestamp or utcnow()),
                events[-1].seq,
                text,
                agent,
                task_id,
            )
            # The task row first: it refuses a share that does not follow it
            # (StaleTask) or a task created twice (its key), before the log is touched.
            new = share.new
            if new is None:
                cursor = conn.execute(
                    "UPDATE tasks SET state = ?, updated_at = ?, last_seq = ?, snapshot = ?"
                    " WHERE agent = ? AND id = ? AND last_seq = ?",
                    (*values, share.base_seq),
                )
                if cursor.rowcount != 1:
                    raise StaleTask(
                        f"task {task_id!r} of agent {agent!r} is not at {share.base_seq}"
                    )
            else:
                conn.execute(
                    "INSERT INTO tasks (state, updated_at, last_seq, snapshot, agent, id,"
                    " owner, context_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, new.owner, snapshot.context_id, now),
                )
                if new.push_config is not None:
                    self._insert_push_config(
                        conn, agent, new.owner, new.push_config, new.push_protocol
                    )
            conn.executemany(
                "INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [(agent, task_id, e.seq, e.kind, e.payload, now) for e in events],
            )
        for receipt in share.receipts:
            conn.execute(
                "INSERT OR IGNORE INTO message_receipts (agent, owner, message_id, digest,"
                " task_id, seq, answer, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    agent,
                    receipt.owner,
                    receipt.message_id,
                    receipt.digest,
                    receipt.task_id,
                    receipt.seq,
                    receipt.answer,
                    now,
                ),
            )
        return self._queue(conn, share, now, round.limits) if round.push else 0

    def _queue(self, conn: sqlite3.Connection, share: Share, now: str, limits: Limits) -> int:
        """Queue the share's streamed events for each webhook config of its task.

        A config created over 1.0 gets the event as recorded; one created
        over 0.3 gets :func:`~a2a_trio.store.rounds.v0_3_webhook_body`.
        """
        streamed = [e for e in share.events if e.kind in STREAMED_KINDS]
        if not streamed:
            return 0
        key = (share.agent, share.task_id)
        protocols = {
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT protocol FROM push_configs WHERE agent = ? AND task_id = ?", key
            )
        }
        if not protocols:
            return 0
        queued = 0
        insert = (
            "INSERT INTO push_outbox (notification_id, agent, task_id, config_id, seq, payload,"
            " created_at, updated_at) SELECT lower(hex(randomblob(16))), agent, task_id, id,"
            " ?, ?, ?, ? FROM push_configs WHERE agent = ? AND task_id = ? AND protocol {} ?"
            " ORDER BY created_at, id"
        )
        for event in streamed:
            if protocols - {LEGACY_VERSION}:
                cursor = conn.execute(
                    insert.format("!="), (event.seq, event.payload, now, now, *key, LEGACY_VERSION)
                )
                queued += int(cursor.rowcount)
            if LEGACY_VERSION in protocols:
                history = read_history(_history_rows(conn, *key), event.seq, limits)
                body = v0_3_webhook_body(event.snapshot, history)
                cursor = conn.execute(
                    insert.format("="), (event.seq, body, now, now, *key, LEGACY_VERSION)
                )
                queued += int(cursor.rowcount)
        if queued:
            conn.execute(cap_statement("?", "?"), cap_parameters(self.outbox_caps, *key, now=now))
        return queued

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[sqlite3.Connection]:
        """One transaction of the statements run inside (on the trio thread)."""
        async with held(self._writing):
            with self._committing() as conn:
                yield conn

    @contextmanager
    def _committing(self) -> Iterator[sqlite3.Connection]:
        """One transaction on the writing connection, whose turn the caller holds."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as error:
            # A failed COMMIT (I/O, a full disk) leaves the transaction open;
            # SQLite may have rolled back already after a failed statement.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if is_disk_full(error):
                raise self.space.refused(error) from error
            raise
        self._commits += 1
        self.space.wrote()

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

    async def events_after(self, agent: str, task_id: str, seq: int) -> list[LoggedEvent]:
        rows = self._reads.execute(
            "SELECT seq, kind, payload FROM task_events WHERE agent = ? AND task_id = ?"
            " AND seq > ? AND kind IN ('task', 'status', 'artifact') ORDER BY seq",
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
        return read_history(_history_rows(self._reads, agent, task_id), through, limits, length)

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

    async def unfinished_tasks(self, agent: str | None = None) -> list[StoredTask]:
        clause, args = queries.where("?", "state IN (?, ?)", agent=agent)
        rows = self._reads.execute(
            f"SELECT agent, id, owner, snapshot, last_seq, context_id, state FROM tasks{clause}",
            [*queries.UNFINISHED_STATES, *args],
        ).fetchall()
        return [read_task(row[0], row[1], row[2:]) for row in rows]

    async def prune(self, older_than: datetime, *, dry_run: bool = False) -> dict[str, int]:
        if not dry_run:
            return (await prune_in_batches(self.retention, older_than)).as_dict()
        cutoff = order_key(older_than)
        doomed = "SELECT agent, id FROM tasks WHERE updated_at < ? AND state IN (?, ?, ?, ?)"
        args = (cutoff, *queries.FINAL_STATES)
        counts: dict[str, int] = {}
        counting = {
            "tasks": f"SELECT count(*) FROM ({doomed})",
            "events": f"SELECT count(*) FROM task_events WHERE (agent, task_id) IN ({doomed})",
            "push_configs": "SELECT count(*) FROM push_configs WHERE (agent, task_id) IN "
            f"({doomed})",
            "notifications": "SELECT count(*) FROM push_outbox WHERE (agent, task_id) IN "
            f"({doomed})",
            "attempts": "SELECT count(*) FROM push_attempts WHERE outbox_id IN (SELECT id FROM"
            f" push_outbox WHERE (agent, task_id) IN ({doomed}))",
        }
        for name, query in counting.items():
            counts[name] = int(self._reads.execute(query, args).fetchone()[0])
        receipts = "FROM message_receipts WHERE created_at < ?"
        counts["receipts"] = int(
            self._reads.execute(f"SELECT count(*) {receipts}", (cutoff,)).fetchone()[0]
        )
        return counts

    @property
    def retention(self) -> SqliteRetention:
        return SqliteRetention(self._transaction, lambda: self._reads)

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
        async with self._transaction() as conn:
            self._insert_push_config(conn, agent, owner, config, protocol)

    def _insert_push_config(
        self,
        conn: sqlite3.Connection,
        agent: str,
        owner: str,
        config: TaskPushNotificationConfig,
        protocol: str,
    ) -> None:
        auth = config.authentication
        conn.execute(
            "INSERT OR REPLACE INTO push_configs (agent, task_id, id, owner, url, token,"
            " auth_scheme, auth_credentials, created_at, protocol)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                agent,
                config.task_id,
                config.id,
                owner,
                config.url,
                self._box.seal(config.token),
                auth.scheme if auth else None,
                self._box.seal(auth.credentials) if auth else None,
                order_key(utcnow()),
                protocol,
            ),
        )

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


_HISTORY_ROWS = (
    "SELECT seq, kind, payload FROM task_events WHERE agent = ? AND task_id = ? AND seq < ?"
    " AND kind IN (?, ?, ?) ORDER BY seq DESC LIMIT ?"
)


def _history_rows(conn: sqlite3.Connection, agent: str, task_id: str) -> FetchRows:
    """How :func:`~a2a_trio.store.history.read_history` reads the task's log on ``conn``."""

    def fetch(below: int, limit: int) -> list[Any]:
        args = (agent, task_id, below, *HISTORY_KINDS, limit)
        return conn.execute(_HISTORY_ROWS, args).fetchall()

    return fetch


def _round_chars(round: Round) -> int:
    """About how much a round writes: its payloads (snapshots grow with them)."""
    return sum(len(event.payload) for share in round.shares for event in share.events)

"""Tasks, their append-only event log, and push configs in SQLite.

Every SQL statement of the project lives in this package. The store is
synchronous and owned by one thread (the trio thread of the server): SQLite
in WAL mode commits an event in microseconds, far less than a thread hop
would cost, and a single owner needs no locks. A serving store holds its
database exclusively (see :mod:`.lock`); other processes (the CLI) open their
own connection without that lock, and WAL lets them read while the server writes.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Literal

import sqlite_utils
from cryptography.fernet import Fernet

from ..protocol import (
    InvalidParamsError,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    utcnow,
)
from ..protocol._base import iso_utc
from ..protocol.compat_v0_3 import task_to_v0_3
from ..protocol.models import AuthenticationInfo
from ..protocol.versions import LEGACY_VERSION, PROTOCOL_VERSION
from .lock import ServingLock
from .schema import migrate
from .secrets import SecretBox, development_key

log = logging.getLogger("a2a_trio.store")

__all__ = [
    "Attempt",
    "Delivery",
    "EventKind",
    "Lane",
    "LoggedEvent",
    "Notification",
    "Receipt",
    "StoredTask",
    "TaskPage",
    "TaskStore",
    "Written",
]

#: ``task``, ``status`` and ``artifact`` rows hold a StreamResponse that
#: subscribers see; ``message`` rows hold a Message added to the history.
EventKind = Literal["task", "status", "artifact", "message"]
STREAMED_KINDS = ("task", "status", "artifact")


@dataclass(frozen=True, slots=True)
class StoredTask:
    """A task as stored: its snapshot, its owner and its log position."""

    agent: str
    owner: str
    task: Task
    last_seq: int

    @property
    def state(self) -> TaskState:
        return self.task.status.state


@dataclass(frozen=True, slots=True)
class Lane:
    """Notifications for one webhook config of one task: delivered strictly in order."""

    agent: str
    task_id: str
    config_id: str


@dataclass(frozen=True, slots=True)
class Notification:
    """One queued update for one webhook: the task's event as a StreamResponse."""

    lane: Lane
    id: int
    notification_id: str
    seq: int
    payload: str
    attempts: int
    next_attempt_at: float


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int
    at: str
    status: int | None
    error: str | None
    duration_ms: float


@dataclass(frozen=True, slots=True)
class Delivery:
    """A notification's history: its state (pending, delivered, failed) and attempts."""

    id: int
    notification_id: str
    agent: str
    task_id: str
    config_id: str
    seq: int
    state: str
    attempts_made: int
    last_error: str | None
    created_at: str
    attempts: list[Attempt] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Written:
    """What one write committed: the event's sequence and the notifications queued."""

    seq: int
    queued: int = 0


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    seq: int
    kind: str
    payload: str


@dataclass(frozen=True, slots=True)
class Receipt:
    """What an earlier SendMessage with the same messageId and content started."""

    #: The task it created or continued, and for a continuation the log
    #: position of the message (0 for a new task); or the direct answer.
    task_id: str | None
    seq: int
    answer: str | None


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[Task]
    next_page_token: str
    total_size: int


@dataclass(slots=True)
class _TaskRow:
    """A task touched by the open batch, written to ``tasks`` when the batch commits."""

    last_seq: int
    #: The task as it now is; None while the stored row is still right.
    snapshot: Task | None = None
    #: Set for a task created by this batch: the row is inserted at the end.
    owner: str | None = None
    created_at: str = ""
    #: Whether the task has webhook configs (None: not looked up yet).
    has_webhooks: bool | None = None
    #: Whether any of them was created over protocol 0.3 (known once asked).
    has_v0_3_webhooks: bool | None = None


def _read_snapshot(task_id: str, context_id: str | None, state: str, text: str) -> Task:
    """The stored task; a stand-in, logged, for a snapshot that cannot be read.

    Everything written now can be read back (see protocol.limits), but a row
    written by an older version may not be. One such row must not break
    every ListTasks page that holds it, nor stop the start-up recovery: the
    stand-in keeps the id, the context and the state, and says why the rest
    is missing; the event log keeps the original events.
    """
    try:
        return Task.model_validate_json(text)
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        log.error("task %s: its stored snapshot cannot be read (%s)", task_id, error)
        return Task(
            id=task_id,
            context_id=context_id,
            status=TaskStatus(
                state=TaskState.parse(state),
                message=Message(
                    message_id=f"{task_id}-unreadable",
                    role=Role.AGENT,
                    parts=[Part(text=UNREADABLE_SNAPSHOT)],
                    task_id=task_id,
                    context_id=context_id,
                ),
            ),
        )


#: The status message of a task whose stored snapshot could not be read.
UNREADABLE_SNAPSHOT = (
    "This task's stored record cannot be read; its history and artifacts are not shown."
)


def _order_key(moment: datetime) -> str:
    # Fixed width and UTC, so text order is time order; microseconds break ties
    # that the millisecond wire format would leave.
    return iso_utc(moment, "microseconds")


class TaskStore:
    """The durable state of every agent mounted on one database."""

    def __init__(
        self,
        path: str | Path,
        *,
        secret_key: str | bytes | None = None,
        synchronous: Literal["OFF", "NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        self.path = str(path)
        self._secret_key = secret_key
        self._synchronous = synchronous
        self._db: sqlite_utils.Database | None = None
        self._connection: sqlite3.Connection | None = None
        self._secrets: SecretBox | None = None
        #: Held while this store serves the database (``open(exclusive=True)``).
        self._lock: ServingLock | None = None
        #: Task rows of the open :meth:`batch`, written when it commits.
        self._batch: dict[tuple[str, str], _TaskRow] | None = None
        #: When the open batch began: the time its events are logged at.
        self._batch_began = ""
        #: Inside a :meth:`savepoint`: the rows it changed, as they were before.
        self._undo: dict[tuple[str, str], _TaskRow | None] | None = None
        self._commits = 0
        #: Characters of events and snapshots written (a gauge of WAL growth).
        self.written = 0
        #: The connection :meth:`checkpoint` uses, from a worker thread.
        self._checkpointer: sqlite3.Connection | None = None

    def open(self, *, exclusive: bool = False) -> TaskStore:
        """Connect and migrate (idempotent). Every other method opens on first use.

        ``exclusive`` is for serving: the store then holds the database until
        :meth:`close`, and opening it exclusively anywhere else, in this process
        or another, raises :class:`~a2a_trio.store.DatabaseInUseError` naming
        the holder, before connecting. Plain opens (readers such as the CLI)
        neither take nor heed it. An in-memory database needs none.
        """
        locked_now = False
        if exclusive and self._lock is None and not self._in_memory:
            lock = ServingLock(self.path)
            lock.acquire()
            self._lock, locked_now = lock, True
        if self._db is None:
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
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=5.0
        )
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
        self._secrets = SecretBox(key)
        self._db = db
        self._connection = conn

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the database (for tools; the server uses the methods)."""
        if self._db is None:
            self.open()
        assert self._db is not None
        return self._db

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._connection is None:
            self.open()
        assert self._connection is not None
        return self._connection

    @property
    def _box(self) -> SecretBox:
        if self._secrets is None:
            self.open()
        assert self._secrets is not None
        return self._secrets

    def close(self) -> None:
        """Disconnect and, when open exclusively, let the database go."""
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        if self._db is not None:
            self._db.conn.close()
            self._db = None
            self._connection = None
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
        if self._connection is not None or deferred:
            self._conn.execute(f"PRAGMA wal_autocheckpoint={0 if deferred else 1000}")

    @property
    def commits(self) -> int:
        """Transactions committed since the store was created."""
        return self._commits

    def checkpoint(self) -> None:
        """Copy the WAL into the database (PASSIVE: never waits for a reader or writer).

        Thread-safe against the serving connection: it runs on a connection
        of its own, which only one thread at a time may use.
        """
        if self._checkpointer is None:
            self._checkpointer = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=5.0
            )
        self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction; inside an open :meth:`batch`, part of it (the batch commits)."""
        with self.batch():
            yield self._conn

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Commit every write inside as one transaction, when the block ends.

        The host records an executor's burst of events this way: one commit
        instead of one per event, and each task row (its snapshot) written
        once, with the last state. Nothing written inside may be shown to
        anyone before the block has ended without an exception; on one, all
        of it is rolled back. Batches nest: an inner one joins the outer.
        """
        if self._batch is not None:
            yield
            return
        self._conn.execute("BEGIN IMMEDIATE")
        self._batch = {}
        self._batch_began = _order_key(utcnow())
        try:
            yield
            self._write_task_rows(self._batch)
        except BaseException:
            self._batch = None
            self._conn.execute("ROLLBACK")
            raise
        self._batch = None
        try:
            self._conn.execute("COMMIT")
            self._commits += 1
        except BaseException:
            # A failed COMMIT (a deferred constraint, I/O) leaves the transaction open.
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Inside an open :meth:`batch`: undo only this block's writes if it raises.

        The rest of the batch is kept and still commits when the batch ends.
        The host records several tasks' events in one batch this way, so one
        task's failure costs no other task its events.
        """
        assert self._batch is not None and self._undo is None, "a savepoint in a batch, unnested"
        self._undo = {}
        self._conn.execute("SAVEPOINT burst")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK TO burst")
            self._conn.execute("RELEASE burst")
            for key, row in self._undo.items():
                if row is None:
                    del self._batch[key]
                else:
                    self._batch[key] = row
            raise
        finally:
            self._undo = None
        self._conn.execute("RELEASE burst")

    def _keep_for_undo(self, key: tuple[str, str]) -> None:
        """Inside a savepoint: remember the task row as it was, before a write changes it."""
        if self._undo is not None and key not in self._undo:
            assert self._batch is not None
            row = self._batch.get(key)
            self._undo[key] = None if row is None else replace(row)

    def _write_task_rows(self, rows: dict[tuple[str, str], _TaskRow]) -> None:
        for (agent, task_id), row in rows.items():
            snapshot = row.snapshot
            if snapshot is None:
                continue
            text = snapshot.to_json()
            self.written += len(text)
            values = (
                snapshot.status.state.value,
                _order_key(snapshot.status.timestamp or utcnow()),
                row.last_seq,
                text,
                agent,
                task_id,
            )
            if row.owner is None:
                self._conn.execute(
                    "UPDATE tasks SET state = ?, updated_at = ?, last_seq = ?, snapshot = ?"
                    " WHERE agent = ? AND id = ?",
                    values,
                )
            else:
                self._conn.execute(
                    "INSERT INTO tasks (state, updated_at, last_seq, snapshot, agent, id,"
                    " owner, context_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*values, row.owner, snapshot.context_id, row.created_at),
                )

    # --- tasks and events ---------------------------------------------------

    def create_task(
        self,
        agent: str,
        owner: str,
        task: Task,
        *,
        kind: EventKind,
        payload: str,
        push_config: TaskPushNotificationConfig | None = None,
        push_protocol: str = PROTOCOL_VERSION,
        push: bool = False,
    ) -> Written:
        """Insert a new task and its first log event (seq 1), atomically.

        ``push_config`` (registered with the message, in ``push_protocol``) is
        saved in the same transaction, so the task's first event is already
        queued for it.
        """
        batch = self._batch
        if batch is None:
            with self.batch():
                return self.create_task(
                    agent,
                    owner,
                    task,
                    kind=kind,
                    payload=payload,
                    push_config=push_config,
                    push_protocol=push_protocol,
                    push=push,
                )
        # In the open batch (the recorder's case): no context manager per event.
        now = self._batch_began
        conn = self._conn
        self._keep_for_undo((agent, task.id))
        # Its first event's key refuses a task that exists (IntegrityError).
        conn.execute(
            "INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)"
            " VALUES (?, ?, 1, ?, ?, ?)",
            (agent, task.id, kind, payload, now),
        )
        self.written += len(payload)
        # The row itself is inserted when the batch commits, with the task
        # as the batch leaves it.
        batch[agent, task.id] = _TaskRow(
            last_seq=1,
            snapshot=task,
            owner=owner,
            created_at=now,
            has_webhooks=push_config is not None,
            has_v0_3_webhooks=push_config is not None and push_protocol == LEGACY_VERSION,
        )
        if push_config is not None:
            self._insert_push_config(conn, agent, owner, push_config, push_protocol)
        queued = self._queue(agent, task, 1, kind, payload, now) if push else 0
        return Written(1, queued)

    def append(
        self, agent: str, snapshot: Task, *, kind: EventKind, payload: str, push: bool = False
    ) -> Written:
        """Append one event and store the task it produced, atomically.

        With ``push``, the event is queued in the outbox for every webhook
        config of the task in the same transaction. Everything is committed
        when this returns (or, inside :meth:`batch`, when the batch ends):
        only then may anyone see the event.
        """
        batch = self._batch
        if batch is None:
            with self.batch():
                return self.append(agent, snapshot, kind=kind, payload=payload, push=push)
        conn = self._conn
        key = (agent, snapshot.id)
        self._keep_for_undo(key)
        row = batch.get(key)
        if row is None:
            found = conn.execute(
                "SELECT last_seq FROM tasks WHERE agent = ? AND id = ?", key
            ).fetchone()
            if found is None:
                raise KeyError(f"no task {snapshot.id!r} for agent {agent!r}")
            row = batch[key] = _TaskRow(last_seq=int(found[0]))
        row.last_seq += 1
        row.snapshot = snapshot
        seq = row.last_seq
        now = self._batch_began
        conn.execute(
            "INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (agent, snapshot.id, seq, kind, payload, now),
        )
        self.written += len(payload)
        queued = self._queue(agent, snapshot, seq, kind, payload, now) if push else 0
        return Written(seq, queued)

    def _queue(
        self, agent: str, snapshot: Task, seq: int, kind: EventKind, payload: str, now: str
    ) -> int:
        """Queue the event for each webhook config of the task (in the open batch).

        A config created over 1.0 gets the event as recorded (``payload``); one
        created over 0.3 gets the task as it stands after the event, in the 0.3
        JSON shape, which is what the 0.3 SDKs' servers POST and their
        receivers read.
        """
        if kind not in STREAMED_KINDS:
            return 0
        assert self._batch is not None
        task_id = snapshot.id
        row = self._batch[agent, task_id]
        if row.has_webhooks is None:
            row.has_webhooks = self._any_push_config(agent, task_id, "")
        if not row.has_webhooks:
            return 0
        cursor = self._conn.execute(
            "INSERT INTO push_outbox (notification_id, agent, task_id, config_id, seq, payload,"
            " created_at, updated_at) SELECT lower(hex(randomblob(16))), agent, task_id, id,"
            " ?, ?, ?, ? FROM push_configs WHERE agent = ? AND task_id = ? AND protocol != ?"
            " ORDER BY created_at, id",
            (seq, payload, now, now, agent, task_id, LEGACY_VERSION),
        )
        queued = int(cursor.rowcount)
        if row.has_v0_3_webhooks is None:
            row.has_v0_3_webhooks = self._any_push_config(agent, task_id, LEGACY_VERSION)
        if row.has_v0_3_webhooks:
            body = json.dumps(task_to_v0_3(snapshot), ensure_ascii=False, separators=(",", ":"))
            cursor = self._conn.execute(
                "INSERT INTO push_outbox (notification_id, agent, task_id, config_id, seq,"
                " payload, created_at, updated_at) SELECT lower(hex(randomblob(16))), agent,"
                " task_id, id, ?, ?, ?, ? FROM push_configs WHERE agent = ? AND task_id = ?"
                " AND protocol = ? ORDER BY created_at, id",
                (seq, body, now, now, agent, task_id, LEGACY_VERSION),
            )
            queued += int(cursor.rowcount)
        return queued

    def _any_push_config(self, agent: str, task_id: str, protocol: str) -> bool:
        """Whether the task has a webhook config (of ``protocol``, unless it is empty)."""
        query = "SELECT 1 FROM push_configs WHERE agent = ? AND task_id = ?"
        args: tuple[str, ...] = (agent, task_id)
        if protocol:
            query, args = query + " AND protocol = ?", (*args, protocol)
        return self._conn.execute(query + " LIMIT 1", args).fetchone() is not None

    # --- message receipts (retries, spec 3.3.1) ------------------------------

    def remember_message(
        self,
        agent: str,
        owner: str,
        message_id: str,
        digest: str,
        *,
        task_id: str | None = None,
        seq: int = 0,
        answer: str | None = None,
    ) -> None:
        """Record what the message started (in the open batch, with its first event)."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO message_receipts (agent, owner, message_id, digest,"
                " task_id, seq, answer, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (agent, owner, message_id, digest, task_id, seq, answer, self._batch_began),
            )

    def remembered_messages(self, agent: str, since: datetime) -> list[tuple[str, str]]:
        """(owner, messageId) of every message with a receipt stored at ``since`` or later."""
        rows = self._conn.execute(
            "SELECT owner, message_id FROM message_receipts WHERE agent = ? AND created_at >= ?",
            (agent, _order_key(since)),
        ).fetchall()
        return [(row[0], row[1]) for row in rows]

    def forget_message(self, agent: str, owner: str, message_id: str, digest: str) -> None:
        """Drop what :meth:`remember_message` stored for the message."""
        with self._transaction() as conn:
            conn.execute(
                "DELETE FROM message_receipts WHERE agent = ? AND owner = ? AND message_id = ?"
                " AND digest = ?",
                (agent, owner, message_id, digest),
            )

    def find_message(
        self, agent: str, owner: str, message_id: str, digest: str, since: datetime
    ) -> Receipt | None:
        """What the same message of the same owner started at ``since`` or later, if anything."""
        row = self._conn.execute(
            "SELECT task_id, seq, answer FROM message_receipts WHERE agent = ? AND owner = ?"
            " AND message_id = ? AND digest = ? AND created_at >= ?",
            (agent, owner, message_id, digest, _order_key(since)),
        ).fetchone()
        return None if row is None else Receipt(row[0], int(row[1]), row[2])

    def get_task(self, agent: str, task_id: str, *, owner: str | None) -> StoredTask | None:
        """The task, if it exists and (when ``owner`` is given) belongs to ``owner``."""
        row = self._conn.execute(
            "SELECT owner, snapshot, last_seq, context_id, state FROM tasks"
            " WHERE agent = ? AND id = ?",
            (agent, task_id),
        ).fetchone()
        if row is None or (owner is not None and row[0] != owner):
            return None
        task = _read_snapshot(task_id, row[3], row[4], row[1])
        return StoredTask(agent, row[0], task, int(row[2]))

    def events_after(self, agent: str, task_id: str, seq: int) -> list[LoggedEvent]:
        """Streamed events of the task with a sequence number above ``seq``."""
        rows = self._conn.execute(
            "SELECT seq, kind, payload FROM task_events WHERE agent = ? AND task_id = ?"
            " AND seq > ? AND kind IN ('task', 'status', 'artifact') ORDER BY seq",
            (agent, task_id, seq),
        ).fetchall()
        return [LoggedEvent(int(r[0]), r[1], r[2]) for r in rows]

    def list_tasks(
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
        """The owner's tasks, most recently updated first, by keyset pagination."""
        where = ["agent = ?", "owner = ?"]
        args: list[object] = [agent, owner]
        if context_id:
            where.append("context_id = ?")
            args.append(context_id)
        if state is not None and state is not TaskState.UNSPECIFIED:
            where.append("state = ?")
            args.append(state.value)
        if updated_after is not None:
            where.append("updated_at >= ?")
            args.append(_order_key(updated_after))
        filters = " AND ".join(where)
        total = int(
            self._conn.execute(f"SELECT count(*) FROM tasks WHERE {filters}", args).fetchone()[0]
        )
        page_where, page_args = filters, list(args)
        if page_token:
            updated, last_id = _decode_page_token(page_token)
            page_where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            page_args += [updated, updated, last_id]
        rows = self._conn.execute(
            f"SELECT id, updated_at, snapshot, context_id, state FROM tasks WHERE {page_where}"
            " ORDER BY updated_at DESC, id DESC LIMIT ?",
            [*page_args, page_size + 1],
        ).fetchall()
        next_token = ""
        if len(rows) > page_size:
            rows = rows[:page_size]
            next_token = _encode_page_token(rows[-1][1], rows[-1][0])
        tasks = [_read_snapshot(row[0], row[3], row[4], row[2]) for row in rows]
        return TaskPage(tasks, next_token, total)

    def unfinished_tasks(self, agent: str | None = None) -> list[StoredTask]:
        """Tasks left SUBMITTED or WORKING: work that had a running executor."""
        query = (
            "SELECT agent, owner, snapshot, last_seq, id, context_id, state FROM tasks"
            " WHERE state IN (?, ?)"
        )
        args: list[object] = [TaskState.SUBMITTED.value, TaskState.WORKING.value]
        if agent is not None:
            query += " AND agent = ?"
            args.append(agent)
        rows = self._conn.execute(query, args).fetchall()
        return [
            StoredTask(r[0], r[1], _read_snapshot(r[4], r[5], r[6], r[2]), int(r[3])) for r in rows
        ]

    def prune(self, older_than: datetime, *, dry_run: bool = False) -> dict[str, int]:
        """Delete finished tasks last updated before ``older_than``, with everything of theirs.

        Returns how many tasks, events, push configs, notifications and
        delivery attempts went (or would go, with ``dry_run``), and how many
        message receipts older than ``older_than`` (see :meth:`remember_message`).
        """
        finals = tuple(state.value for state in TaskState if state.is_final)
        cutoff = _order_key(older_than)
        doomed = "SELECT agent, id FROM tasks WHERE updated_at < ? AND state IN (?, ?, ?, ?)"
        args = (cutoff, *finals)
        counts: dict[str, int] = {}
        queries = {
            "tasks": f"SELECT count(*) FROM ({doomed})",
            "events": f"SELECT count(*) FROM task_events WHERE (agent, task_id) IN ({doomed})",
            "push_configs": "SELECT count(*) FROM push_configs WHERE (agent, task_id) IN "
            f"({doomed})",
            "notifications": "SELECT count(*) FROM push_outbox WHERE (agent, task_id) IN "
            f"({doomed})",
            "attempts": "SELECT count(*) FROM push_attempts WHERE outbox_id IN (SELECT id FROM"
            f" push_outbox WHERE (agent, task_id) IN ({doomed}))",
        }
        for name, query in queries.items():
            counts[name] = int(self._conn.execute(query, args).fetchone()[0])
        receipts = "FROM message_receipts WHERE created_at < ?"
        counts["receipts"] = int(
            self._conn.execute(f"SELECT count(*) {receipts}", (cutoff,)).fetchone()[0]
        )
        if dry_run or not any(counts.values()):
            return counts
        with self._transaction() as conn:
            conn.execute(f"DELETE {receipts}", (cutoff,))
            conn.execute(
                "DELETE FROM push_attempts WHERE outbox_id IN (SELECT id FROM push_outbox"
                f" WHERE (agent, task_id) IN ({doomed}))",
                args,
            )
            for table, column in (
                ("push_outbox", "task_id"),
                ("push_configs", "task_id"),
                ("task_events", "task_id"),
            ):
                conn.execute(f"DELETE FROM {table} WHERE (agent, {column}) IN ({doomed})", args)
            conn.execute(f"DELETE FROM tasks WHERE (agent, id) IN ({doomed})", args)
        return counts

    # --- push notification configs -----------------------------------------

    def save_push_config(
        self,
        agent: str,
        owner: str,
        config: TaskPushNotificationConfig,
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> None:
        """Insert or replace a config; token and credentials are sealed first.

        ``protocol`` is the version the config was created in: its webhooks
        carry that version's body.
        """
        assert config.id and config.task_id
        with self._transaction() as conn:
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
                _order_key(utcnow()),
                protocol,
            ),
        )

    def get_push_config(
        self, agent: str, task_id: str, config_id: str, *, owner: str | None
    ) -> TaskPushNotificationConfig | None:
        row = self._conn.execute(
            "SELECT task_id, id, owner, url, token, auth_scheme, auth_credentials"
            " FROM push_configs WHERE agent = ? AND task_id = ? AND id = ?",
            (agent, task_id, config_id),
        ).fetchone()
        if row is None or (owner is not None and row[2] != owner):
            return None
        return self._push_config(row)

    def list_push_configs(
        self, agent: str, task_id: str, *, owner: str | None
    ) -> list[TaskPushNotificationConfig]:
        query = (
            "SELECT task_id, id, owner, url, token, auth_scheme, auth_credentials"
            " FROM push_configs WHERE agent = ? AND task_id = ?"
        )
        args: list[object] = [agent, task_id]
        if owner is not None:
            query += " AND owner = ?"
            args.append(owner)
        rows = self._conn.execute(query + " ORDER BY created_at, id", args).fetchall()
        return [self._push_config(row) for row in rows]

    def delete_push_config(self, agent: str, task_id: str, config_id: str, *, owner: str) -> bool:
        with self._transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM push_configs WHERE agent = ? AND task_id = ? AND id = ? AND owner = ?",
                (agent, task_id, config_id, owner),
            )
        return cursor.rowcount > 0

    def _push_config(self, row: tuple[str, ...]) -> TaskPushNotificationConfig:
        task_id, config_id, _owner, url, token, scheme, credentials = row
        # Checked when saved; read back as stored (an older version's row included).
        authentication = None
        if scheme:
            authentication = AuthenticationInfo.model_construct(
                scheme=scheme, credentials=self._box.open(credentials)
            )
        return TaskPushNotificationConfig.model_construct(
            id=config_id,
            task_id=task_id,
            url=url,
            token=self._box.open(token),
            authentication=authentication,
        )

    # --- push outbox --------------------------------------------------------------

    def pending_lanes(self, agent: str | None = None, task_id: str | None = None) -> list[Lane]:
        """Every (agent, task, config) with notifications still to deliver."""
        query = "SELECT DISTINCT agent, task_id, config_id FROM push_outbox WHERE state = 'pending'"
        args: list[object] = []
        if agent is not None:
            query += " AND agent = ?"
            args.append(agent)
        if task_id is not None:
            query += " AND task_id = ?"
            args.append(task_id)
        return [Lane(*row) for row in self._conn.execute(query, args).fetchall()]

    def next_notification(self, lane: Lane) -> Notification | None:
        """The oldest notification of the lane still pending (lanes deliver in order)."""
        row = self._conn.execute(
            "SELECT id, notification_id, seq, payload, attempts, next_attempt_at FROM push_outbox"
            " WHERE state = 'pending' AND agent = ? AND task_id = ? AND config_id = ?"
            " ORDER BY id LIMIT 1",
            (lane.agent, lane.task_id, lane.config_id),
        ).fetchone()
        if row is None:
            return None
        return Notification(lane, int(row[0]), row[1], int(row[2]), row[3], int(row[4]), row[5])

    def record_attempt(
        self,
        notification: Notification,
        *,
        outcome: Literal["delivered", "retry", "failed"],
        status: int | None,
        error: str | None,
        duration_ms: float,
        next_attempt_at: float = 0.0,
    ) -> None:
        """Log one delivery attempt and move the notification on, atomically."""
        attempt = notification.attempts + 1
        now = _order_key(utcnow())
        state = "pending" if outcome == "retry" else outcome
        with self._transaction() as conn:
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

    def abandon_notification(self, notification: Notification, reason: str) -> None:
        """Fail a notification without an attempt (its config was deleted)."""
        with self._transaction() as conn:
            conn.execute(
                "UPDATE push_outbox SET state = 'failed', last_error = ?, updated_at = ?"
                " WHERE id = ?",
                (reason, _order_key(utcnow()), notification.id),
            )

    def requeue_notification(self, outbox_id: int) -> bool:
        """Put a failed (dead-letter) notification back in its lane for delivery."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE push_outbox SET state = 'pending', next_attempt_at = 0, updated_at = ?"
                " WHERE id = ? AND state = 'failed'",
                (_order_key(utcnow()), outbox_id),
            )
        return cursor.rowcount > 0

    def deliveries(self, agent: str | None = None, task_id: str | None = None) -> list[Delivery]:
        """Notifications (oldest first) with every attempt made for each."""
        query = (
            "SELECT id, notification_id, agent, task_id, config_id, seq, state, attempts,"
            " last_error, created_at FROM push_outbox"
        )
        where, args = [], []
        if agent is not None:
            where.append("agent = ?")
            args.append(agent)
        if task_id is not None:
            where.append("task_id = ?")
            args.append(task_id)
        if where:
            query += " WHERE " + " AND ".join(where)
        rows = self._conn.execute(query + " ORDER BY id", args).fetchall()
        attempts: dict[int, list[Attempt]] = {}
        if rows:
            marks = ",".join("?" * len(rows))
            for outbox_id, attempt, at, status, error, duration in self._conn.execute(
                "SELECT outbox_id, attempt, at, status, error, duration_ms FROM push_attempts"
                f" WHERE outbox_id IN ({marks}) ORDER BY outbox_id, attempt",
                [row[0] for row in rows],
            ):
                attempts.setdefault(outbox_id, []).append(
                    Attempt(attempt, at, status, error, duration)
                )
        return [
            Delivery(
                id=row[0],
                notification_id=row[1],
                agent=row[2],
                task_id=row[3],
                config_id=row[4],
                seq=row[5],
                state=row[6],
                attempts_made=row[7],
                last_error=row[8],
                created_at=row[9],
                attempts=attempts.get(row[0], []),
            )
            for row in rows
        ]


def _encode_page_token(updated_at: str, task_id: str) -> str:
    raw = json.dumps([updated_at, task_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_page_token(token: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decoded = json.loads(raw)
        if not (
            isinstance(decoded, list)
            and len(decoded) == 2
            and all(isinstance(item, str) for item in decoded)
        ):
            raise ValueError
        updated_at, task_id = decoded
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParamsError(
            "pageToken: not a token this server issued", metadata={"field": "pageToken"}
        ) from None
    return updated_at, task_id

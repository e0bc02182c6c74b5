"""The storage interface: what the runtime, the push worker and the CLI ask of a store.

Two backends implement it: :class:`~a2a_trio.store.sqlite.SqliteStore`, the
embedded default, and :class:`~a2a_trio.store.postgres.PostgresStore`. Every
operation that may wait on I/O is ``async``; SQLite answers them without
leaving the trio thread (a commit in WAL mode costs microseconds, less than
a thread hop), PostgreSQL from a worker thread on a pooled connection, one
hop per call.

The interface comes in rooms, one protocol each, so that a caller names only
what it uses: :class:`Lifetime` (open, check, close), :class:`TaskLog` (tasks
and their log), :class:`Receipts` (messages that may be retried),
:class:`PushConfigs` (webhook configs), :class:`Outbox` (notifications to
deliver), :class:`Browse` (the operator console) and :class:`Pruning`.
:class:`Store` is all of them: what a backend implements.

The rule both keep: an event is committed before anyone sees it. The
recorder works out a round's writes as data (:mod:`.rounds`) and publishes
them only after :meth:`TaskLog.record` has returned.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Literal, Protocol

from ..protocol import PROTOCOL_VERSION, Message, TaskPushNotificationConfig, TaskState
from ..protocol.limits import Limits
from .browse import OutboxSummary, SummaryPage, TimelineEntry
from .coordination import Coordination
from .outbox_caps import OutboxCaps
from .records import Delivery, Lane, LoggedEvent, Notification, Receipt, StoredTask, TaskPage
from .retention import Retention
from .rounds import Round, ShareOutcome
from .space import StorageCondition

__all__ = [
    "Browse",
    "Lifetime",
    "Outbox",
    "Pruning",
    "PushConfigs",
    "Receipts",
    "Store",
    "TaskLog",
]


class Lifetime(Protocol):
    """Opening, checking and closing the database, and what it is."""

    #: Where the database is, safe to log (no password).
    display: str
    #: Whether writes fail for lack of space (readiness reports it): a write
    #: refused so raises :class:`~a2a_trio.protocol.StorageFullError`.
    space: StorageCondition

    @abstractmethod
    async def open(self, *, exclusive: bool = False) -> None:
        """Connect and migrate (idempotent; every other method needs it first).

        ``exclusive`` is for serving a database that one process serves at a
        time (SQLite): the store then holds the database until :meth:`aclose`,
        and opening it exclusively anywhere else, in this process or another,
        raises :class:`~a2a_trio.store.DatabaseInUseError` naming the holder.
        Plain opens (readers such as the CLI) neither take nor heed it. A
        database several processes serve (one with :attr:`coordination`)
        ignores it.
        """

    @abstractmethod
    async def aclose(self) -> None:
        """Disconnect and, when open exclusively, let the database go."""

    @abstractmethod
    async def check(self) -> None:
        """Raise (with a message saying why) unless the database serves now at this schema."""

    @property
    def coordination(self) -> Coordination | None:
        """How the processes serving this database share it (None: one process only).

        Open stores that several processes may serve (PostgreSQL) have one; see
        :mod:`a2a_trio.store.coordination`.
        """
        return None

    def development_token(self) -> str | None:
        """The console token this database keeps for development mode, made on first use.

        None: it keeps none here (in memory; PostgreSQL shares one through
        :attr:`coordination`), and the console makes one for the run.
        """
        return None


class TaskLog(Protocol):
    """Tasks and their append-only log: recorded in rounds, read back by task or page."""

    @abstractmethod
    async def record(self, round: Round) -> list[ShareOutcome]:
        """Store a round in one transaction; one outcome per share, in order.

        Each share is all or nothing: a share that cannot be stored (its task
        exists already, or moved on past the share's first sequence:
        :class:`~a2a_trio.store.rounds.StaleTask`) is rolled back alone and
        its outcome holds the error. If the transaction itself fails, nothing
        is stored and the error is raised. With ``round.push``, each streamed
        event is queued for every webhook config of its task in the same
        transaction, within :attr:`Outbox.outbox_caps`.
        """

    @abstractmethod
    async def get_task(self, agent: str, task_id: str, *, owner: str | None) -> StoredTask | None:
        """The task, if it exists and (when ``owner`` is given) belongs to ``owner``."""

    async def get_task_leased(
        self, agent: str, task_id: str, *, owner: str, lease: tuple[str, str]
    ) -> tuple[StoredTask | None, bool]:
        """:meth:`get_task`, and whether the task's lease was taken with the read.

        Several processes (PostgreSQL): a follow-up's read takes its task's
        lease ``(holder, token)`` in the same round trip when nobody holds it
        and the task is ``owner``'s and not final; the row read is then the
        one its last holder left. A store without leases takes none. The
        caller lets a lease taken go (by its token), whatever happens next.
        """
        return await self.get_task(agent, task_id, owner=owner), False

    @abstractmethod
    async def events_after(
        self, agent: str, task_id: str, seq: int, *, messages: bool = False
    ) -> list[LoggedEvent]:
        """Streamed events of the task with a sequence number above ``seq``, in order.

        With ``messages``, the rows of kind ``message`` too (``records.READ_BACK_KINDS``).
        """

    @abstractmethod
    async def history(
        self,
        agent: str,
        task_id: str,
        *,
        limits: Limits,
        length: int | None = None,
        through: int | None = None,
    ) -> list[Message]:
        """The task's history as a response shows it, read from its log, oldest first.

        The most recent messages up to event ``through`` (None: the last) within
        ``limits`` and, when given, ``length`` (see :mod:`a2a_trio.store.history`).
        The task's row holds no history: a turn writes only its own messages.
        """

    async def task_since(
        self, agent: str, task_id: str, seq: int
    ) -> tuple[StoredTask | None, list[LoggedEvent]]:
        """The task, then its events above ``seq`` (read after it: maybe more).

        Its streamed events and its ``message`` rows (``records.READ_BACK_KINDS``):
        with them, the reader knows every message its history gained, and can
        answer with the history without reading the log again. For a process
        reading back what another recorded; a backend may read both in one
        round trip.
        """
        stored = await self.get_task(agent, task_id, owner=None)
        if stored is None:
            return None, []
        return stored, await self.events_after(agent, task_id, seq, messages=True)

    async def tasks_since(
        self, agent: str, cursors: Sequence[tuple[str, int]]
    ) -> dict[str, tuple[StoredTask | None, list[LoggedEvent]]]:
        """:meth:`task_since` of several tasks, each from its own sequence, by task id.

        A task that does not exist is left out. A backend may read them all
        in one round trip.
        """
        read: dict[str, tuple[StoredTask | None, list[LoggedEvent]]] = {}
        for task_id, seq in cursors:
            stored, events = await self.task_since(agent, task_id, seq)
            if stored is not None:
                read[task_id] = (stored, events)
        return read

    @abstractmethod
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
        """The owner's tasks, most recently updated first, by keyset pagination."""

    @abstractmethod
    async def unfinished_tasks(
        self, agent: str | None = None, *, task_id: str | None = None
    ) -> list[StoredTask]:
        """Tasks with work that had a running executor (of ``agent``; the task ``task_id``).

        Those left SUBMITTED or WORKING, and those paused (INPUT_REQUIRED,
        AUTH_REQUIRED) whose follow-up's execution had started: their log
        holds a user's message after their last status (see
        :func:`.queries.continued`).
        """


class Receipts(Protocol):
    """What each message started, so that a retried message is answered, not run again.

    Receipts are written with their round (:meth:`TaskLog.record`); spec 3.3.1.
    """

    @abstractmethod
    async def remembered_messages(self, agent: str, since: datetime) -> list[tuple[str, str]]:
        """(owner, messageId) of every message with a receipt stored at ``since`` or later."""

    @abstractmethod
    async def find_message(
        self, agent: str, owner: str, message_id: str, digest: str, since: datetime
    ) -> Receipt | None:
        """What the same message of the same owner started at ``since`` or later, if anything."""

    @abstractmethod
    async def forget_message(self, agent: str, owner: str, message_id: str, digest: str) -> None:
        """Drop the receipt stored for the message (:meth:`TaskLog.record` writes them)."""


class PushConfigs(Protocol):
    """The webhook configs of each task, their secrets sealed."""

    @abstractmethod
    async def save_push_config(
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

    @abstractmethod
    async def get_push_config(
        self, agent: str, task_id: str, config_id: str, *, owner: str | None
    ) -> TaskPushNotificationConfig | None:
        """One webhook config of the task, or None; with an ``owner``, of that owner's task only."""

    @abstractmethod
    async def list_push_configs(
        self, agent: str, task_id: str, *, owner: str | None
    ) -> list[TaskPushNotificationConfig]:
        """The task's configs, oldest first (every owner's when ``owner`` is None)."""

    @abstractmethod
    async def delete_push_config(
        self, agent: str, task_id: str, config_id: str, *, owner: str
    ) -> bool:
        """Delete the owner's config; whether there was one."""


class Outbox(Protocol):
    """Webhook notifications queued with their rounds, in lanes, and each attempt made."""

    #: How many notifications may wait in the outbox per webhook and per task;
    #: :meth:`TaskLog.record` stores the newer ones past a cap as dead letters
    #: (set by the push dispatcher from its settings).
    outbox_caps: OutboxCaps = OutboxCaps()

    @abstractmethod
    async def pending_lanes(
        self, agent: str | None = None, task_id: str | None = None
    ) -> list[Lane]:
        """Every (agent, task, config) with notifications still to deliver."""

    @abstractmethod
    async def next_notification(self, lane: Lane) -> Notification | None:
        """The oldest notification of the lane still pending (lanes deliver in order)."""

    @abstractmethod
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
        """Log one delivery attempt and move the notification on, atomically."""

    @abstractmethod
    async def abandon_notification(self, notification: Notification, reason: str) -> None:
        """Fail a notification without an attempt (its config was deleted)."""

    @abstractmethod
    async def requeue_notification(self, outbox_id: int) -> bool:
        """Put a failed (dead-letter) notification back in its lane for delivery."""

    @abstractmethod
    async def deliveries(
        self, agent: str | None = None, task_id: str | None = None
    ) -> list[Delivery]:
        """Notifications (oldest first) with every attempt made for each."""


class Browse(Protocol):
    """What the operator console (:mod:`a2a_trio.console`) reads: every owner's tasks."""

    @abstractmethod
    async def browse_tasks(
        self,
        agent: str | None = None,
        *,
        state: TaskState | None = None,
        page_size: int = 50,
        page_token: str | None = None,
    ) -> SummaryPage:
        """Every owner's tasks (of ``agent``, in ``state``), most recently updated first.

        Keyset-paged like :meth:`TaskLog.list_tasks`; summaries only, no snapshots.
        """

    @abstractmethod
    async def timeline(
        self, agent: str, task_id: str, *, after: int = 0, limit: int = 500
    ) -> list[TimelineEntry]:
        """The task's logged events of every kind after ``after``, in order, with their times."""

    @abstractmethod
    async def task_counts(self) -> dict[tuple[str, TaskState], int]:
        """How many tasks each (agent, state) has."""

    @abstractmethod
    async def outbox_summary(self) -> OutboxSummary:
        """Notifications pending and failed, and when the oldest pending one was queued."""

    @abstractmethod
    async def delivery_page(
        self,
        agent: str | None = None,
        task_id: str | None = None,
        *,
        state: str | None = None,
        before: int | None = None,
        limit: int = 50,
    ) -> list[Delivery]:
        """Notifications newest first (ids below ``before``), each with its attempts."""


class Pruning(Protocol):
    """Forgetting what finished long ago: at once (``a2a-trio prune``) or on a schedule.

    Both delete through :attr:`retention`'s batches, each its own short
    transaction (see :mod:`a2a_trio.store.retention`).
    """

    @abstractmethod
    async def prune(self, older_than: datetime, *, dry_run: bool = False) -> dict[str, int]:
        """Delete finished tasks last updated before ``older_than``, with everything of theirs.

        In batches (:func:`~a2a_trio.store.retention.prune_in_batches`),
        each its own transaction. Message receipts go by their own age: every
        receipt stored before ``older_than``, whatever became of its task.
        Returns how many tasks, events, push configs, notifications, delivery
        attempts and message receipts went (or would go, with ``dry_run``),
        under the keys ``tasks``, ``events``, ``push_configs``,
        ``notifications``, ``attempts`` and ``receipts``.
        """

    @property
    @abstractmethod
    def retention(self) -> Retention:
        """Pruning in batches and the runs' lease (the scheduled pruner's, see
        :mod:`a2a_trio.runtime.retention`)."""


class Store(Lifetime, TaskLog, Receipts, PushConfigs, Outbox, Browse, Pruning, ABC):
    """The durable state of every agent mounted on one database: every room above.

    A backend subclasses it; a caller that uses one room names that room's
    protocol instead.
    """

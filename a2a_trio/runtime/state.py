"""The state of one agent host, apart from the rooms that move it.

Like h11's ``_events`` beside its ``_state``: plain data here, behaviour in
the rooms. :class:`Execution` and :class:`LiveTask` are what the executions
run and the recorder writes; :class:`HostState` is what every room of one
host shares (its agent's name, store and settings, the live tasks, and the
host nursery while the host runs), passed to each room once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import trio

from ..protocol import (
    PROTOCOL_VERSION,
    A2AError,
    Message,
    Task,
    TaskNotCancelableError,
    TaskState,
    UnsupportedOperationError,
)
from ..push import PushDispatcher
from ..store import Store, StoredTask
from ..store.coordination import QueuedExecution
from ..store.observer import NO_OBSERVER, Observer
from .executor import AgentEvent, EventQueue, RequestContext
from .feed import TaskFeed
from .settings import HostSettings

if TYPE_CHECKING:
    from .cluster import Cluster

__all__ = [
    "ABANDONED",
    "Entry",
    "Execution",
    "ExecutionQueue",
    "HostState",
    "LiveTask",
    "LiveTasks",
    "RetryKey",
    "TaskRead",
    "TurnMessage",
    "not_cancelable",
]

#: The status message of a task whose process stopped while running it.
ABANDONED = "The server stopped while this task was running; it did not finish."

#: Who sent a message, and its messageId (whether the content is the same
#: is asked only of messages that share these).
RetryKey = tuple[str, str]


@dataclass(eq=False)
class Execution:
    """One run of ``execute`` (or ``cancel``) and what waiters need of it."""

    context: RequestContext
    purpose: Literal["execute", "cancel"] = "execute"
    continuing: bool = False
    cancel_scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    first: trio.Event = field(default_factory=trio.Event)
    done: trio.Event = field(default_factory=trio.Event)
    #: The direct Message answer, or the error that ended the run before any task.
    answer: Message | None = None
    error: A2AError | None = None
    #: Log position when this execution began, and the task as it was then
    #: (a continuation's stream starts with that snapshot, then what follows).
    start_seq: int = 0
    start_snapshot: Task | None = None
    #: True while this execution may move its task out of an interrupted state.
    may_resume: bool = False
    cancel_requested: bool = False
    #: Set once the recorder has dealt with every event this execution enqueued.
    recorded: trio.Event = field(default_factory=trio.Event)
    #: Why the recorder could not store this execution's events (they are dropped).
    recording_error: Exception | None = None
    #: The message's retry key (owner, messageId) and the message as sent,
    #: when retries are recognised (see Retries).
    retry_key: RetryKey | None = None
    retry_message: Message | None = None
    #: The protocol version the message came in: a webhook config it carries
    #: is kept with it, so that its webhooks have that version's body.
    protocol: str = PROTOCOL_VERSION
    #: What the message started, once known: the task (and the log position of
    #: a continuation) or the direct answer; stored only if the client went
    #: away without its answer (``unanswered``).
    receipt: dict[str, Any] | None = None
    unanswered: bool = False
    #: The token of the task lease this execution holds or will hold, when
    #: several processes serve the database (see runtime.cluster).
    lease_token: str | None = None
    #: Whether :attr:`lease_token` was taken with its request's read (see
    #: ``Messages._read_continued``): the task is this execution's already.
    lease_held: bool = False
    #: Whether it has claimed its task's turn in this process (see LiveTasks.claim).
    claimed: bool = False
    #: Whether the continuation's message is written before the executor starts
    #: (a stream shows its task with that message first); else it goes with
    #: the executor's first events on one process, or on several when its
    #: task's lease is held already (see ``Executions._resume``).
    await_message: bool = True
    #: A queued execution run again from the start (its message is in the log).
    restart: bool = False
    #: Stopped to run again elsewhere: its task is not ended.
    handed_back: bool = False
    #: A continuation: the task as its request read it, while nothing here has
    #: written it since (see :meth:`LiveTasks.reading`); it is not read again.
    read: StoredTask | None = None
    #: Whether the execution may let its lease go with its last round: its
    #: executor returned and nothing it left needs an ending written.
    may_release: bool = False
    #: Whether its lease went with a recorded round (nothing is left to release).
    lease_released: bool = False
    #: A worker's queued execution: its row, which its last round may end
    #: (``queued_ended``: it did, so the worker writes no end of its own).
    queued: QueuedExecution | None = None
    queued_ended: bool = False

    def settle_first(self) -> None:
        self.first.set()


@dataclass(eq=False)
class LiveTask:
    """A task with something attached: an execution, a waiter or a stream."""

    task_id: str
    feed: TaskFeed
    lock: trio.Lock = field(default_factory=trio.Lock)
    execution: Execution | None = None
    users: int = 0
    #: Direct push mode: recorded events wait for their webhooks.
    undelivered: bool = False
    #: Direct push mode: a task is delivering the held events, then publishes them.
    flushing: bool = False
    #: Several processes: the task is being read back from the log (and once
    #: more after, when another process moved it meanwhile).
    catching_up: bool = False
    catch_up_again: bool = False

    @property
    def left_running(self) -> bool:
        """Whether the task is published as SUBMITTED or WORKING.

        An execution that is done may leave its task so when something else
        ends it: the host's retry of an ending it could not store, or the
        process that adopts the task of a worker that died. Its waiters wait
        for that ending in the log, not only for the execution.
        """
        snapshot = self.feed.snapshot
        return snapshot is not None and snapshot.status.state in (
            TaskState.SUBMITTED,
            TaskState.WORKING,
        )


@dataclass(eq=False)
class TurnMessage:
    """A continuation's message, written to its task's log by the recorder's next round.

    ``written`` is set once that round is over: stored, unless ``error`` says
    why not (the execution has not started: it may write the message again).
    """

    message: Message
    payload: str
    #: Several processes: the task's lease to take with the message, as
    #: (member, token); refused (``LeaseHeld``) while anyone holds one.
    lease: tuple[str, str] | None = None
    #: Whether its execution waits for it (see :attr:`Execution.await_message`):
    #: else a write refused stops the execution, as a refused event does.
    awaited: bool = True
    written: trio.Event = field(default_factory=trio.Event)
    error: Exception | None = None


#: What the recorder reads: an execution's event (or a continuation's message),
#: or None once the execution ended.
Entry = tuple[LiveTask, Execution, AgentEvent | TurnMessage | None]


@dataclass(eq=False)
class TaskRead:
    """A read of a stored task under way; ``moved`` once this process wrote the task since."""

    task_id: str
    moved: bool = False


class LiveTasks:
    """The live tasks, by id: each held (leased) while anything uses it.

    A task is live while an execution, a waiter or a stream holds it; the
    last to let go removes it, so only tasks something attends to hold a feed.
    """

    def __init__(self, feed_window: int) -> None:
        self.tasks: dict[str, LiveTask] = {}
        self._feed_window = feed_window
        #: Called with each stored task that becomes live (several processes:
        #: another may have moved it since it was read).
        self.attended: Callable[[LiveTask], None] | None = None
        #: The reads under way (see :meth:`reading`), by task id.
        self._reads: dict[str, list[TaskRead]] = {}
        #: The continuations that hold or may take their task's lease, by task
        #: id (see :meth:`claim`), each set once let go.
        self._claims: dict[str, trio.Event] = {}

    def claim_nowait(self, task_id: str) -> bool:
        """Claim the task's turn if nothing here has: whether it was.

        Several processes: a continuation takes its task's lease before its
        execution holds the live task's lock when it takes it with its
        request's read. The store lets this process take a lease it holds
        already (see Coordination.acquire), so the continuations of one task
        here take turns (claimed before any lease, let go once their
        execution ends), and none takes another's lease.
        """
        if task_id in self._claims:
            return False
        self._claims[task_id] = trio.Event()
        return True

    async def claim(self, task_id: str) -> None:
        """Claim the task's turn (see :meth:`claim_nowait`), waiting for the one before."""
        while (claimed := self._claims.get(task_id)) is not None:
            await claimed.wait()
        self._claims[task_id] = trio.Event()

    def unclaim(self, task_id: str) -> None:
        """Let the task's turn go to the next continuation waiting for it."""
        claimed = self._claims.pop(task_id, None)
        if claimed is not None:
            claimed.set()

    def reading(self, task_id: str) -> TaskRead:
        """Note a read of the stored task, begun now; :meth:`read_done` when it is held.

        The read's ``moved`` tells whether this process has written the task
        since (:meth:`written`): if not, and no other process writes here, what
        was read is the task as it is, even if its live task came and went meanwhile.
        """
        read = TaskRead(task_id)
        self._reads.setdefault(task_id, []).append(read)
        return read

    def read_done(self, read: TaskRead) -> None:
        """Stop noting writes for ``read``."""
        reads = self._reads.get(read.task_id)
        if reads is not None:
            reads.remove(read)
            if not reads:
                del self._reads[read.task_id]

    def written(self, task_id: str) -> None:
        """This process has committed writes of the task: its reads under way are stale."""
        if self._reads:
            for read in self._reads.get(task_id, ()):
                read.moved = True

    def acquire(
        self, task_id: str, stored: StoredTask | None, *, written_here: bool = False
    ) -> LiveTask:
        """The live task (made from ``stored`` if it is not live yet), held once more.

        ``written_here``: an execution of this process is about to write it,
        reading it fresh from the store first, so it needs no read-back of what
        another process may have recorded since ``stored`` was read.
        """
        live = self.tasks.get(task_id)
        if live is None:
            feed = TaskFeed(
                stored.task if stored else None,
                stored.last_seq if stored else 0,
                window=self._feed_window,
            )
            live = self.tasks[task_id] = LiveTask(task_id, feed)
            if stored is not None and not written_here and self.attended is not None:
                self.attended(live)
        live.users += 1
        return live

    def release(self, live: LiveTask) -> None:
        live.users -= 1
        if live.users <= 0 and self.tasks.get(live.task_id) is live:
            del self.tasks[live.task_id]


class HostState:
    """What the rooms of one agent host share, passed to each once.

    The host nursery is here while the host runs (trio's ``handler_nursery``:
    the rooms start their work in it, never in a request's). :meth:`accepting`
    hands it out for new work, :meth:`finishing` for work that completes what
    is under way, even while the host shuts down.
    """

    def __init__(
        self,
        *,
        name: str,
        store: Store,
        settings: HostSettings,
        streaming: bool = True,
        push: PushDispatcher | None = None,
        push_notifications: bool = False,
    ) -> None:
        self.name = name
        self.store = store
        self.settings = settings
        self.streaming = streaming
        self.push = push
        self.push_notifications = push_notifications and push is not None
        #: The tasks something attends to now.
        self.live = LiveTasks(settings.feed_window)
        #: This process's membership, when several serve the database.
        self.cluster: Cluster | None = None
        #: Told of every committed share and every execution (the console, the metrics).
        self.observer: Observer = NO_OBSERVER
        #: The host nursery, while the host runs.
        self.nursery: trio.Nursery | None = None
        #: Set once the host stops accepting work.
        self.closing = False
        #: Set when the host begins to shut down.
        self.stopping = trio.Event()
        #: Set once the host has stopped: nothing more is recorded here.
        self.finished = trio.Event()

    @property
    def running(self) -> bool:
        """Whether the host runs and accepts work."""
        return self.nursery is not None and not self.closing

    def accepting(self) -> trio.Nursery:
        """The host nursery, for new work; raises ``UnsupportedOperationError`` while closing."""
        if self.nursery is None or self.closing:
            raise UnsupportedOperationError("The agent is shutting down; try again later")
        return self.nursery

    def finishing(self) -> trio.Nursery:
        """The host nursery, for work that finishes what is under way, even while closing."""
        assert self.nursery is not None, "the host is not running"
        return self.nursery


def not_cancelable(task_id: str, state: TaskState) -> TaskNotCancelableError:
    """The error of a CancelTask for a task in ``state`` (a final one)."""
    return TaskNotCancelableError(
        f"Task {task_id} is {state.value} and cannot be canceled",
        metadata={"taskId": task_id, "state": state.value},
    )


class ExecutionQueue(EventQueue):
    """An execution's event queue: its events go to the host's recorder, tagged."""

    def __init__(
        self, inbox: trio.MemorySendChannel[Entry], live: LiveTask, execution: Execution
    ) -> None:
        super().__init__(inbox)
        self._live = live
        self._execution = execution
        self._ended = False

    def _item(self, event: AgentEvent) -> Entry:
        if self._ended:
            raise trio.ClosedResourceError("the execution this queue served has ended")
        return self._live, self._execution, event

    async def end(self) -> None:
        """Close the queue; returns once the recorder has dealt with every event in it."""
        self._ended = True
        await self._send.send((self._live, self._execution, None))
        await self._execution.recorded.wait()

"""Executions: one run of an executor, the live tasks it holds, its event queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from ..protocol import A2AError, Message, Task
from ..store import StoredTask
from .executor import AgentEvent, EventQueue, RequestContext
from .feed import TaskFeed

#: Who sent a message, its messageId and a digest of its content.
RetryKey = tuple[str, str, str]


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
    #: The message's retry key (owner, messageId, content digest), when retries
    #: are recognised (see Retries.remember).
    retry_key: RetryKey | None = None
    #: What the message started, once known: the task (and the log position of
    #: a continuation) or the direct answer; stored only if the client went
    #: away without its answer (``unanswered``).
    receipt: dict[str, Any] | None = None
    unanswered: bool = False

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


#: What the recorder reads: an execution's event, or None once the execution ended.
Entry = tuple[LiveTask, Execution, AgentEvent | None]


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


class LiveTasks:
    """The live tasks, by id: each held (leased) while anything uses it.

    A task is live while an execution, a waiter or a stream holds it; the
    last to let go removes it, so only tasks something attends to hold a feed.
    """

    def __init__(self, feed_window: int) -> None:
        self.tasks: dict[str, LiveTask] = {}
        self._feed_window = feed_window

    def acquire(self, task_id: str, stored: StoredTask | None) -> LiveTask:
        live = self.tasks.get(task_id)
        if live is None:
            feed = TaskFeed(
                stored.task if stored else None,
                stored.last_seq if stored else 0,
                window=self._feed_window,
            )
            live = self.tasks[task_id] = LiveTask(task_id, feed)
        live.users += 1
        return live

    def release(self, live: LiveTask) -> None:
        live.users -= 1
        if live.users <= 0 and self.tasks.get(live.task_id) is live:
            del self.tasks[live.task_id]

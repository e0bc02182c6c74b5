"""What an agent author writes against: the executor, its context and its queue."""

from __future__ import annotations

import abc
import contextlib
import math
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from ..protocol import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    utcnow,
)

__all__ = [
    "AgentEvent",
    "AgentExecutor",
    "EventQueue",
    "EventSink",
    "Principal",
    "RequestContext",
    "TaskUpdater",
    "new_agent_message",
]

#: What an executor may put on its queue.
AgentEvent = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: an identifier that owns tasks, and the scopes granted."""

    identifier: str
    scopes: frozenset[str] = frozenset()
    authenticated: bool = False
    claims: Mapping[str, Any] = field(default_factory=dict)


#: Every unauthenticated caller is this one owner.
ANONYMOUS = Principal(identifier="")


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Everything an executor knows about the request it serves.

    ``task_id`` and ``context_id`` are always set: for a new task they are the
    ids the server generated, and every event the executor enqueues must use
    them. ``current_task`` is the stored task when the message continues one
    (or when cancelling), else ``None``: its status and artifacts, without its
    history, which its event log keeps; :meth:`history` reads that.
    """

    task_id: str
    context_id: str
    message: Message | None = None
    current_task: Task | None = None
    caller: Principal = ANONYMOUS
    configuration: SendMessageConfiguration | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    requested_extensions: frozenset[str] = frozenset()
    #: Credentials the client supplied in-band (``metadata.credentials`` of the
    #: message or the request), for a task in AUTH_REQUIRED. They are handed
    #: to the executor only: the stored message no longer holds them.
    credentials: Any = None
    #: Reads the task's history from its log (set by the host that runs the executor).
    history_reader: Callable[[int | None], Awaitable[list[Message]]] | None = field(
        default=None, repr=False, compare=False
    )

    async def history(self, length: int | None = None) -> list[Message]:
        """The task's history so far, oldest first: this message included, once recorded.

        The most recent messages (at most ``length``) within the server's
        ``[limits] history_messages`` / ``history_bytes``, as GetTask shows
        them. A trio coroutine; empty for a task not stored yet.
        """
        if self.history_reader is None:
            return []
        return await self.history_reader(length)

    def user_text(self, separator: str = "\n") -> str:
        """The text parts of the incoming message, joined."""
        if self.message is None:
            return ""
        return separator.join(part.text for part in self.message.parts if part.text is not None)


class EventSink(Protocol):
    """Anything events are enqueued on: an :class:`EventQueue`, or the asyncio
    bridge's queue (``a2a_trio.adapters.asyncio``). :class:`TaskUpdater` takes either."""

    async def enqueue_event(self, event: AgentEvent) -> None:
        """Hand ``event`` to the recorder, in order."""


class EventQueue:
    """The executor's outbox, read in order by the host's recorder.

    A bounded trio memory channel: an executor that produces faster than
    events are committed waits instead of growing memory.

    :meth:`enqueue_event` is a cancellation point but yields to other tasks
    only when the queue is full, like a write to a buffered stream: the
    events an executor reports between two of its own waits reach the
    recorder together and are committed in one transaction.
    """

    def __init__(self, send_channel: trio.MemorySendChannel[Any]) -> None:
        self._send = send_channel

    async def enqueue_event(self, event: AgentEvent) -> None:
        """Hand one event to the host; waits only while the queue is full."""
        await trio.lowlevel.checkpoint_if_cancelled()
        item = self._item(event)
        try:
            self._send.send_nowait(item)
        except trio.WouldBlock:
            await self._send.send(item)

    def enqueue_event_nowait(self, event: AgentEvent) -> None:
        """Like :meth:`enqueue_event`; raises ``trio.WouldBlock`` when full."""
        self._send.send_nowait(self._item(event))

    def _item(self, event: AgentEvent) -> object:
        """What goes down the channel for ``event`` (the host tags it with its execution)."""
        return event

    @classmethod
    def open(
        cls, max_buffer: int | float = math.inf
    ) -> tuple[EventQueue, trio.MemoryReceiveChannel[AgentEvent]]:
        """A queue and the receiving end to read it from (tests, embedding)."""
        send, receive = trio.open_memory_channel[AgentEvent](max_buffer)
        return cls(send), receive


class AgentExecutor(abc.ABC):
    """An agent's logic. One instance serves every request of its mount.

    ``execute`` runs in the host's nursery under its own cancel scope; it
    reports progress only by enqueueing events. ``cancel`` is called on
    CancelTask (bounded by the host's ``cancel_grace``); then the task ends
    CANCELED either way and ``execute``'s scope is cancelled at once. An
    exception ends the task FAILED.

    :meth:`lifespan` is what the executor holds while its host runs (an event
    loop, a client, a pool): the host enters it before it takes work and
    leaves it once every execution has ended.
    """

    def lifespan(self) -> AbstractAsyncContextManager[object]:
        """Entered by the host around its whole run; the default holds nothing."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        """Do the work for one incoming message."""

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        """Stop the work on ``context.task_id``. The default marks it CANCELED."""
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


PartsLike = str | Part | Sequence[Part]


def _parts(content: PartsLike) -> list[Part]:
    if isinstance(content, str):
        return [Part(text=content)]
    if isinstance(content, Part):
        return [content]
    return list(content)


def new_agent_message(
    content: PartsLike,
    *,
    context_id: str | None = None,
    task_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Message:
    """A message from the agent with a fresh id."""
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.AGENT,
        parts=_parts(content),
        context_id=context_id,
        task_id=task_id,
        metadata=dict(metadata) if metadata else None,
    )


class TaskUpdater:
    """Builds the events of one task and enqueues them.

    The usual flow::

        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        await updater.add_artifact("result text")
        await updater.complete()
    """

    def __init__(self, queue: EventSink, task_id: str, context_id: str) -> None:
        self.queue = queue
        self.task_id = task_id
        self.context_id = context_id

    def new_agent_message(
        self, content: PartsLike, *, metadata: Mapping[str, Any] | None = None
    ) -> Message:
        """A message from the agent bound to this task."""
        return new_agent_message(
            content, context_id=self.context_id, task_id=self.task_id, metadata=metadata
        )

    def _message(self, content: PartsLike | Message | None) -> Message | None:
        if content is None or isinstance(content, Message):
            return content
        return self.new_agent_message(content)

    async def submit(self, message: PartsLike | Message | None = None) -> None:
        """Enqueue the new task in SUBMITTED (the first event of a new task)."""
        task = Task(
            id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(
                state=TaskState.SUBMITTED, message=self._message(message), timestamp=utcnow()
            ),
        )
        await self.queue.enqueue_event(task)

    async def update_status(
        self,
        state: TaskState,
        message: PartsLike | Message | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """Enqueue a status change (or, for WORKING -> WORKING, progress)."""
        event = TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(state=state, message=self._message(message), timestamp=utcnow()),
            metadata=dict(metadata) if metadata else None,
        )
        await self.queue.enqueue_event(event)

    async def start_work(self, message: PartsLike | Message | None = None) -> None:
        """Move the task to WORKING, with an optional agent message."""
        await self.update_status(TaskState.WORKING, message)

    async def requires_input(self, message: PartsLike | Message | None = None) -> None:
        """Pause the task until the client's next message for it."""
        await self.update_status(TaskState.INPUT_REQUIRED, message)

    async def requires_auth(self, message: PartsLike | Message | None = None) -> None:
        """Pause the task until the client supplies credentials (spec 7.6)."""
        await self.update_status(TaskState.AUTH_REQUIRED, message)

    async def complete(self, message: PartsLike | Message | None = None) -> None:
        """End the task COMPLETED, with an optional agent message."""
        await self.update_status(TaskState.COMPLETED, message)

    async def failed(self, message: PartsLike | Message | None = None) -> None:
        """End the task FAILED, with an optional agent message saying why."""
        await self.update_status(TaskState.FAILED, message)

    async def reject(self, message: PartsLike | Message | None = None) -> None:
        """End the task REJECTED: the agent will not do it."""
        await self.update_status(TaskState.REJECTED, message)

    async def cancel(self, message: PartsLike | Message | None = None) -> None:
        """End the task CANCELED, with an optional agent message."""
        await self.update_status(TaskState.CANCELED, message)

    async def add_artifact(
        self,
        parts: PartsLike,
        *,
        artifact_id: str | None = None,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        extensions: Iterable[str] | None = None,
        append: bool | None = None,
        last_chunk: bool | None = None,
    ) -> str:
        """Enqueue an artifact, or one chunk of it; returns the artifact id.

        Send a large artifact in chunks: the first with ``append=False``, the
        rest with ``append=True`` and the same ``artifact_id``, the last with
        ``last_chunk=True``.
        """
        artifact_id = artifact_id or str(uuid.uuid4())
        event = TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=Artifact(
                artifact_id=artifact_id,
                name=name,
                description=description,
                parts=_parts(parts),
                metadata=dict(metadata) if metadata else None,
                extensions=list(extensions) if extensions else None,
            ),
            append=append,
            last_chunk=last_chunk,
        )
        await self.queue.enqueue_event(event)
        return artifact_id

    async def send_message(self, content: PartsLike | Message) -> None:
        """Enqueue an agent message for the task's history."""
        message = content if isinstance(content, Message) else self.new_agent_message(content)
        await self.queue.enqueue_event(message)

"""The agent host: runs executors in its nursery and records what they report.

One :class:`AgentHost` serves one mounted agent. Its nursery owns every
execution; requests only wait on them, so a client that goes away never
stops a task. Each event an executor enqueues goes through the recorder:
checked against the state machine, committed to SQLite with the task it
produces, then published to the task's :class:`TaskFeed` for blocking calls,
streams and subscribers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import trio
from pydantic_core import PydanticSerializationError

from ..protocol import (
    PROTOCOL_VERSION,
    A2AError,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    IllegalTransition,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    PushNotificationNotSupportedError,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    UnsupportedOperationError,
    check_executor_move,
    check_host_ending,
    utcnow,
)
from ..protocol.limits import Limits
from ..protocol.tasks import add_to_history, apply_artifact, apply_status, view_task
from ..push import PushDispatcher, WebhookRefused
from ..store import Receipt, StoredTask, TaskStore
from .executor import (
    AgentEvent,
    AgentExecutor,
    EventQueue,
    Principal,
    RequestContext,
    new_agent_message,
)
from .feed import FeedItem, TaskFeed

__all__ = ["AgentHost", "HostSettings", "TaskEventStream"]

log = logging.getLogger("a2a_trio.runtime")


#: Who sent a message, its messageId and a digest of its content.
RetryKey = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class HostSettings:
    """Timing and sizing of one host."""

    #: How long CancelTask lets the executor's ``cancel`` hook run; once the
    #: task is CANCELED the execution's cancel scope is cancelled at once.
    cancel_grace: float = 5.0
    #: How long shutdown lets running executions finish before cancelling them.
    shutdown_grace: float = 10.0
    #: Events the host's executors, all together, may enqueue ahead of its
    #: recorder; also the most events the recorder commits in one transaction.
    queue_size: int = 256
    #: Recent events kept in memory per live task for readers that lag.
    feed_window: int = 256
    #: ListTasks page size when the request names none.
    default_page_size: int = 50
    #: Messages of history each ListTasks task shows when the request names
    #: no historyLength (None: all of it).
    list_history_length: int | None = 0
    #: What one request may carry, and how many artifacts a task may hold.
    limits: Limits = field(default_factory=Limits)
    #: Seconds during which a SendMessage repeating an earlier one of the same
    #: caller (same messageId, same content) gets the original task or answer
    #: instead of starting new work (spec 3.3.1); 0 turns that off.
    retry_window: float = 600.0


class _EventRefused(Exception):
    """An executor event that cannot be recorded; logged and dropped."""


@dataclass(eq=False)
class _Execution:
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
    #: are recognised (see AgentHost._remember).
    retry_key: RetryKey | None = None
    #: The protocol version the message came in: a webhook config it carries
    #: is kept with it, so that its webhooks have that version's body.
    protocol: str = PROTOCOL_VERSION
    #: What the message started, once known: the task (and the log position of
    #: a continuation) or the direct answer; stored only if the client went
    #: away without its answer (``unanswered``).
    receipt: dict[str, Any] | None = None
    unanswered: bool = False

    def settle_first(self) -> None:
        self.first.set()


@dataclass(eq=False)
class _LiveTask:
    """A task with something attached: an execution, a waiter or a stream."""

    task_id: str
    feed: TaskFeed
    lock: trio.Lock = field(default_factory=trio.Lock)
    execution: _Execution | None = None
    users: int = 0
    #: Direct push mode: recorded events wait for their webhooks.
    undelivered: bool = False
    #: Direct push mode: a task is delivering the held events, then publishes them.
    flushing: bool = False


#: What the recorder reads: an execution's event, or None once the execution ended.
_Entry = tuple[_LiveTask, _Execution, AgentEvent | None]


class _ExecutionQueue(EventQueue):
    """An execution's event queue: its events go to the host's recorder, tagged."""

    def __init__(
        self, inbox: trio.MemorySendChannel[_Entry], live: _LiveTask, execution: _Execution
    ) -> None:
        super().__init__(inbox)
        self._live = live
        self._execution = execution
        self._ended = False

    def _item(self, event: AgentEvent) -> _Entry:
        if self._ended:
            raise trio.ClosedResourceError("the execution this queue served has ended")
        return self._live, self._execution, event

    async def end(self) -> None:
        """Close the queue; returns once the recorder has dealt with every event in it."""
        self._ended = True
        await self._send.send((self._live, self._execution, None))
        await self._execution.recorded.wait()


class AgentHost:
    """Runs one agent's executor and serves the task operations over its store."""

    def __init__(
        self,
        *,
        name: str,
        executor: AgentExecutor,
        store: TaskStore,
        streaming: bool = True,
        push_notifications: bool = False,
        push: PushDispatcher | None = None,
        settings: HostSettings | None = None,
    ) -> None:
        self.name = name
        self.executor = executor
        self.store = store
        self.streaming = streaming
        self.push_notifications = push_notifications and push is not None
        self.push = push
        self.settings = settings or HostSettings()
        self._live: dict[str, _LiveTask] = {}
        self._executions: set[_Execution] = set()
        #: Running executions by their message's retry key: a retry arriving
        #: meanwhile joins the original instead of starting the work again.
        self._running_messages: dict[RetryKey, tuple[_LiveTask, _Execution]] = {}
        self._nursery: trio.Nursery | None = None
        self._closing = False
        self._stop = trio.Event()
        self._finished = trio.Event()
        #: The shutdown grace; cancelled to end it early (begin_close(now=True)).
        self._grace = trio.CancelScope()
        self._inbox_send, self._inbox = trio.open_memory_channel[_Entry](self.settings.queue_size)

    # --- lifetime -------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the host nursery until :meth:`close`; end crash leftovers first.

        The host owns its shutdown: cancelling ``run`` from outside is taken
        as a shutdown without grace. Running executions are cancelled at once,
        and ``run`` returns (raising ``Cancelled``) only once their tasks'
        endings are recorded, so nothing is left WORKING in the store.
        """
        self._recover()
        async with trio.open_nursery() as guard:
            try:
                await guard.start(self._serve)
                task_status.started()
                await self._finished.wait()
            finally:
                if not self._finished.is_set():  # run() is cancelled: no grace
                    self.begin_close(now=True)

    async def _serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        # Shielded: only close() ends the executions (run() turns its own
        # cancellation into a close), so that every ending gets recorded.
        with trio.CancelScope(shield=True):
            try:
                async with trio.open_nursery() as recording:
                    recording.start_soon(self._record_events)
                    async with trio.open_nursery() as nursery:
                        self._nursery = nursery
                        task_status.started()
                        await self._stop.wait()
                        await self._shutdown()
                    # Every execution, cancel and delivery has ended, and each waited
                    # for its events to be recorded: the recorder has nothing left.
                    recording.cancel_scope.cancel()
            finally:
                self._nursery = None
                self._finished.set()
                # The streams still open (subscriptions to tasks that nothing
                # runs, INPUT_REQUIRED say) end now: nothing more comes here.
                for live in list(self._live.values()):
                    live.feed.notify()

    def begin_close(self, *, now: bool = False) -> None:
        """Stop accepting work and start the shutdown grace; returns at once.

        Running executions get ``shutdown_grace`` from the first call of this
        or :meth:`close`; then their cancel scopes are cancelled and their
        tasks end FAILED. ``now`` ends the grace at once (also one under way).
        """
        self._closing = True
        self._stop.set()
        if now:
            self._grace.cancel()

    async def close(self) -> None:
        """Stop accepting work, let executions finish or end them, then return."""
        self.begin_close()
        if self._nursery is not None:
            await self._finished.wait()

    @property
    def running(self) -> bool:
        return self._nursery is not None and not self._closing

    def _recover(self) -> None:
        for stored in self.store.unfinished_tasks(self.name):
            live = _LiveTask(stored.task.id, TaskFeed(stored.task, stored.last_seq))
            try:
                self._end(
                    live,
                    TaskState.FAILED,
                    "The server stopped while this task was running; it did not finish.",
                )
            except Exception:  # one task that cannot be ended must not stop the agent
                log.exception("agent %s: could not end task %s", self.name, stored.task.id)
                continue
            log.warning(
                "task %s of agent %s was running at a crash; ended FAILED",
                stored.task.id,
                self.name,
            )

    async def _shutdown(self) -> None:
        self._grace.deadline = trio.current_time() + self.settings.shutdown_grace
        with self._grace:
            for execution in list(self._executions):
                await execution.done.wait()
        for execution in list(self._executions):
            execution.cancel_scope.cancel()
        # Cancelled executions record their ending in _run, then finish.
        for execution in list(self._executions):
            await execution.done.wait()

    def _spawn(self, fn: Callable[..., object], *args: object) -> None:
        if self._nursery is None or self._closing:
            raise UnsupportedOperationError("The agent is shutting down; try again later")
        self._nursery.start_soon(fn, *args)  # type: ignore[arg-type]

    def _spawn_anyway(self, fn: Callable[..., object], *args: object) -> None:
        """Start host work that finishes what is under way, even while shutting down."""
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)  # type: ignore[arg-type]

    # --- live task registry ---------------------------------------------------

    def _acquire(self, task_id: str, stored: StoredTask | None) -> _LiveTask:
        live = self._live.get(task_id)
        if live is None:
            feed = TaskFeed(
                stored.task if stored else None,
                stored.last_seq if stored else 0,
                window=self.settings.feed_window,
            )
            live = self._live[task_id] = _LiveTask(task_id, feed)
        live.users += 1
        return live

    def _release(self, live: _LiveTask) -> None:
        live.users -= 1
        if live.users <= 0 and self._live.get(live.task_id) is live:
            del self._live[live.task_id]

    def _owned(self, task_id: str, caller: Principal) -> StoredTask:
        stored = self.store.get_task(self.name, task_id, owner=caller.identifier)
        if stored is None:
            raise TaskNotFoundError(f"Task {task_id} not found", metadata={"taskId": task_id})
        return stored

    # --- SendMessage ------------------------------------------------------------

    async def _begin(
        self,
        request: SendMessageRequest,
        caller: Principal,
        extensions: frozenset[str],
        retry_key: RetryKey | None,
        protocol: str = PROTOCOL_VERSION,
    ) -> tuple[_LiveTask, _Execution]:
        message = request.message
        if retry_key is not None:
            joined = self._join_running(retry_key)
            if joined is not None:
                return joined
        stored: StoredTask | None = None
        if message.task_id:
            stored = self._owned(message.task_id, caller)
            if stored.state.is_final:
                raise UnsupportedOperationError(
                    f"Task {stored.task.id} is {stored.state.value} and accepts no more messages",
                    metadata={"taskId": stored.task.id, "state": stored.state.value},
                )
            if message.context_id and message.context_id != stored.task.context_id:
                raise InvalidParamsError(
                    "message.contextId: does not match the context of task " + stored.task.id
                )
            task_id = stored.task.id
            context_id = stored.task.context_id or message.context_id or new_id()
        else:
            task_id = new_id()
            context_id = message.context_id or new_id()
        message, credentials = _without_credentials(message)
        message = message.model_copy(update={"task_id": task_id, "context_id": context_id})
        request_metadata = dict(request.metadata or {})
        if CREDENTIALS_KEY in request_metadata:
            credentials = request_metadata.pop(CREDENTIALS_KEY)
        context = RequestContext(
            task_id=task_id,
            context_id=context_id,
            message=message,
            current_task=stored.task if stored else None,
            caller=caller,
            configuration=request.configuration,
            metadata=request_metadata,
            requested_extensions=extensions,
            credentials=credentials,
        )
        if request.configuration and request.configuration.task_push_notification_config:
            await self._screen_webhook(request.configuration.task_push_notification_config)
        execution = _Execution(
            context, continuing=stored is not None, retry_key=retry_key, protocol=protocol
        )
        live = self._acquire(task_id, stored)
        try:
            self._spawn(self._run, live, execution)
        except BaseException:
            self._release(live)
            raise
        live.users += 1  # held by the execution until it is done
        self._executions.add(execution)
        if retry_key is not None:
            self._running_messages[retry_key] = (live, execution)
        return live, execution

    async def _retry_key(self, request: SendMessageRequest, caller: Principal) -> RetryKey | None:
        """The key a retry of this message would share with it (None: retries not recognised)."""
        message = request.message
        if message.role is not Role.USER:
            raise InvalidParamsError("message.role: a client message must have role ROLE_USER")
        if self.settings.retry_window <= 0:
            return None
        if _content_size(message) < _LARGE_CONTENT:
            digest = _digest(message)
        else:  # ~30 ms for 10 MiB: the event loop goes on meanwhile
            digest = await trio.to_thread.run_sync(_digest, message)
        return caller.identifier, message.message_id, digest

    def _join_running(self, key: RetryKey) -> tuple[_LiveTask, _Execution] | None:
        """The execution a retry joins: its original's, while that still runs."""
        found = self._running_messages.get(key)
        if found is None:
            return None
        live, execution = found
        live.users += 1  # held by this request, like the original's
        return live, execution

    def _earlier(self, key: RetryKey | None) -> Receipt | None:
        """What an earlier SendMessage with this key started and no longer runs, if anything."""
        if key is None or key in self._running_messages:
            return None  # a running original is joined in _begin instead
        since = utcnow() - timedelta(seconds=self.settings.retry_window)
        return self.store.find_message(self.name, *key, since)

    # A retry is a message whose sender cannot know what became of the first
    # one: its request went away (a timeout, a dropped connection) before the
    # answer reached it. A client that got its answer and sends the same
    # message again asks again, and gets new work (the conformance kit does
    # just that). So a message is joined while its execution runs and no
    # client has had the answer, and its receipt is stored only once its
    # request went away without one.

    def _remember(self, execution: _Execution, **receipt: Any) -> None:
        """Note what the execution's message started (stored if it goes unanswered)."""
        if execution.retry_key is None:
            return
        execution.receipt = receipt
        if execution.unanswered:  # in the recorder's transaction
            self._store_receipt(execution)

    def _store_receipt(self, execution: _Execution) -> None:
        assert execution.retry_key is not None and execution.receipt is not None
        owner, message_id, digest = execution.retry_key
        self.store.remember_message(self.name, owner, message_id, digest, **execution.receipt)

    def _answered(self, execution: _Execution) -> None:
        """A client has the answer: the same message again is new work from now on."""
        key = execution.retry_key
        if key is not None and self._running_messages.get(key, (None, None))[1] is execution:
            del self._running_messages[key]

    def _retry_answered(self, key: RetryKey) -> None:
        """A retry got the answer its original missed: the next such message is new work."""
        try:
            self.store.forget_message(self.name, *key)
        except Exception:  # the receipt stays: the next copy is taken for a retry too
            log.exception("agent %s: could not drop a message receipt", self.name)

    def _unanswered(self, execution: _Execution) -> None:
        """The request went away without its answer: a retry must find the original."""
        if execution.retry_key is None or execution.unanswered:
            return
        execution.unanswered = True
        if execution.receipt is not None:
            try:
                self._store_receipt(execution)
            except Exception:  # a failing store costs a retry its answer, nothing more
                log.exception("agent %s: could not store a message receipt", self.name)

    async def send_message(
        self,
        request: SendMessageRequest,
        caller: Principal,
        extensions: frozenset[str] = frozenset(),
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> Task | Message:
        """SendMessage: a Message answer, or the task once it settles.

        Blocking (the default) waits for a final or interrupted state, or for
        the execution to end; ``returnImmediately`` answers once the task exists.
        ``protocol`` is the version the caller speaks (see :meth:`create_push_config`).
        """
        retry_key = await self._retry_key(request, caller)
        earlier = self._earlier(retry_key)
        if earlier is not None:
            assert retry_key is not None
            answer = self._answer_again(earlier, request, caller)
            self._retry_answered(retry_key)
            return answer
        live, execution = await self._begin(request, caller, extensions, retry_key, protocol)
        try:
            answer = await self._await_answer(live, execution, request.configuration)
        except A2AError:
            self._answered(execution)  # the client gets this error as its answer
            raise
        except BaseException:
            self._unanswered(execution)
            raise
        finally:
            self._release(live)
        self._answered(execution)
        return answer

    async def _await_answer(
        self,
        live: _LiveTask,
        execution: _Execution,
        configuration: SendMessageConfiguration | None,
    ) -> Task | Message:
        await execution.first.wait()
        if execution.error is not None:
            raise execution.error
        if execution.answer is not None:
            return execution.answer
        if not (configuration and configuration.return_immediately):
            # Settled means final or interrupted by an event of this execution:
            # a continued INPUT_REQUIRED task is not settled by its old state.
            while live.feed.settled_seq <= execution.start_seq and not execution.done.is_set():
                await live.feed.wakeup.wait()
        # The task exists once published (direct push mode publishes late).
        while live.feed.snapshot is None and not execution.done.is_set():
            await live.feed.wakeup.wait()
        snapshot = live.feed.snapshot
        if snapshot is None:
            raise execution.error or InternalError()
        return view_task(
            snapshot, history_length=configuration.history_length if configuration else None
        )

    async def stream_message(
        self,
        request: SendMessageRequest,
        caller: Principal,
        extensions: frozenset[str] = frozenset(),
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> TaskEventStream:
        """SendStreamingMessage: the stream of this message's events.

        Errors (unknown task, final task, bad request) are raised here, before
        any event, so bindings can answer them as plain errors.
        """
        self._require_streaming()
        retry_key = await self._retry_key(request, caller)
        earlier = self._earlier(retry_key)
        if earlier is not None:
            assert retry_key is not None
            stream = self._stream_again(earlier, caller)

            def closed(finished: bool) -> None:
                if finished:
                    self._retry_answered(retry_key)

            stream.on_close(closed)
            return stream
        live, execution = await self._begin(request, caller, extensions, retry_key, protocol)
        try:
            await execution.first.wait()
        except BaseException:
            self._unanswered(execution)
            self._release(live)
            raise
        try:
            if execution.error is not None:
                self._answered(execution)
                raise execution.error
            if execution.answer is not None:
                self._answered(execution)
                return TaskEventStream.single(StreamResponse(message=execution.answer))
            initial: list[FeedItem] = []
            if execution.continuing:
                assert execution.start_snapshot is not None
                initial.append(
                    (execution.start_seq, StreamResponse(task=execution.start_snapshot), None)
                )
            # The stream holds the task from the start (it is read at once): its
            # events are in the feed, not only in the store, when it reads them.
            stream = TaskEventStream(
                self, live.task_id, execution.start_seq, initial, execution=execution, live=live
            )
            stream.on_close(
                lambda finished: (
                    self._answered(execution) if finished else self._unanswered(execution)
                )
            )
            return stream
        finally:
            self._release(live)

    def _answer_again(
        self, earlier: Receipt, request: SendMessageRequest, caller: Principal
    ) -> Task | Message:
        """A retried SendMessage: the original answer, or the task as it is now."""
        if earlier.answer is not None:
            return Message.model_validate_json(earlier.answer)
        assert earlier.task_id is not None
        stored = self._owned(earlier.task_id, caller)
        live = self._live.get(earlier.task_id)
        task = live.feed.snapshot if live is not None and live.feed.snapshot else stored.task
        configuration = request.configuration
        return view_task(
            task, history_length=configuration.history_length if configuration else None
        )

    def _stream_again(self, earlier: Receipt, caller: Principal) -> TaskEventStream:
        """A retried SendStreamingMessage: the original stream, replayed from the log."""
        if earlier.answer is not None:
            answer = Message.model_validate_json(earlier.answer)
            return TaskEventStream.single(StreamResponse(message=answer))
        assert earlier.task_id is not None
        stored = self._owned(earlier.task_id, caller)
        if earlier.seq == 0:  # a new task: its log from the first event
            return TaskEventStream(self, stored.task.id, 0, [])
        # A continuation: the task as it is now, then on to its next settled state.
        live = self._live.get(stored.task.id)
        snapshot, cursor = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            snapshot, cursor = live.feed.snapshot, live.feed.last_seq
        return TaskEventStream(
            self, stored.task.id, cursor, [(cursor, StreamResponse(task=snapshot), None)]
        )

    # --- execution ------------------------------------------------------------

    async def _run(self, live: _LiveTask, execution: _Execution) -> None:
        try:
            try:
                live.lock.acquire_nowait()  # the usual case: no wait, no scheduling pass
            except trio.WouldBlock:
                await live.lock.acquire()  # an earlier message to this task still runs
            try:
                if execution.continuing and not self._resume(live, execution):
                    return
                live.execution = execution
                await self._execute(live, execution)
            finally:
                live.lock.release()
        except Exception:
            log.exception("host failure while running task %s", live.task_id)
            if not execution.first.is_set():
                execution.error = InternalError()
            try:
                self._end_if_open(
                    live, TaskState.FAILED, "The server failed while running this task."
                )
            except Exception:  # the store itself is failing: the next start ends the task
                log.exception("could not record the failure of task %s", live.task_id)
        finally:
            if execution.retry_key is not None:
                self._running_messages.pop(execution.retry_key, None)
            if live.execution is execution:
                live.execution = None
            if not execution.first.is_set():
                execution.error = execution.error or InvalidAgentResponseError(
                    "The agent finished without answering"
                )
                execution.settle_first()
            execution.done.set()
            self._executions.discard(execution)
            live.feed.notify()
            self._release(live)

    def _resume(self, live: _LiveTask, execution: _Execution) -> bool:
        """Start a continuation: re-check the task and add the message to its history."""
        stored = self.store.get_task(self.name, live.task_id, owner=None)
        assert stored is not None
        if stored.state.is_final:
            execution.error = UnsupportedOperationError(
                f"Task {live.task_id} is {stored.state.value} and accepts no more messages",
                metadata={"taskId": live.task_id, "state": stored.state.value},
            )
            execution.settle_first()
            return False
        live.feed.reset(stored.task)
        message = execution.context.message
        assert message is not None
        with self.store.batch():
            self._append(
                live, add_to_history(stored.task, message), "message", message.to_json(), None
            )
            self._remember(execution, task_id=live.task_id, seq=live.feed.last_seq)
        execution.start_seq = live.feed.last_seq
        execution.start_snapshot = live.feed.current
        execution.may_resume = stored.state.is_interrupted
        execution.context = dataclasses.replace(execution.context, current_task=live.feed.current)
        execution.settle_first()
        return True

    async def _execute(self, live: _LiveTask, execution: _Execution) -> None:
        queue = _ExecutionQueue(self._inbox_send, live, execution)
        failure: BaseException | None = None
        with execution.cancel_scope:
            try:
                await self.executor.execute(execution.context, queue)
            except Exception as exc:  # an agent bug must not harm the server
                failure = exc
                log.exception("executor of agent %s raised on task %s", self.name, live.task_id)
        await queue.end()
        if execution.recording_error is not None:
            raise execution.recording_error
        if failure is not None:
            self._end_if_open(live, TaskState.FAILED, f"The agent failed: {_describe(failure)}")
        elif execution.cancel_scope.cancelled_caught:
            if execution.cancel_requested:
                self._end_if_open(live, TaskState.CANCELED, "Canceled by the client.")
            else:
                self._end_if_open(
                    live, TaskState.FAILED, "The server shut down before the task finished."
                )
        elif execution.answer is None:
            snapshot = live.feed.current
            if snapshot is not None and snapshot.status.state in (
                TaskState.SUBMITTED,
                TaskState.WORKING,
            ):
                log.warning(
                    "executor of agent %s returned leaving task %s %s",
                    self.name,
                    live.task_id,
                    snapshot.status.state.value,
                )
                self._end_if_open(
                    live, TaskState.FAILED, "The agent stopped without finishing the task."
                )
        await self._publish(live)

    # --- the recorder -----------------------------------------------------------

    async def _record_events(self) -> None:
        """The recorder: what every execution enqueues, committed, then published.

        Each round takes every event waiting in the inbox (up to ``queue_size``)
        and commits them in one transaction: under load, the events of many
        tasks share a commit, and nothing is published before it. Each task's
        share is a savepoint, so a task whose events cannot be stored costs no
        other task its events.
        """
        while True:
            entries = [await self._inbox.receive()]
            # Let the executions already running in this scheduling pass add
            # their events first: bigger rounds, fewer commits, one pass later.
            await trio.lowlevel.checkpoint()
            while len(entries) < self.settings.queue_size:
                try:
                    entries.append(self._inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            self._record_round(entries)

    def _record_round(self, entries: list[_Entry]) -> None:
        by_task: dict[_LiveTask, list[tuple[_Execution, AgentEvent]]] = {}
        ended: list[_Execution] = []
        for live, execution, event in entries:
            if event is None:
                ended.append(execution)
            else:
                by_task.setdefault(live, []).append((execution, event))
        recorded: list[_LiveTask] = []
        try:
            if by_task:  # a round of end markers only writes nothing
                with self.store.batch():
                    for live, items in by_task.items():
                        if self._record_share(live, items):
                            recorded.append(live)
        except Exception as error:  # the transaction failed: nothing of this round is stored
            log.exception("agent %s could not commit recorded events", self.name)
            for live in recorded:
                live.feed.discard()
            for items in by_task.values():
                for execution, _ in items:
                    self._recording_failed(execution, error)
            recorded = []
        for live in recorded:
            self._committed(live)
        for execution in ended:
            execution.recorded.set()

    def _record_share(self, live: _LiveTask, items: list[tuple[_Execution, AgentEvent]]) -> bool:
        """Record one task's events of the round; False if they had to be rolled back."""
        live.feed.hold()
        try:
            with self.store.savepoint():
                for execution, event in items:
                    if execution.recording_error is not None:
                        continue
                    try:
                        self._record(live, execution, event)
                    except (_EventRefused, IllegalTransition) as refusal:
                        log.warning(
                            "agent %s: event for task %s refused: %s",
                            self.name,
                            live.task_id,
                            refusal,
                        )
        except Exception as error:
            log.exception("agent %s could not record events of task %s", self.name, live.task_id)
            live.feed.discard()  # rolled back: no one may see these events
            for execution, _ in items:
                self._recording_failed(execution, error)
            return False
        return True

    @staticmethod
    def _recording_failed(execution: _Execution, error: Exception) -> None:
        """The execution's events cannot be stored: stop it; its run reports the error."""
        if execution.recording_error is None:
            execution.recording_error = error
        execution.cancel_scope.cancel()

    def _record(self, live: _LiveTask, execution: _Execution, event: AgentEvent) -> None:
        """Check one executor event and write it; its round commits, then publishes it.

        An event that cannot be stored (a string that is not valid Unicode,
        say) is refused before anything of it is written.
        """
        try:
            self._record_checked(live, execution, event)
        except PydanticSerializationError as error:
            raise _EventRefused(f"the event cannot be stored: {error}") from None

    def _record_checked(self, live: _LiveTask, execution: _Execution, event: AgentEvent) -> None:
        context = execution.context
        if execution.answer is not None:
            raise _EventRefused(
                "the agent already answered with a message; a message answer is final"
            )
        if isinstance(event, Message):
            self._record_message(live, execution, event)
            return
        named = event_task_id(event)
        if named != context.task_id:
            raise _EventRefused(
                f"event names task {named!r}, the execution serves {context.task_id!r}"
            )
        event_context = event.context_id
        if event_context and event_context != context.context_id:
            raise _EventRefused(
                f"event names context {event_context!r}, the task is in {context.context_id!r}"
            )
        if isinstance(event, Task):
            self._record_task(live, execution, event)
        elif isinstance(event, TaskStatusUpdateEvent):
            self._ensure_created(live, execution)
            self._record_status(live, execution, event)
        else:
            self._ensure_created(live, execution)
            self._record_artifact(live, event)

    def _record_message(self, live: _LiveTask, execution: _Execution, message: Message) -> None:
        context = execution.context
        if message.role is not Role.AGENT:
            raise _EventRefused("an agent may only enqueue messages with role ROLE_AGENT")
        self._check_parts(message.parts, "the message")
        if live.feed.current is None:
            # Nothing was created: this message is the whole answer (spec 3.1.1),
            # rendered later; one that cannot be rendered is refused here.
            answer = message.model_copy(
                update={"context_id": message.context_id or context.context_id}
            )
            rendered = answer.to_json()
            self._remember(execution, answer=rendered)
            execution.answer = answer
            execution.settle_first()
            return
        snapshot = live.feed.current
        if snapshot.status.state.is_final:
            raise _EventRefused("the task is in a final state")
        message = message.model_copy(
            update={"task_id": snapshot.id, "context_id": message.context_id or snapshot.context_id}
        )
        self._append(live, add_to_history(snapshot, message), "message", message.to_json(), None)

    def _record_task(self, live: _LiveTask, execution: _Execution, task: Task) -> None:
        snapshot = live.feed.current
        if snapshot is None:
            check_executor_move(None, task.status.state, may_resume=False)
            self._check_artifacts(task)
            for message in [task.status.message, *(task.history or [])]:
                if message is not None:
                    self._check_parts(message.parts, "a message of the task")
            self._create(live, execution, task)
            return
        if task.status.state == snapshot.status.state:
            return  # re-announcing the current task changes nothing
        self._record_status(
            live,
            execution,
            TaskStatusUpdateEvent(
                task_id=task.id, context_id=snapshot.context_id or "", status=task.status
            ),
        )

    def _ensure_created(self, live: _LiveTask, execution: _Execution) -> None:
        if live.feed.current is None:
            context = execution.context
            self._create(
                live,
                execution,
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utcnow()),
                ),
            )

    def _create(self, live: _LiveTask, execution: _Execution, task: Task) -> None:
        context = execution.context
        status = task.status
        if status.timestamp is None:
            status = status.model_copy(update={"timestamp": utcnow()})
        history = [context.message] if context.message else []
        history += [m for m in task.history or [] if m not in history]
        task = task.model_copy(
            update={"context_id": context.context_id, "status": status, "history": history or None}
        )
        response = StreamResponse(task=task)
        payload = response.to_json()
        configuration = context.configuration
        config = configuration.task_push_notification_config if configuration else None
        if config is not None:
            config = _bound_config(config, task.id)
        written = self.store.create_task(
            self.name,
            context.caller.identifier,
            task,
            kind="task",
            payload=payload,
            push_config=config,
            push_protocol=execution.protocol,
            push=self.push_notifications,
        )
        self._remember(execution, task_id=task.id)
        live.feed.record(written.seq, task, response, payload, hold=self._holds(written.queued))
        self._queued(live, written.queued)
        execution.settle_first()

    def _record_status(
        self, live: _LiveTask, execution: _Execution, event: TaskStatusUpdateEvent
    ) -> None:
        snapshot = live.feed.current
        assert snapshot is not None
        current, requested = snapshot.status.state, event.status.state
        if event.status.message is not None:
            self._check_parts(event.status.message.parts, "the status message")
        if execution.purpose == "cancel" and requested is TaskState.CANCELED:
            check_host_ending(current, requested)
        else:
            check_executor_move(current, requested, may_resume=execution.may_resume)
        update: dict[str, object] = _context_update(event.context_id, snapshot)
        if event.status.timestamp is None:
            update["status"] = event.status.model_copy(update={"timestamp": utcnow()})
        if update:
            event = event.model_copy(update=update)
        response = StreamResponse(status_update=event)
        self._append(live, apply_status(snapshot, event), "status", response.to_json(), response)
        if requested.is_interrupted:
            execution.may_resume = False

    def _record_artifact(self, live: _LiveTask, event: TaskArtifactUpdateEvent) -> None:
        snapshot = live.feed.current
        assert snapshot is not None
        if snapshot.status.state.is_final:
            raise _EventRefused("artifacts cannot be added to a task in a final state")
        update = _context_update(event.context_id, snapshot)
        if update:
            event = event.model_copy(update=update)
        updated = apply_artifact(snapshot, event)
        self._check_artifacts(updated, event.artifact.artifact_id)
        response = StreamResponse(artifact_update=event)
        self._append(live, updated, "artifact", response.to_json(), response)

    def _check_parts(self, parts: list[Part], what: str) -> None:
        limit = self.settings.limits.parts
        if len(parts) > limit:
            raise _EventRefused(f"{what} has {len(parts)} parts; the limit is {limit}")

    def _check_artifacts(self, task: Task, changed: str | None = None) -> None:
        """Refuse a task over the artifact limits (only ``changed`` is counted, if named)."""
        artifacts = task.artifacts or []
        limit = self.settings.limits.artifacts
        if len(artifacts) > limit:
            raise _EventRefused(
                f"the task would hold {len(artifacts)} artifacts; the limit is {limit}"
            )
        for artifact in artifacts:
            if changed is None or artifact.artifact_id == changed:
                self._check_parts(artifact.parts, f"artifact {artifact.artifact_id!r}")

    def _append(
        self,
        live: _LiveTask,
        snapshot: Task,
        kind: Literal["status", "artifact", "message"],
        payload: str,
        response: StreamResponse | None,
    ) -> None:
        written = self.store.append(
            self.name, snapshot, kind=kind, payload=payload, push=self.push_notifications
        )
        live.feed.record(written.seq, snapshot, response, payload, hold=self._holds(written.queued))
        self._queued(live, written.queued)

    def _holds(self, notifications: int) -> bool:
        # Direct push mode: an event bound for webhooks is seen by no one before
        # the webhooks had it (see _publish).
        return bool(notifications) and self.push is not None and not self.push.settings.queue

    def _queued(self, live: _LiveTask, notifications: int) -> None:
        if not notifications or self.push is None:
            return
        if self.push.settings.queue:
            self.push.notify()
        else:
            live.undelivered = True

    def _committed(self, live: _LiveTask) -> None:
        """Publish the held (committed) events; in direct push mode, after their webhooks."""
        if live.flushing:
            return  # the running delivery publishes these too
        if live.undelivered and self.push is not None:
            live.flushing = True
            live.users += 1  # held until the delivery has published
            self._spawn_anyway(self._deliver_then_publish, live)
        else:
            live.feed.release()

    async def _deliver_then_publish(self, live: _LiveTask) -> None:
        assert self.push is not None
        try:
            while live.undelivered:
                live.undelivered = False
                await self.push.flush(self.name, live.task_id)
        except Exception:  # the store is failing: the rows stay pending, the host goes on
            log.exception(
                "agent %s could not deliver the webhooks of task %s", self.name, live.task_id
            )
        finally:
            live.flushing = False
            live.feed.release()
            live.feed.notify()
            self._release(live)

    async def _publish(self, live: _LiveTask) -> None:
        """Publish what is held; returns once it is (direct mode: once delivered)."""
        self._committed(live)
        while live.flushing:
            await live.feed.wakeup.wait()

    def _end(self, live: _LiveTask, state: TaskState, reason: str) -> None:
        """Host-imposed ending (CANCELED or FAILED) with the reason as status message."""
        snapshot = live.feed.current
        assert snapshot is not None
        check_host_ending(snapshot.status.state, state)
        event = TaskStatusUpdateEvent(
            task_id=snapshot.id,
            context_id=snapshot.context_id or "",
            status=TaskStatus(
                state=state,
                message=new_agent_message(
                    reason, context_id=snapshot.context_id, task_id=snapshot.id
                ),
                timestamp=utcnow(),
            ),
        )
        response = StreamResponse(status_update=event)
        self._append(live, apply_status(snapshot, event), "status", response.to_json(), response)

    def _end_if_open(self, live: _LiveTask, state: TaskState, reason: str) -> None:
        snapshot = live.feed.current
        if snapshot is None:
            execution = live.execution
            if execution is None or execution.answer is not None:
                return
            self._ensure_created(live, execution)
            snapshot = live.feed.current
            assert snapshot is not None
        if not snapshot.status.state.is_final:
            self._end(live, state, reason)

    # --- CancelTask -------------------------------------------------------------

    async def cancel_task(self, request: CancelTaskRequest, caller: Principal) -> Task:
        """CancelTask: ask the executor to stop; the task ends CANCELED."""
        stored = self._owned(request.id, caller)
        if stored.state.is_final:
            raise TaskNotCancelableError(
                f"Task {request.id} is {stored.state.value} and cannot be canceled",
                metadata={"taskId": request.id, "state": stored.state.value},
            )
        live = self._acquire(request.id, stored)
        try:
            snapshot = live.feed.current or stored.task
            canceller = _Execution(
                RequestContext(
                    task_id=snapshot.id,
                    context_id=snapshot.context_id or "",
                    current_task=snapshot,
                    caller=caller,
                    metadata=request.metadata or {},
                ),
                purpose="cancel",
            )
            self._spawn(self._cancel, live, canceller)
            await canceller.first.wait()
            if canceller.error is not None:
                raise canceller.error
            published = live.feed.snapshot
            assert published is not None
            return published
        finally:
            self._release(live)

    async def _cancel(self, live: _LiveTask, canceller: _Execution) -> None:
        """Run the executor's ``cancel``, end the task CANCELED, then stop its execution.

        The executor's ``cancel`` gets ``cancel_grace`` to do its own clean-up.
        The client is answered (``canceller.first``) once the ending is
        published, or with an error if it could not be stored; the running
        execution's cancel scope is cancelled right after the answer.
        """
        live.users += 1
        running = live.execution
        try:
            if running is not None:
                running.cancel_requested = True
            queue = _ExecutionQueue(self._inbox_send, live, canceller)
            with trio.move_on_after(self.settings.cancel_grace):
                try:
                    await self.executor.cancel(canceller.context, queue)
                except Exception:
                    log.exception("cancel of agent %s raised on task %s", self.name, live.task_id)
            await queue.end()
            if canceller.recording_error is not None:
                log.error(
                    "agent %s: the cancel events for task %s were not stored (%s);"
                    " ending it CANCELED",
                    self.name,
                    live.task_id,
                    canceller.recording_error,
                )
            self._end_if_open(live, TaskState.CANCELED, "Canceled by the client.")
            await self._publish(live)
            canceller.settle_first()
            if running is not None:
                # The task is CANCELED for good: whatever the execution does now
                # nobody will see, so it stops at once (its finally blocks and
                # shielded clean-up still run). The grace was the cancel hook's.
                running.cancel_scope.cancel()
        except Exception:  # the store is failing: the client hears of it, the host goes on
            log.exception("agent %s could not cancel task %s", self.name, live.task_id)
            if running is not None:
                running.cancel_requested = False
            if not canceller.first.is_set():
                canceller.error = InternalError()
        finally:
            canceller.settle_first()
            self._release(live)

    # --- GetTask, ListTasks -----------------------------------------------------

    def get_task(self, request: GetTaskRequest, caller: Principal) -> Task:
        stored = self._owned(request.id, caller)
        return view_task(stored.task, history_length=request.history_length)

    def list_tasks(self, request: ListTasksRequest, caller: Principal) -> ListTasksResponse:
        page_size = request.page_size or self.settings.default_page_size
        page = self.store.list_tasks(
            self.name,
            caller.identifier,
            context_id=request.context_id,
            state=request.status,
            updated_after=request.status_timestamp_after,
            page_size=page_size,
            page_token=request.page_token,
        )
        history_length = request.history_length
        if history_length is None:
            history_length = self.settings.list_history_length
        tasks = [
            view_task(
                task,
                history_length=history_length,
                include_artifacts=bool(request.include_artifacts),
            )
            for task in page.tasks
        ]
        if request.include_artifacts:
            tasks = [
                t if t.artifacts is not None else t.model_copy(update={"artifacts": []})
                for t in tasks
            ]
        return ListTasksResponse(
            tasks=tasks,
            next_page_token=page.next_page_token,
            page_size=page_size,
            total_size=page.total_size,
        )

    # --- SubscribeToTask --------------------------------------------------------

    def subscribe(
        self,
        request: SubscribeToTaskRequest,
        caller: Principal,
        last_event_id: int | None = None,
    ) -> TaskEventStream:
        """SubscribeToTask: the current task, then its events until it ends.

        With ``last_event_id`` (SSE ``Last-Event-ID``) the stream resumes from
        the log after that event instead of starting with a snapshot.
        """
        self._require_streaming()
        stored = self._owned(request.id, caller)
        if stored.state.is_final and last_event_id is None:
            raise UnsupportedOperationError(
                f"Task {request.id} is {stored.state.value}; there is nothing left to subscribe to",
                metadata={"taskId": request.id, "state": stored.state.value},
            )
        if last_event_id is not None:
            return TaskEventStream(
                self, request.id, max(0, last_event_id), [], stop_on_interrupt=False
            )
        live = self._live.get(request.id)
        snapshot, cursor = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            snapshot, cursor = live.feed.snapshot, live.feed.last_seq
        return TaskEventStream(
            self,
            request.id,
            cursor,
            [(cursor, StreamResponse(task=snapshot), None)],
            stop_on_interrupt=False,
        )

    # --- push notification configs ------------------------------------------------

    def _require_push(self) -> None:
        if not self.push_notifications:
            raise PushNotificationNotSupportedError(
                "This agent does not support push notifications"
            )

    def _require_streaming(self) -> None:
        if not self.streaming:
            raise UnsupportedOperationError("This agent does not support streaming")

    async def _screen_webhook(self, config: TaskPushNotificationConfig) -> None:
        """Refuse a webhook URL that fails address screening (spec 13.2)."""
        self._require_push()
        assert self.push is not None
        try:
            await self.push.screen.screen(config.url)
        except WebhookRefused as refusal:
            raise InvalidParamsError(
                f"url: webhook refused: {refusal.reason}", metadata={"field": "url"}
            ) from None

    async def create_push_config(
        self,
        request: TaskPushNotificationConfig,
        caller: Principal,
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> TaskPushNotificationConfig:
        """Save a webhook config; its webhooks carry the body of ``protocol``.

        Over 1.0 that is each event as recorded (a StreamResponse); over 0.3
        it is the task as it stands after each event, in the 0.3 JSON shape.
        """
        self._require_push()
        if not request.task_id:
            raise InvalidParamsError("taskId: required")
        self._owned(request.task_id, caller)
        await self._screen_webhook(request)
        config = _bound_config(request, request.task_id)
        self.store.save_push_config(self.name, caller.identifier, config, protocol=protocol)
        return config

    def get_push_config(
        self, request: GetTaskPushNotificationConfigRequest, caller: Principal
    ) -> TaskPushNotificationConfig:
        self._require_push()
        self._owned(request.task_id, caller)
        config = self.store.get_push_config(
            self.name, request.task_id, request.id, owner=caller.identifier
        )
        if config is None:
            raise TaskNotFoundError(
                f"Push notification config {request.id} not found for task {request.task_id}",
                metadata={"taskId": request.task_id, "configId": request.id},
            )
        return config

    def list_push_configs(
        self, request: ListTaskPushNotificationConfigsRequest, caller: Principal
    ) -> ListTaskPushNotificationConfigsResponse:
        self._require_push()
        self._owned(request.task_id, caller)
        configs = self.store.list_push_configs(self.name, request.task_id, owner=caller.identifier)
        return ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token="")

    def delete_push_config(
        self, request: DeleteTaskPushNotificationConfigRequest, caller: Principal
    ) -> None:
        self._require_push()
        self._owned(request.task_id, caller)
        # Idempotent (spec 3.1.10): deleting what is gone is not an error.
        self.store.delete_push_config(
            self.name, request.task_id, request.id, owner=caller.identifier
        )


#: The metadata key that carries in-band credentials (spec 7.6); never stored.
CREDENTIALS_KEY = "credentials"


def _without_credentials(message: Message) -> tuple[Message, object]:
    metadata = message.metadata
    if not metadata or CREDENTIALS_KEY not in metadata:
        return message, None
    remaining = {k: v for k, v in metadata.items() if k != CREDENTIALS_KEY}
    return message.model_copy(update={"metadata": remaining or None}), metadata[CREDENTIALS_KEY]


def _bound_config(config: TaskPushNotificationConfig, task_id: str) -> TaskPushNotificationConfig:
    """The config as stored: bound to its task, with an id (the client's, or a new one)."""
    return config.model_copy(
        update={"task_id": task_id, "id": config.id or str(uuid.uuid4()), "tenant": None}
    )


def new_id() -> str:
    """A new task or context id: a UUID of version 7 (RFC 9562), ordered by time.

    The store's keys and indexes start with these ids; ids in time order put
    each new task's rows next to the last ones instead of on a random page,
    so a commit, and the checkpoint after it, write fewer distinct pages.
    """
    millis = time.time_ns() // 1_000_000
    value = (millis & 0xFFFF_FFFF_FFFF) << 80 | int.from_bytes(os.urandom(10), "big")
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # RFC 9562 variant
    text = f"{value:032x}"  # uuid.UUID's own str(), without building the object
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


#: Messages whose parts carry this many bytes or more are digested on a thread.
_LARGE_CONTENT = 256 * 1024


def _content_size(message: Message) -> int:
    """Roughly how large the message's parts are (text, raw bytes and URLs)."""
    return sum(len(p.text or "") + len(p.raw or b"") + len(p.url or "") for p in message.parts)


def _digest(message: Message) -> str:
    """What "the same content" means for a retried message: its JSON, hashed."""
    return hashlib.sha256(message.to_json().encode()).hexdigest()


def _context_update(context_id: str, snapshot: Task) -> dict[str, object]:
    """The update that gives an event its task's context id, when it lacks it."""
    wanted = snapshot.context_id or context_id
    return {} if wanted == context_id else {"context_id": wanted}


def event_task_id(event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> str:
    return event.id if isinstance(event, Task) else event.task_id


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    name = type(error).__name__
    return f"{name}: {text}"[:500] if text else name


def _response_state(response: StreamResponse) -> TaskState | None:
    if response.task is not None:
        return response.task.status.state
    if response.status_update is not None:
        return response.status_update.status.state
    return None


class TaskEventStream:
    """The events a stream relays, read with :meth:`receive` (cancel-safe).

    Waiting in :meth:`receive` can be cancelled (by a keep-alive timer, say)
    and called again without losing anything: all state lives here, and the
    wait itself is only on the feed's wake-up event.
    """

    def __init__(
        self,
        host: AgentHost | None,
        task_id: str,
        cursor: int,
        initial: list[FeedItem],
        *,
        execution: _Execution | None = None,
        stop_on_interrupt: bool = True,
        live: _LiveTask | None = None,
    ) -> None:
        self._host = host
        #: Told, once, whether the stream had reached its end when it closed.
        self._on_close: Callable[[bool], object] | None = None
        self._task_id = task_id
        # Given (and held) here, or taken on the first receive, so that a
        # subscription nobody reads holds nothing; let go at the end or on close.
        self._live = live
        if live is not None:
            live.users += 1
        self._cursor = cursor
        # Events at or before the origin (the opening snapshot) never end the stream.
        self._origin = cursor
        # A list, not a deque: it is mostly empty, and 10,000 idle streams each
        # holding an empty deque (760 bytes) would cost over 7 MB.
        self._pending: list[FeedItem | tuple[None, StreamResponse, None]] = list(initial)
        self._execution = execution
        self._stop_on_interrupt = stop_on_interrupt
        self._finished = False
        self._closed = False

    def on_close(self, callback: Callable[[bool], object]) -> None:
        """Call ``callback(finished)`` once the stream closes (``finished``: it reached its end)."""
        self._on_close = callback

    @classmethod
    def single(cls, response: StreamResponse) -> TaskEventStream:
        """A stream of exactly one event (a direct Message answer)."""
        stream = cls(None, "", 0, [])
        stream._pending.append((None, response, None))
        stream._finished = True
        return stream

    async def receive(self) -> tuple[int | None, StreamResponse]:
        """The next event and its log sequence; raises ``trio.EndOfChannel`` at the end."""
        seq, response, _ = await self.receive_rendered()
        return seq, response

    async def receive_rendered(self) -> tuple[int | None, StreamResponse, str]:
        """Like :meth:`receive`, with the event's JSON text (as recorded, when it was)."""
        while True:
            ready = self._poll()
            if not isinstance(ready, trio.Event):
                return ready
            await ready.wait()

    def receive_ready(self) -> tuple[int | None, StreamResponse, str] | None:
        """The next event if it is already there, else None (never waits).

        Raises ``trio.EndOfChannel`` at the end, like :meth:`receive`. A relay
        uses it to send the events published together in one write.
        """
        ready = self._poll()
        return None if isinstance(ready, trio.Event) else ready

    def _poll(self) -> tuple[int | None, StreamResponse, str] | trio.Event:
        """The next event, or the wake-up to wait on before asking again."""
        while True:
            if self._pending:
                seq, response, text = self._pending.pop(0)
                if seq is None or seq > self._origin:
                    self._note_end(response)
                return seq, response, text if text is not None else response.to_json()
            if self._finished or self._host is None:
                self.close()
                raise trio.EndOfChannel
            live = self._hold(self._host)
            if live is None:  # the task is gone (pruned)
                self._finished = True
                continue
            feed = live.feed
            wakeup = feed.wakeup
            items = feed.after(self._cursor)
            if items is None:
                assert self._host is not None
                items = [
                    (event.seq, StreamResponse.model_validate_json(event.payload), event.payload)
                    for event in self._host.store.events_after(
                        self._host.name, self._task_id, self._cursor
                    )
                ]
            if items:
                self._cursor = items[-1][0]
                self._pending.extend(items)
                continue
            if self._execution is not None and self._execution.done.is_set():
                self._finished = True
                continue
            snapshot = feed.snapshot
            if self._execution is None and snapshot is not None and snapshot.status.state.is_final:
                self._finished = True
                continue
            if self._host._finished.is_set():  # the host has stopped: nothing more comes
                self._finished = True
                continue
            return wakeup

    def _note_end(self, response: StreamResponse) -> None:
        state = _response_state(response)
        if state is None:
            return
        if state.is_final or (self._stop_on_interrupt and state.is_interrupted):
            self._finished = True
            self._pending.clear()

    def _hold(self, host: AgentHost) -> _LiveTask | None:
        if self._live is None:
            stored = None
            if self._task_id not in host._live:
                stored = host.store.get_task(host.name, self._task_id, owner=None)
                if stored is None:
                    return None
            self._live = host._acquire(self._task_id, stored)
        return self._live

    def close(self) -> None:
        """Let go of the task (idempotent)."""
        if not self._closed:
            self._closed = True
            if self._on_close is not None:
                self._on_close(self._finished)
            if self._host is not None and self._live is not None:
                self._host._release(self._live)
                self._live = None

    def __aiter__(self) -> AsyncIterator[tuple[int | None, StreamResponse]]:
        return self

    async def __anext__(self) -> tuple[int | None, StreamResponse]:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

"""The agent host: one agent's lifetime, and the task operations it serves.

One :class:`AgentHost` serves one mounted agent. Its nursery owns every
execution (see ``executions``); requests only wait on them, so a client that
goes away never stops a task. Each event an executor enqueues goes through
the recorder (see ``recorder``): checked against the state machine, committed
to SQLite with the task it produces, then published to the task's
:class:`TaskFeed` for blocking calls, streams and subscribers. The host wires
these together and answers the operations, each scoped to its caller's tasks.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable

import trio

from ..protocol import (
    PROTOCOL_VERSION,
    A2AError,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InternalError,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    PushNotificationNotSupportedError,
    SendMessageConfiguration,
    SendMessageRequest,
    StorageFullError,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    UnsupportedOperationError,
)
from ..protocol.tasks import view_task
from ..push import PushDispatcher, WebhookRefused
from ..store import Receipt, ReceiptWrite, Store, StoredTask
from ..store.observer import Observer
from .cluster import Cluster
from .executions import (
    ABANDONED,
    Entry,
    Execution,
    Executions,
    LiveTask,
    LiveTasks,
    RetryKey,
    not_cancelable,
)
from .executor import AgentExecutor, Principal, RequestContext
from .feed import FeedItem, TaskFeed
from .membership import Membership
from .queued import QueuedExecutions
from .recorder import Recorder, _bound_config
from .recorder import event_task_id as event_task_id
from .retries import Retries
from .settings import HostSettings
from .streams import TaskEventStream

__all__ = ["AgentHost", "HostSettings", "TaskEventStream"]

log = logging.getLogger("a2a_trio.runtime")


class AgentHost:
    """Runs one agent's executor and serves the task operations over its store."""

    def __init__(
        self,
        *,
        name: str,
        executor: AgentExecutor,
        store: Store,
        streaming: bool = True,
        push_notifications: bool = False,
        push: PushDispatcher | None = None,
        settings: HostSettings | None = None,
        queued: bool = False,
        restartable: bool = False,
    ) -> None:
        self.name = name
        #: Executions run on worker processes (with several processes on the
        #: database; otherwise, as on SQLite, here): see runtime.queued.
        self.queued = queued
        #: Queued: an execution a stopping worker cannot finish goes back to the queue.
        self.restartable = restartable
        self.executor = executor
        self.store = store
        self.streaming = streaming
        self.push_notifications = push_notifications and push is not None
        self.push = push
        self.settings = settings or HostSettings()
        self._live = LiveTasks(self.settings.feed_window)
        self._retries = Retries(name=name, store=store, settings=self.settings)
        #: This process's membership, when several serve the database (see attach).
        self.cluster: Cluster | None = None
        self.membership: Membership | None = None
        self._queued = QueuedExecutions(self)
        self._nursery: trio.Nursery | None = None
        self._closing = False
        self._stop = trio.Event()
        self._finished = trio.Event()
        #: The shutdown grace; cancelled to end it early (begin_close(now=True)).
        self._grace = trio.CancelScope()
        inbox_send, inbox = trio.open_memory_channel[Entry](self.settings.queue_size)
        self._recorder = Recorder(
            name=name,
            store=store,
            settings=self.settings,
            push=push,
            push_notifications=self.push_notifications,
            live=self._live,
            retries=self._retries,
            inbox=inbox,
            spawn=self._spawn_anyway,
        )
        self._executions = Executions(
            name=name,
            executor=executor,
            store=store,
            settings=self.settings,
            live=self._live,
            recorder=self._recorder,
            retries=self._retries,
            inbox=inbox_send,
            spawn=self._spawn,
            spawn_anyway=self._spawn_anyway,
            stopping=self._stop,
        )

    def observe(self, observer: Observer) -> None:
        """Tell ``observer`` of every committed share and every execution from now on."""
        self._recorder.observer = self._executions.observer = observer

    @property
    def executions_running(self) -> int:
        """How many executions run now (cancels excepted)."""
        return len(self._executions.running)

    # --- lifetime -------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the host nursery until :meth:`close`; end crash leftovers first.

        The host owns its shutdown: cancelling ``run`` from outside is taken
        as a shutdown without grace. Running executions are cancelled at once,
        and ``run`` returns (raising ``Cancelled``) only once their tasks'
        endings are recorded, so nothing is left WORKING in the store.
        """
        await self._recover()
        await self._retries.load()
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
                    recording.start_soon(self._recorder.run)
                    # What the executor holds (an asyncio loop, say) outlives its executions.
                    async with self.executor.lifespan(), trio.open_nursery() as nursery:
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
                for live in list(self._live.tasks.values()):
                    live.feed.notify()

    def begin_close(self, *, now: bool = False) -> None:
        """Stop accepting work and start the shutdown grace; returns at once.

        Running executions get ``shutdown_grace`` from the first call of this
        or :meth:`close`; then their cancel scopes are cancelled and their
        tasks end FAILED. ``now`` ends the grace at once (also one under way).
        """
        self._closing = True
        self._stop.set()
        self._queued.work_arrived()  # a worker stops claiming at once
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

    def attach(self, cluster: Cluster) -> None:
        """Serve as a member of ``cluster`` (before :meth:`run`): leases, wake-ups, cancels."""
        self.cluster = cluster
        self.membership = Membership(self, cluster)
        self._executions.cluster = cluster
        self._recorder.member = cluster.member
        self._live.attended = self.membership.catch_up_soon
        cluster.add(self.membership)

    async def _recover(self) -> None:
        if self.membership is not None:
            # Only what no live process holds: the others' running tasks are theirs.
            await self.membership.adopt_orphans()
            return
        for stored in await self.store.unfinished_tasks(self.name):
            live = LiveTask(stored.task.id, TaskFeed(stored.task, stored.last_seq))
            try:
                await self._recorder.end(
                    live,
                    TaskState.FAILED,
                    ABANDONED,
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
            for execution in list(self._executions.running):
                await execution.done.wait()
        if self.restartable:
            self._queued.hand_back_running()
        for execution in list(self._executions.running):
            execution.cancel_scope.cancel()
        # Cancelled executions record their ending (Executions._run), then finish.
        for execution in list(self._executions.running):
            await execution.done.wait()

    # --- several processes (see runtime.membership) ---------------------------------

    @property
    def _runs_elsewhere(self) -> bool:
        """Whether this agent's executions run on worker processes (queued, with a cluster)."""
        return self.queued and self.cluster is not None

    async def serve_queue(
        self,
        concurrency: int = 16,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Be a worker for this queued agent: run its queued executions until closing."""
        if self.cluster is None:
            raise RuntimeError(
                f"agent {self.name}: queued executions need a database several processes"
                " share (PostgreSQL)"
            )
        await self._queued.serve(concurrency, task_status=task_status)

    def _require_running(self) -> None:
        if self._nursery is None or self._closing:
            raise UnsupportedOperationError("The agent is shutting down; try again later")

    def _spawn(self, fn: Callable[..., object], *args: object) -> None:
        self._require_running()
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)  # type: ignore[arg-type]

    def _spawn_anyway(self, fn: Callable[..., object], *args: object) -> None:
        """Start host work that finishes what is under way, even while shutting down."""
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)  # type: ignore[arg-type]

    def _in_background(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Store what a caller who went away cannot wait for (a receipt, say)."""
        if self._nursery is None:  # the host has stopped: a retry costs new work, no more
            log.warning("agent %s stopped before %s could run", self.name, fn.__name__)
            return
        self._nursery.start_soon(fn, *args)

    def _unanswered(self, execution: Execution) -> None:
        """The request went away without its answer: keep what a retry needs."""
        receipt = self._retries.unanswered(execution)
        if receipt is not None:
            self._in_background(self._keep_receipt, execution.context.task_id, receipt)

    def _answered(self, execution: Execution) -> None:
        """A client has the answer: drop the receipt kept for a retry, if one was."""
        stored = self._retries.answered(execution)
        if stored is not None:
            self._in_background(self._drop_receipt, stored)

    async def _drop_receipt(self, receipt: ReceiptWrite) -> None:
        try:
            await self._recorder.drop_receipt(receipt)
        except Exception:  # the receipt stays: the next copy is taken for a retry too
            log.exception("agent %s: could not drop a message receipt", self.name)
        finally:
            self._retries.dropped(receipt)

    async def _keep_receipt(self, task_id: str, receipt: ReceiptWrite) -> None:
        try:
            await self._recorder.keep_receipt(task_id, receipt)
        except Exception:  # a failing store costs a retry its answer, nothing more
            log.exception("agent %s: could not store a message receipt", self.name)

    async def _owned(self, task_id: str, caller: Principal) -> StoredTask:
        stored = await self.store.get_task(self.name, task_id, owner=caller.identifier)
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
    ) -> tuple[LiveTask, Execution]:
        message = request.message
        if retry_key is not None:
            joined = self._retries.join(retry_key, message)
            if joined is not None:
                return joined
        stored: StoredTask | None = None
        if message.task_id:
            stored = await self._owned(message.task_id, caller)
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
        execution = Execution(
            context,
            continuing=stored is not None,
            retry_key=retry_key,
            retry_message=request.message if retry_key is not None else None,
            protocol=protocol,
        )
        live = self._live.acquire(task_id, stored, written_here=not self._runs_elsewhere)
        try:
            if self._runs_elsewhere:
                self._require_running()
                await self._queued.enqueue(live, execution, stored)
            else:
                self._executions.start(live, execution)
        except BaseException:
            self._live.release(live)
            raise
        return live, execution

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
        retry_key = None if self._runs_elsewhere else self._retries.key(request, caller)
        earlier = await self._retries.earlier(retry_key, request.message)
        if earlier is not None:
            answer = await self._answer_again(earlier.receipt, request, caller)
            await self._retries.answered_again(earlier)
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
            self._live.release(live)
        self._answered(execution)
        return answer

    async def _await_answer(
        self,
        live: LiveTask,
        execution: Execution,
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
            while live.feed.settled_seq <= execution.start_seq and not self._execution_over(
                live, execution
            ):
                await live.feed.wakeup.wait()
            if live.feed.settled_seq <= execution.start_seq and isinstance(
                execution.error, StorageFullError
            ):
                raise execution.error  # its progress could not be stored: retry for the task
        # The task exists once published (direct push mode publishes late).
        while live.feed.snapshot is None and not execution.done.is_set():
            await live.feed.wakeup.wait()
        snapshot = live.feed.snapshot
        if snapshot is None:
            raise execution.error or InternalError()
        history_length = configuration.history_length if configuration else None
        return await self._shown(snapshot, history_length, through=live.feed.last_seq, live=live)

    def _execution_over(self, live: LiveTask, execution: Execution) -> bool:
        """Whether a waiter has all it will get: the execution is done and its task's
        ending recorded (see :attr:`LiveTask.left_running`), or the host has stopped."""
        if not execution.done.is_set():
            return False
        return not live.left_running or self._finished.is_set()

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
        retry_key = None if self._runs_elsewhere else self._retries.key(request, caller)
        earlier = await self._retries.earlier(retry_key, request.message)
        if earlier is not None:
            stream = await self._stream_again(earlier.receipt, caller)
            again = earlier

            def closed(finished: bool) -> None:
                if finished:
                    self._in_background(self._retries.answered_again, again)

            stream.on_close(closed)
            return stream
        live, execution = await self._begin(request, caller, extensions, retry_key, protocol)
        try:
            await execution.first.wait()
        except BaseException:
            self._unanswered(execution)
            self._live.release(live)
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
                configuration = request.configuration
                task = await self._shown(
                    execution.start_snapshot,
                    configuration.history_length if configuration else None,
                    through=execution.start_seq,
                    live=live,
                )
                initial.append((execution.start_seq, StreamResponse(task=task), None))
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
            self._live.release(live)

    async def _answer_again(
        self, earlier: Receipt, request: SendMessageRequest, caller: Principal
    ) -> Task | Message:
        """A retried SendMessage: the original answer, or the task as it is now."""
        if earlier.answer is not None:
            return Message.model_validate_json(earlier.answer)
        assert earlier.task_id is not None
        stored = await self._owned(earlier.task_id, caller)
        live = self._live.tasks.get(earlier.task_id)
        task, seq = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            task, seq = live.feed.snapshot, live.feed.last_seq
        configuration = request.configuration
        history_length = configuration.history_length if configuration else None
        return await self._shown(task, history_length, through=seq)

    async def _stream_again(self, earlier: Receipt, caller: Principal) -> TaskEventStream:
        """A retried SendStreamingMessage: the original stream, replayed from the log."""
        if earlier.answer is not None:
            answer = Message.model_validate_json(earlier.answer)
            return TaskEventStream.single(StreamResponse(message=answer))
        assert earlier.task_id is not None
        stored = await self._owned(earlier.task_id, caller)
        if earlier.seq == 0:  # a new task: its log from the first event
            return TaskEventStream(self, stored.task.id, 0, [])
        # A continuation: the task as it is now, then on to its next settled state.
        live = self._live.tasks.get(stored.task.id)
        snapshot, cursor = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            snapshot, cursor = live.feed.snapshot, live.feed.last_seq
        snapshot = await self._shown(snapshot, None, through=cursor)
        return TaskEventStream(
            self, stored.task.id, cursor, [(cursor, StreamResponse(task=snapshot), None)]
        )

    # --- CancelTask -------------------------------------------------------------

    async def cancel_task(self, request: CancelTaskRequest, caller: Principal) -> Task:
        """CancelTask: ask the executor to stop; the task ends CANCELED.

        With several processes, the one running the task cancels it; this
        one answers once the log says how it ended.
        """
        stored = await self._owned(request.id, caller)
        if stored.state.is_final:
            raise not_cancelable(request.id, stored.state)
        live = self._live.acquire(request.id, stored)
        try:
            if self.membership is None:
                task = await self._cancel_here(live, stored, caller, request.metadata or {})
            else:
                task = await self.membership.cancel(live, stored, caller, request.metadata or {})
        finally:
            self._live.release(live)
        return await self._shown(task, None)

    async def _cancel_here(
        self,
        live: LiveTask,
        stored: StoredTask,
        caller: Principal,
        metadata: dict[str, object],
        lease: str | None = None,
    ) -> Task:
        """Cancel in this process (holding the task's ``lease``, let go when done)."""
        snapshot = live.feed.current or stored.task
        canceller = Execution(
            RequestContext(
                task_id=snapshot.id,
                context_id=snapshot.context_id or "",
                current_task=snapshot,
                caller=caller,
                metadata=metadata,
            ),
            purpose="cancel",
            lease_token=lease,
        )
        try:
            self._executions.start_cancel(live, canceller)
        except BaseException:
            if lease is not None and self.cluster is not None:
                self.cluster.release(lease)
            raise
        await canceller.first.wait()
        if canceller.error is not None:
            raise canceller.error
        published = live.feed.snapshot
        assert published is not None
        return published

    # --- GetTask, ListTasks -----------------------------------------------------

    async def _shown(
        self,
        task: Task,
        history_length: int | None,
        *,
        through: int | None = None,
        include_artifacts: bool = True,
        live: LiveTask | None = None,
    ) -> Task:
        """The task as a response shows it, its history read from the log up to ``through``.

        The row holds no history (see :mod:`a2a_trio.store.history`): a
        response that shows one reads its window, a turn never rewrites it.
        A ``live`` task's feed may hold the whole window (a new task's, say):
        then no read is needed.
        """
        if history_length != 0:
            limits = self.settings.limits
            history = None
            if live is not None and through is not None:
                history = live.feed.history(limits, history_length, through)
            if history is None:
                history = await self.store.history(
                    self.name, task.id, limits=limits, length=history_length, through=through
                )
            task = task.model_copy(update={"history": history or None})
        return view_task(task, history_length=history_length, include_artifacts=include_artifacts)

    async def get_task(self, request: GetTaskRequest, caller: Principal) -> Task:
        stored = await self._owned(request.id, caller)
        return await self._shown(stored.task, request.history_length, through=stored.last_seq)

    async def list_tasks(self, request: ListTasksRequest, caller: Principal) -> ListTasksResponse:
        page_size = request.page_size or self.settings.default_page_size
        page = await self.store.list_tasks(
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
            await self._shown(
                task, history_length, include_artifacts=bool(request.include_artifacts)
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

    async def subscribe(
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
        stored = await self._owned(request.id, caller)
        if stored.state.is_final and last_event_id is None:
            raise UnsupportedOperationError(
                f"Task {request.id} is {stored.state.value}; there is nothing left to subscribe to",
                metadata={"taskId": request.id, "state": stored.state.value},
            )
        if last_event_id is not None:
            return TaskEventStream(
                self, request.id, max(0, last_event_id), [], stop_on_interrupt=False
            )
        live = self._live.tasks.get(request.id)
        snapshot, cursor = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            snapshot, cursor = live.feed.snapshot, live.feed.last_seq
        snapshot = await self._shown(snapshot, None, through=cursor)
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
            fix = ""
            if refusal.exemptable_host is not None:  # say how a wanted receiver gets through
                fix = (
                    f" (a receiver meant to be reached there is let through by the server's "
                    f"push.allowed_hosts = [{json.dumps(refusal.exemptable_host)}])"
                )
            raise InvalidParamsError(
                f"url: webhook refused: {refusal.reason}{fix}", metadata={"field": "url"}
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
        await self._owned(request.task_id, caller)
        await self._screen_webhook(request)
        config = _bound_config(request, request.task_id)
        await self.store.save_push_config(self.name, caller.identifier, config, protocol=protocol)
        return config

    async def get_push_config(
        self, request: GetTaskPushNotificationConfigRequest, caller: Principal
    ) -> TaskPushNotificationConfig:
        self._require_push()
        await self._owned(request.task_id, caller)
        config = await self.store.get_push_config(
            self.name, request.task_id, request.id, owner=caller.identifier
        )
        if config is None:
            raise TaskNotFoundError(
                f"Push notification config {request.id} not found for task {request.task_id}",
                metadata={"taskId": request.task_id, "configId": request.id},
            )
        return config

    async def list_push_configs(
        self, request: ListTaskPushNotificationConfigsRequest, caller: Principal
    ) -> ListTaskPushNotificationConfigsResponse:
        self._require_push()
        await self._owned(request.task_id, caller)
        configs = await self.store.list_push_configs(
            self.name, request.task_id, owner=caller.identifier
        )
        return ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token="")

    async def delete_push_config(
        self, request: DeleteTaskPushNotificationConfigRequest, caller: Principal
    ) -> None:
        self._require_push()
        await self._owned(request.task_id, caller)
        # Idempotent (spec 3.1.10): deleting what is gone is not an error.
        await self.store.delete_push_config(
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

"""The agent host: one agent's lifetime, and the facade its operations are called through.

One :class:`AgentHost` serves one mounted agent. It builds the rooms around
one :class:`~a2a_trio.runtime.state.HostState` and owns the host nursery
they start their work in: the executions (see ``executions``), the recorder
that checks, commits and publishes their events (see ``recorder``), the
messages room (see ``messages``) and the operations room (see
``operations``). Requests only wait on executions, so a client that goes
away never stops a task. The host keeps the lifetime: recovery at start,
the shutdown grace, and membership of a cluster.
"""

from __future__ import annotations

import logging

import trio

from ..protocol import (
    PROTOCOL_VERSION,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from ..push import PushDispatcher
from ..store import Store
from ..store.observer import Observer
from .cluster import Cluster
from .executions import Executions
from .executor import AgentExecutor, Principal
from .feed import TaskFeed
from .membership import Membership
from .messages import Messages
from .operations import Operations
from .queued import QueuedExecutions
from .recorder import Recorder
from .retries import Retries
from .settings import HostSettings
from .state import ABANDONED, Entry, HostState, LiveTask
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
        self.push = push
        self.settings = settings or HostSettings()
        #: What every room shares: the live tasks, the host nursery while it runs.
        self.state = HostState(
            name=name,
            store=store,
            settings=self.settings,
            streaming=streaming,
            push=push,
            push_notifications=push_notifications,
        )
        self.push_notifications = self.state.push_notifications
        #: This process's membership, when several serve the database (see attach).
        self.membership: Membership | None = None
        #: The shutdown grace; cancelled to end it early (begin_close(now=True)).
        self._grace = trio.CancelScope()
        self._retries = Retries(self.state)
        inbox_send, inbox = trio.open_memory_channel[Entry](self.settings.queue_size)
        self._recorder = Recorder(self.state, retries=self._retries, inbox=inbox)
        #: The executions and cancels running in the host nursery.
        self.executions = Executions(
            self.state,
            executor=executor,
            recorder=self._recorder,
            retries=self._retries,
            inbox=inbox_send,
        )
        self._queued = QueuedExecutions(self.state, executions=self.executions)
        #: GetTask, ListTasks, CancelTask, SubscribeToTask, push configs.
        self.operations = Operations(self.state, executions=self.executions)
        #: SendMessage and SendStreamingMessage.
        self.messages = Messages(
            self.state,
            operations=self.operations,
            executions=self.executions,
            recorder=self._recorder,
            retries=self._retries,
            queued=self._queued if queued else None,
        )

    @property
    def cluster(self) -> Cluster | None:
        """The cluster this host is a member of (see :meth:`attach`), if any."""
        return self.state.cluster

    def observe(self, observer: Observer) -> None:
        """Tell ``observer`` of every committed share and every execution from now on."""
        self.state.observer = observer

    @property
    def executions_running(self) -> int:
        """How many executions run now (cancels excepted)."""
        return len(self.executions.running)

    @property
    def endings_waiting(self) -> int:
        """How many tasks wait for their FAILED or CANCELED ending to be stored."""
        return self.executions.endings_waiting

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
                await self.state.finished.wait()
            finally:
                if not self.state.finished.is_set():  # run() is cancelled: no grace
                    self.begin_close(now=True)

    async def _serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        # Shielded: only close() ends the executions (run() turns its own
        # cancellation into a close), so that every ending gets recorded.
        state = self.state
        with trio.CancelScope(shield=True):
            try:
                async with trio.open_nursery() as recording:
                    recording.start_soon(self._recorder.run)
                    # What the executor holds (an asyncio loop, say) outlives its executions.
                    async with self.executor.lifespan(), trio.open_nursery() as nursery:
                        state.nursery = nursery
                        task_status.started()
                        await state.stopping.wait()
                        await self._shutdown()
                    # Every execution, cancel and delivery has ended, and each waited
                    # for its events to be recorded: the recorder has nothing left.
                    recording.cancel_scope.cancel()
            finally:
                state.nursery = None
                state.finished.set()
                # The streams still open (subscriptions to tasks that nothing
                # runs, INPUT_REQUIRED say) end now: nothing more comes here.
                for live in list(state.live.tasks.values()):
                    live.feed.notify()

    def begin_close(self, *, now: bool = False) -> None:
        """Stop accepting work and start the shutdown grace; returns at once.

        Running executions get ``shutdown_grace`` from the first call of this
        or :meth:`close`; then their cancel scopes are cancelled and their
        tasks end FAILED. ``now`` ends the grace at once (also one under way).
        """
        self.state.closing = True
        self.state.stopping.set()
        self._queued.work_arrived()  # a worker stops claiming at once
        if now:
            self._grace.cancel()

    async def close(self) -> None:
        """Stop accepting work, let executions finish or end them, then return."""
        self.begin_close()
        if self.state.nursery is not None:
            await self.state.finished.wait()

    @property
    def running(self) -> bool:
        """Whether the host runs and accepts work."""
        return self.state.running

    def attach(self, cluster: Cluster) -> None:
        """Serve as a member of ``cluster`` (before :meth:`run`): leases, wake-ups, cancels."""
        self.state.cluster = cluster
        self.membership = Membership(
            self.state, cluster, executions=self.executions, queued=self._queued
        )
        self._queued.attach(self.membership)
        self.operations.membership = self.membership
        self.state.live.attended = self.membership.catch_up_soon
        cluster.add(self.membership)

    async def _recover(self) -> None:
        if self.membership is not None:
            # Only what no live process holds: the others' running tasks are theirs.
            await self.membership.adopt_orphans()
            return
        for stored in await self.store.unfinished_tasks(self.name):
            live = LiveTask(stored.task.id, TaskFeed(stored.task, stored.last_seq))
            try:
                await self._recorder.end(live, TaskState.FAILED, ABANDONED)
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
        running = self.executions.running
        with self._grace:
            for execution in list(running):
                await execution.done.wait()
        if self.restartable:
            self._queued.hand_back_running()
        for execution in list(running):
            execution.cancel_scope.cancel()
        # Cancelled executions record their ending (Executions._run), then finish.
        for execution in list(running):
            await execution.done.wait()

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

    # --- the operations, as the bindings call them (see messages, operations) ----

    async def send_message(
        self,
        request: SendMessageRequest,
        caller: Principal,
        extensions: frozenset[str] = frozenset(),
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> Task | Message:
        """SendMessage: see :meth:`Messages.send_message`."""
        return await self.messages.send_message(request, caller, extensions, protocol=protocol)

    async def stream_message(
        self,
        request: SendMessageRequest,
        caller: Principal,
        extensions: frozenset[str] = frozenset(),
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> TaskEventStream:
        """SendStreamingMessage: see :meth:`Messages.stream_message`."""
        return await self.messages.stream_message(request, caller, extensions, protocol=protocol)

    async def get_task(self, request: GetTaskRequest, caller: Principal) -> Task:
        """GetTask: see :meth:`Operations.get_task`."""
        return await self.operations.get_task(request, caller)

    async def list_tasks(self, request: ListTasksRequest, caller: Principal) -> ListTasksResponse:
        """ListTasks: see :meth:`Operations.list_tasks`."""
        return await self.operations.list_tasks(request, caller)

    async def cancel_task(self, request: CancelTaskRequest, caller: Principal) -> Task:
        """CancelTask: see :meth:`Operations.cancel_task`."""
        return await self.operations.cancel_task(request, caller)

    async def subscribe(
        self,
        request: SubscribeToTaskRequest,
        caller: Principal,
        last_event_id: int | None = None,
    ) -> TaskEventStream:
        """SubscribeToTask: see :meth:`Operations.subscribe`."""
        return await self.operations.subscribe(request, caller, last_event_id)

    async def create_push_config(
        self,
        request: TaskPushNotificationConfig,
        caller: Principal,
        *,
        protocol: str = PROTOCOL_VERSION,
    ) -> TaskPushNotificationConfig:
        """CreateTaskPushNotificationConfig: see :meth:`Operations.create_push_config`."""
        return await self.operations.create_push_config(request, caller, protocol=protocol)

    async def get_push_config(
        self, request: GetTaskPushNotificationConfigRequest, caller: Principal
    ) -> TaskPushNotificationConfig:
        """GetTaskPushNotificationConfig: see :meth:`Operations.get_push_config`."""
        return await self.operations.get_push_config(request, caller)

    async def list_push_configs(
        self, request: ListTaskPushNotificationConfigsRequest, caller: Principal
    ) -> ListTaskPushNotificationConfigsResponse:
        """ListTaskPushNotificationConfigs: see :meth:`Operations.list_push_configs`."""
        return await self.operations.list_push_configs(request, caller)

    async def delete_push_config(
        self, request: DeleteTaskPushNotificationConfigRequest, caller: Principal
    ) -> None:
        """DeleteTaskPushNotificationConfig: see :meth:`Operations.delete_push_config`."""
        await self.operations.delete_push_config(request, caller)

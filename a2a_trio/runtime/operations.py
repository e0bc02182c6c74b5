"""The operations room: the task operations that answer from the log, scoped to their caller.

GetTask, ListTasks, CancelTask, SubscribeToTask and the push-config CRUD of
one agent. Each is scoped to its caller's tasks (:meth:`Operations.owned`):
another caller's task is not found. Messages go through ``messages``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..protocol import (
    PROTOCOL_VERSION,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InvalidParamsError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    PushNotificationNotSupportedError,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    UnsupportedOperationError,
)
from ..protocol.tasks import view_task
from ..push import WebhookRefused
from ..store import StoredTask
from .executions import Executions
from .executor import Principal
from .state import HostState, LiveTask, not_cancelable
from .streams import TaskEventStream
from .writes import bound_config

if TYPE_CHECKING:
    from .membership import Membership

__all__ = ["Operations"]


class Operations:
    """One agent's task operations (messages aside), each scoped to its caller's tasks."""

    def __init__(self, state: HostState, *, executions: Executions) -> None:
        self.state = state
        self.name = state.name
        self.store = state.store
        self.settings = state.settings
        self._executions = executions
        #: This process's membership, when several serve the database: a
        #: cancel of a task another process runs is asked of it.
        self.membership: Membership | None = None

    async def owned(self, task_id: str, caller: Principal) -> StoredTask:
        """The caller's task (owner scoping): ``TaskNotFoundError`` for another's, or none."""
        stored = await self.store.get_task(self.name, task_id, owner=caller.identifier)
        if stored is None:
            raise TaskNotFoundError(f"Task {task_id} not found", metadata={"taskId": task_id})
        return stored

    # --- CancelTask -------------------------------------------------------------

    async def cancel_task(self, request: CancelTaskRequest, caller: Principal) -> Task:
        """CancelTask: ask the executor to stop; the task ends CANCELED.

        With several processes, the one running the task cancels it; this
        one answers once the log says how it ended.
        """
        stored = await self.owned(request.id, caller)
        if stored.state.is_final:
            raise not_cancelable(request.id, stored.state)
        live = self.state.live.acquire(request.id, stored)
        try:
            if self.membership is None:
                task = await self._executions.cancel(live, stored, caller, request.metadata or {})
            else:
                task = await self.membership.cancel(live, stored, caller, request.metadata or {})
        finally:
            self.state.live.release(live)
        return await self.shown(task, None)

    # --- GetTask, ListTasks -----------------------------------------------------

    async def shown(
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
        """GetTask: the caller's task, with as much history as asked for."""
        stored = await self.owned(request.id, caller)
        return await self.shown(stored.task, request.history_length, through=stored.last_seq)

    async def list_tasks(self, request: ListTasksRequest, caller: Principal) -> ListTasksResponse:
        """ListTasks: one page of the caller's tasks."""
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
            await self.shown(
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
        self.require_streaming()
        stored = await self.owned(request.id, caller)
        if stored.state.is_final and last_event_id is None:
            raise UnsupportedOperationError(
                f"Task {request.id} is {stored.state.value}; there is nothing left to subscribe to",
                metadata={"taskId": request.id, "state": stored.state.value},
            )
        if last_event_id is not None:
            return TaskEventStream(
                self.state, request.id, max(0, last_event_id), [], stop_on_interrupt=False
            )
        live = self.state.live.tasks.get(request.id)
        snapshot, cursor = stored.task, stored.last_seq
        if live is not None and live.feed.snapshot is not None:
            snapshot, cursor = live.feed.snapshot, live.feed.last_seq
        snapshot = await self.shown(snapshot, None, through=cursor)
        return TaskEventStream(
            self.state,
            request.id,
            cursor,
            [(cursor, StreamResponse(task=snapshot), None)],
            stop_on_interrupt=False,
        )

    # --- push notification configs ------------------------------------------------

    def require_push(self) -> None:
        """Refuse a push-config operation when this agent sends no webhooks."""
        if not self.state.push_notifications:
            raise PushNotificationNotSupportedError(
                "This agent does not support push notifications"
            )

    def require_streaming(self) -> None:
        """Refuse a streaming operation when this agent does not stream."""
        if not self.state.streaming:
            raise UnsupportedOperationError("This agent does not support streaming")

    async def screen_webhook(self, config: TaskPushNotificationConfig) -> None:
        """Refuse a webhook URL that fails address screening (spec 13.2)."""
        self.require_push()
        assert self.state.push is not None
        try:
            await self.state.push.screen.screen(config.url)
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
        self.require_push()
        if not request.task_id:
            raise InvalidParamsError("taskId: required")
        await self.owned(request.task_id, caller)
        await self.screen_webhook(request)
        config = bound_config(request, request.task_id)
        await self.store.save_push_config(self.name, caller.identifier, config, protocol=protocol)
        return config

    async def get_push_config(
        self, request: GetTaskPushNotificationConfigRequest, caller: Principal
    ) -> TaskPushNotificationConfig:
        self.require_push()
        await self.owned(request.task_id, caller)
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
        self.require_push()
        await self.owned(request.task_id, caller)
        configs = await self.store.list_push_configs(
            self.name, request.task_id, owner=caller.identifier
        )
        return ListTaskPushNotificationConfigsResponse(configs=configs, next_page_token="")

    async def delete_push_config(
        self, request: DeleteTaskPushNotificationConfigRequest, caller: Principal
    ) -> None:
        self.require_push()
        await self.owned(request.task_id, caller)
        # Idempotent (spec 3.1.10): deleting what is gone is not an error.
        await self.store.delete_push_config(
            self.name, request.task_id, request.id, owner=caller.identifier
        )

"""The requests and responses of the protocol's operations, and the stream's wrapper."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from .._base import ProtoBool, ProtoInt, ProtoModel, Timestamp, oneof_count
from .core import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskStateField,
    TaskStatusUpdateEvent,
)
from .fields import Id, OptionalId, Struct

__all__ = [
    "CancelTaskRequest",
    "DeleteTaskPushNotificationConfigRequest",
    "GetExtendedAgentCardRequest",
    "GetTaskPushNotificationConfigRequest",
    "GetTaskRequest",
    "ListTaskPushNotificationConfigsRequest",
    "ListTaskPushNotificationConfigsResponse",
    "ListTasksRequest",
    "ListTasksResponse",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "SendMessageResponse",
    "StreamResponse",
    "SubscribeToTaskRequest",
    "stream_response",
]


class SendMessageConfiguration(ProtoModel):
    """How a SendMessage should be answered: accepted output modes, a webhook, history, blocking."""

    accepted_output_modes: list[str] | None = None
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: ProtoInt | None = Field(default=None, ge=0)
    return_immediately: ProtoBool | None = None


class SendMessageRequest(ProtoModel):
    """SendMessage: a message to the agent, starting a task or continuing one."""

    tenant: str | None = None
    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: Struct | None = None


class GetTaskRequest(ProtoModel):
    """GetTask: one task, with at most ``history_length`` messages of its history."""

    tenant: str | None = None
    id: Id
    history_length: ProtoInt | None = Field(default=None, ge=0)


class ListTasksRequest(ProtoModel):
    """ListTasks: the caller's tasks, filtered and paged."""

    tenant: str | None = None
    context_id: OptionalId = None
    status: TaskStateField | None = None
    page_size: ProtoInt | None = Field(default=None, ge=1, le=100)
    page_token: str | None = None
    history_length: ProtoInt | None = Field(default=None, ge=0)
    status_timestamp_after: Timestamp | None = None
    include_artifacts: ProtoBool | None = None


class ListTasksResponse(ProtoModel):
    """A page of ListTasks; ``next_page_token`` is empty on the last page."""

    tasks: list[Task]
    next_page_token: str
    page_size: ProtoInt
    total_size: ProtoInt


class CancelTaskRequest(ProtoModel):
    """CancelTask: ask the agent to stop a task."""

    tenant: str | None = None
    id: Id
    metadata: Struct | None = None


class SubscribeToTaskRequest(ProtoModel):
    """SubscribeToTask: the task now, then each of its updates until it ends."""

    tenant: str | None = None
    id: Id


class GetTaskPushNotificationConfigRequest(ProtoModel):
    """GetTaskPushNotificationConfig: one webhook of a task."""

    tenant: str | None = None
    task_id: Id
    id: Id


class DeleteTaskPushNotificationConfigRequest(ProtoModel):
    """DeleteTaskPushNotificationConfig: remove one webhook of a task."""

    tenant: str | None = None
    task_id: Id
    id: Id


class ListTaskPushNotificationConfigsRequest(ProtoModel):
    """ListTaskPushNotificationConfigs: a task's webhooks, paged."""

    tenant: str | None = None
    task_id: Id
    page_size: ProtoInt | None = Field(default=None, ge=0)
    page_token: str | None = None


class ListTaskPushNotificationConfigsResponse(ProtoModel):
    """A page of a task's webhooks."""

    configs: list[TaskPushNotificationConfig] = Field(default_factory=list)
    next_page_token: str | None = None


class GetExtendedAgentCardRequest(ProtoModel):
    """GetExtendedAgentCard: the card an authenticated caller may see."""

    tenant: str | None = None


class SendMessageResponse(ProtoModel):
    """A oneof: the task created or updated, or a direct message."""

    task: Task | None = None
    message: Message | None = None


class StreamResponse(ProtoModel):
    """A oneof wrapper for every streamed update (and every webhook body)."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None

    @model_validator(mode="after")
    def _exactly_one_payload(self) -> StreamResponse:
        if oneof_count(self) != 1:
            raise ValueError(
                "a stream response holds exactly one of task, message, "
                "statusUpdate or artifactUpdate"
            )
        return self

    @property
    def payload(self) -> Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent:
        """The one update this response holds."""
        value = self.task or self.message or self.status_update or self.artifact_update
        assert value is not None
        return value


def stream_response(
    event: Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent,
) -> StreamResponse:
    """Wrap one event in its StreamResponse member."""
    if isinstance(event, Task):
        return StreamResponse(task=event)
    if isinstance(event, Message):
        return StreamResponse(message=event)
    if isinstance(event, TaskStatusUpdateEvent):
        return StreamResponse(status_update=event)
    return StreamResponse(artifact_update=event)

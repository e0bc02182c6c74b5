"""The params of each 0.3 request, read: validated as 0.3, returned as 1.0 requests.

One model per 0.3 params object of the JSON schema (``MessageSendParams``,
``TaskQueryParams``, ``TaskIdParams`` ...). Both 0.3 bindings end here: the
JSON-RPC ``params`` as sent, and the HTTP+JSON body and path rebuilt into the
same shape. Pure.
"""

from __future__ import annotations

from pydantic import Field

from .._base import ProtoBool, ProtoInt, ProtoModel
from ..models import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from ..models.fields import Struct
from .readers import (
    DEFAULT_PUSH_CONFIG_ID,
    MessageV03,
    PushNotificationConfigV03,
    TaskPushNotificationConfigV03,
)

__all__ = [
    "DeleteTaskPushNotificationConfigParamsV03",
    "EmptyParamsV03",
    "GetTaskPushNotificationConfigParamsV03",
    "ListTaskPushNotificationConfigParamsV03",
    "MessageSendConfigurationV03",
    "MessageSendParamsV03",
    "SetTaskPushNotificationConfigParamsV03",
    "TaskIdParamsV03",
    "TaskQueryParamsV03",
    "TaskResubscriptionParamsV03",
]


class MessageSendConfigurationV03(ProtoModel):
    accepted_output_modes: list[str] | None = None
    blocking: ProtoBool | None = None
    history_length: ProtoInt | None = Field(default=None, ge=0)
    push_notification_config: PushNotificationConfigV03 | None = None

    def to_v1(self) -> SendMessageConfiguration:
        return SendMessageConfiguration(
            accepted_output_modes=self.accepted_output_modes,
            task_push_notification_config=self.push_notification_config.to_v1()
            if self.push_notification_config
            else None,
            # 0.3 servers read historyLength 0 as "no limit" (a2a-sdk 0.3's
            # apply_history_length); 1.0 leaves it unset for that.
            history_length=self.history_length or None,
            # 0.3 blocks unless told otherwise, as 1.0 does.
            return_immediately=None if self.blocking is None else not self.blocking,
        )


class MessageSendParamsV03(ProtoModel):
    """``message/send`` and ``message/stream``."""

    message: MessageV03
    configuration: MessageSendConfigurationV03 | None = None
    metadata: Struct | None = None

    def to_v1(self) -> SendMessageRequest:
        return SendMessageRequest(
            message=self.message.to_v1(),
            configuration=self.configuration.to_v1() if self.configuration else None,
            metadata=self.metadata,
        )


class TaskQueryParamsV03(ProtoModel):
    """``tasks/get``."""

    id: str = Field(min_length=1)
    history_length: ProtoInt | None = Field(default=None, ge=0)
    metadata: Struct | None = None

    def to_v1(self) -> GetTaskRequest:
        # 0 means "all of it" to a 0.3 server, as in MessageSendConfigurationV03.
        return GetTaskRequest(id=self.id, history_length=self.history_length or None)


class TaskIdParamsV03(ProtoModel):
    """``tasks/cancel``."""

    id: str = Field(min_length=1)
    metadata: Struct | None = None

    def to_v1(self) -> CancelTaskRequest:
        return CancelTaskRequest(id=self.id, metadata=self.metadata)


class TaskResubscriptionParamsV03(ProtoModel):
    """``tasks/resubscribe`` (a ``TaskIdParams``; its metadata has no 1.0 home)."""

    id: str = Field(min_length=1)
    metadata: Struct | None = None

    def to_v1(self) -> SubscribeToTaskRequest:
        return SubscribeToTaskRequest(id=self.id)


class SetTaskPushNotificationConfigParamsV03(TaskPushNotificationConfigV03):
    """``tasks/pushNotificationConfig/set``."""

    def to_v1(self) -> TaskPushNotificationConfig:
        config = super().to_v1()
        if config.id is None:
            # a2a-sdk 0.3's stores file it under the task's id, but its ``get``
            # answers the task's first config whatever id is asked for, and
            # 0.3 clients ask for "default" (the kit's 0.3 line does): that
            # is its id here, and ``get`` without a config id reads it.
            config.id = DEFAULT_PUSH_CONFIG_ID
        return config


class GetTaskPushNotificationConfigParamsV03(ProtoModel):
    """``tasks/pushNotificationConfig/get``: a ``TaskIdParams`` or one naming the config."""

    id: str = Field(min_length=1)
    push_notification_config_id: str | None = Field(default=None, min_length=1)
    metadata: Struct | None = None

    def to_v1(self) -> GetTaskPushNotificationConfigRequest:
        # Without a config id, 0.3 means the config set without one.
        config_id = self.push_notification_config_id or DEFAULT_PUSH_CONFIG_ID
        return GetTaskPushNotificationConfigRequest(task_id=self.id, id=config_id)


class ListTaskPushNotificationConfigParamsV03(ProtoModel):
    """``tasks/pushNotificationConfig/list``."""

    id: str = Field(min_length=1)
    metadata: Struct | None = None

    def to_v1(self) -> ListTaskPushNotificationConfigsRequest:
        return ListTaskPushNotificationConfigsRequest(task_id=self.id)


class DeleteTaskPushNotificationConfigParamsV03(ProtoModel):
    """``tasks/pushNotificationConfig/delete``."""

    id: str = Field(min_length=1)
    push_notification_config_id: str = Field(min_length=1)
    metadata: Struct | None = None

    def to_v1(self) -> DeleteTaskPushNotificationConfigRequest:
        return DeleteTaskPushNotificationConfigRequest(
            task_id=self.id, id=self.push_notification_config_id
        )


class EmptyParamsV03(ProtoModel):
    """``agent/getAuthenticatedExtendedCard`` takes no params."""

    def to_v1(self) -> GetExtendedAgentCardRequest:
        return GetExtendedAgentCardRequest()

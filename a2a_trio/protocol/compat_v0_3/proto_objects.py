"""The 0.3 HTTP+JSON object shapes: ProtoJSON of the 0.3 proto (package ``a2a.v1``).

0.3's HTTP+JSON binding does not carry the JSON-RPC shapes: both 0.3 SDKs
send and parse the ProtoJSON of ``a2a_v0_3.proto``. A message holds
``content`` (not ``parts``), a part is ``{text}``, ``{file: {fileWithUri |
fileWithBytes}}`` or ``{data: {data}}``, states are ``TASK_STATE_*`` names
(``TASK_STATE_CANCELLED`` with two Ls), a push config is named by its
resource name ``tasks/{id}/pushNotificationConfigs/{configId}``. The readers
give 1.0 models, the writers take them. Pure.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, model_validator

from .._base import Base64Bytes, ProtoBool, ProtoInt, ProtoModel
from ..limits import bounded_parts
from ..models import (
    Artifact,
    ListTaskPushNotificationConfigsResponse,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskStatus,
)
from ..models.core import RoleField
from ..models.fields import Struct
from ._spellings import PROTO_STATE
from .readers import DATA_PART_COMPAT, DEFAULT_PUSH_CONFIG_ID, PushNotificationConfigV03
from .writers import artifact_json, put, status_json, status_update_is_final

__all__ = [
    "ProtoMessageV03",
    "ProtoSendMessageRequestV03",
    "push_config_list_to_proto",
    "push_config_to_proto",
    "send_result_to_proto",
    "stream_response_to_proto",
    "task_to_proto",
]

JSON = dict[str, Any]


def _blank_is_none(value: Any) -> Any:
    # ProtoJSON writers (ts-proto's among them) send unset strings as "".
    return None if value == "" else value


OptionalId = Annotated[str | None, BeforeValidator(_blank_is_none)]


class ProtoFilePartV03(ProtoModel):
    file_with_uri: OptionalId = None
    file_with_bytes: Base64Bytes | None = None
    mime_type: OptionalId = None
    name: OptionalId = None

    @model_validator(mode="after")
    def _uri_or_bytes(self) -> ProtoFilePartV03:
        if (self.file_with_uri is None) == (self.file_with_bytes is None):
            raise ValueError("a file must have exactly one of fileWithUri or fileWithBytes")
        return self


class ProtoDataPartV03(ProtoModel):
    data: Struct


class ProtoPartV03(ProtoModel):
    """A oneof: ``text``, ``file`` or ``data``."""

    text: str | None = None
    file: ProtoFilePartV03 | None = None
    data: ProtoDataPartV03 | None = None
    metadata: Struct | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ProtoPartV03:
        present = [name for name in ("text", "file", "data") if getattr(self, name) is not None]
        if len(present) != 1:
            found = ", ".join(present) or "none"
            raise ValueError(f"a part must have exactly one of text, file or data (found: {found})")
        return self

    def to_v1(self) -> Part:
        if self.file is not None:
            return Part(
                raw=self.file.file_with_bytes,
                url=self.file.file_with_uri,
                media_type=self.file.mime_type,
                filename=self.file.name,
                metadata=self.metadata,
            )
        if self.data is not None:
            return Part(data=self.data.data, metadata=self.metadata)
        return Part(text=self.text, metadata=self.metadata)


ProtoParts = Annotated[list[ProtoPartV03], BeforeValidator(bounded_parts), Field(min_length=1)]


class ProtoMessageV03(ProtoModel):
    message_id: str = Field(min_length=1)
    context_id: OptionalId = None
    task_id: OptionalId = None
    role: RoleField
    content: ProtoParts
    metadata: Struct | None = None
    extensions: list[str] | None = None

    @model_validator(mode="after")
    def _role_is_set(self) -> ProtoMessageV03:
        if self.role is Role.UNSPECIFIED:
            raise ValueError("role must be ROLE_USER or ROLE_AGENT")
        return self

    def to_v1(self) -> Message:
        return Message(
            message_id=self.message_id,
            context_id=self.context_id,
            task_id=self.task_id,
            role=self.role,
            parts=[part.to_v1() for part in self.content],
            metadata=self.metadata,
            extensions=self.extensions or None,
        )


class ProtoSendMessageConfigurationV03(ProtoModel):
    accepted_output_modes: list[str] | None = None
    push_notification: PushNotificationConfigV03 | None = None
    history_length: ProtoInt | None = Field(default=None, ge=0)
    blocking: ProtoBool | None = None

    def to_v1(self) -> SendMessageConfiguration:
        return SendMessageConfiguration(
            accepted_output_modes=self.accepted_output_modes or None,
            task_push_notification_config=self.push_notification.to_v1()
            if self.push_notification
            else None,
            history_length=self.history_length or None,
            # ProtoJSON leaves false out, so "absent" is both "false" and
            # "unset"; unset is what @a2a-js/sdk sends when the caller said
            # nothing, and a2a-sdk 0.3 sends true to block: absent blocks.
            return_immediately=None if self.blocking is None else not self.blocking,
        )


class ProtoSendMessageRequestV03(ProtoModel):
    """``POST /v1/message:send`` and ``:stream``; ``message`` is also spelled ``request``."""

    message: ProtoMessageV03
    configuration: ProtoSendMessageConfigurationV03 | None = None
    metadata: Struct | None = None

    @model_validator(mode="before")
    @classmethod
    def _request_is_message(cls, value: Any) -> Any:
        # The proto field is ``request`` with json_name ``message``: ProtoJSON
        # parsers accept both, so a client may send either.
        if isinstance(value, dict) and "message" not in value and "request" in value:
            value = {**value, "message": value["request"]}
        return value

    def to_v1(self) -> SendMessageRequest:
        return SendMessageRequest(
            message=self.message.to_v1(),
            configuration=self.configuration.to_v1() if self.configuration else None,
            metadata=self.metadata,
        )


class ProtoTaskPushNotificationConfigV03(ProtoModel):
    # ``name`` repeats the task id and config id that the path and the inner
    # config already carry; a2a-sdk 0.3 writes ".../None" into it when the
    # config has no id, so it is never read.
    name: str | None = None
    push_notification_config: PushNotificationConfigV03


class ProtoCreatePushConfigV03(ProtoModel):
    """The body of ``POST /v1/tasks/{id}/pushNotificationConfigs``, as either 0.3 SDK sends it.

    a2a-sdk 0.3 sends the proto's ``CreateTaskPushNotificationConfigRequest``,
    ``{parent, configId, config: {name, pushNotificationConfig}}``;
    @a2a-js/sdk 0.3 sends the config itself, ``{name, pushNotificationConfig}``.
    """

    parent: str | None = None
    config_id: OptionalId = None
    config: ProtoTaskPushNotificationConfigV03 | None = None
    name: str | None = None
    push_notification_config: PushNotificationConfigV03 | None = None

    @model_validator(mode="after")
    def _one_spelling(self) -> ProtoCreatePushConfigV03:
        if (self.config is None) == (self.push_notification_config is None):
            raise ValueError(
                "the body must hold exactly one of config (a CreateTaskPushNotificationConfig"
                "Request) or pushNotificationConfig (a TaskPushNotificationConfig)"
            )
        return self

    def to_v1(self, task_id: str) -> TaskPushNotificationConfig:
        """The 1.0 config for the task named by the path."""
        inner = self.config.push_notification_config if self.config else None
        inner = inner or self.push_notification_config
        assert inner is not None
        config = inner.to_v1(task_id)
        # As with JSON-RPC's set: a config without an id is "default".
        config.id = config.id or self.config_id or DEFAULT_PUSH_CONFIG_ID
        return config


# --- writers ---------------------------------------------------------------


def _part_to_proto(part: Part) -> JSON:
    wire: JSON
    if part.text is not None:
        wire = {"text": part.text}
    elif part.raw is not None or part.url is not None:
        file: JSON = (
            {"fileWithBytes": base64.b64encode(part.raw).decode("ascii")}
            if part.raw is not None
            else {"fileWithUri": part.url}
        )
        put(file, "mimeType", part.media_type)
        put(file, "name", part.filename)
        wire = {"file": file}
    elif isinstance(part.data, dict):
        wire = {"data": {"data": part.data}}
    else:
        metadata = {**(part.metadata or {}), DATA_PART_COMPAT: True}
        return {"data": {"data": {"value": part.data}}, "metadata": metadata}
    put(wire, "metadata", part.metadata)
    return wire


def _message_to_proto(message: Message) -> JSON:
    # referenceTaskIds has no field in the 0.3 proto: it is not sent.
    wire: JSON = {
        "messageId": message.message_id,
        "role": message.role.value,  # 0.3 and 1.0 name roles alike
        "content": [_part_to_proto(part) for part in message.parts],
    }
    put(wire, "contextId", message.context_id)
    put(wire, "taskId", message.task_id)
    put(wire, "metadata", message.metadata)
    put(wire, "extensions", message.extensions)
    return wire


def _status_to_proto(status: TaskStatus) -> JSON:
    return status_json(status, PROTO_STATE, _message_to_proto)


def _artifact_to_proto(artifact: Artifact) -> JSON:
    return artifact_json(artifact, _part_to_proto)


def task_to_proto(task: Task) -> JSON:
    """``GET /v1/tasks/{id}`` and ``POST /v1/tasks/{id}:cancel``."""
    wire: JSON = {"id": task.id, "status": _status_to_proto(task.status)}
    put(wire, "contextId", task.context_id)
    if task.artifacts is not None:
        wire["artifacts"] = [_artifact_to_proto(artifact) for artifact in task.artifacts]
    if task.history is not None:
        wire["history"] = [_message_to_proto(message) for message in task.history]
    put(wire, "metadata", task.metadata)
    return wire


def send_result_to_proto(response: SendMessageResponse) -> JSON:
    """``POST /v1/message:send``: ``{task}`` or ``{message}``."""
    if response.message is not None:
        return {"message": _message_to_proto(response.message)}
    assert response.task is not None
    return {"task": task_to_proto(response.task)}


def stream_response_to_proto(response: StreamResponse) -> JSON:
    """One SSE frame of ``/v1/message:stream`` or ``/v1/tasks/{id}:subscribe``."""
    if response.task is not None:
        return {"task": task_to_proto(response.task)}
    if response.message is not None:
        return {"message": _message_to_proto(response.message)}
    if response.status_update is not None:
        event = response.status_update
        status: JSON = {
            "taskId": event.task_id,
            "contextId": event.context_id,
            "status": _status_to_proto(event.status),
            "final": status_update_is_final(event),
        }
        put(status, "metadata", event.metadata)
        return {"statusUpdate": status}
    assert response.artifact_update is not None
    update = response.artifact_update
    artifact: JSON = {
        "taskId": update.task_id,
        "contextId": update.context_id,
        "artifact": _artifact_to_proto(update.artifact),
    }
    put(artifact, "append", update.append)
    put(artifact, "lastChunk", update.last_chunk)
    put(artifact, "metadata", update.metadata)
    return {"artifactUpdate": artifact}


def push_config_name(task_id: str, config_id: str) -> str:
    """The 0.3 resource name of a push config."""
    return f"tasks/{task_id}/pushNotificationConfigs/{config_id}"


def push_config_to_proto(config: TaskPushNotificationConfig) -> JSON:
    """A 0.3 proto ``TaskPushNotificationConfig``: resource name and the config."""
    inner: JSON = {"url": config.url}
    put(inner, "id", config.id)
    put(inner, "token", config.token)
    if config.authentication is not None:
        authentication: JSON = {"schemes": [config.authentication.scheme]}
        put(authentication, "credentials", config.authentication.credentials)
        inner["authentication"] = authentication
    return {
        "name": push_config_name(config.task_id or "", config.id or ""),
        "pushNotificationConfig": inner,
    }


def push_config_list_to_proto(response: ListTaskPushNotificationConfigsResponse) -> JSON:
    """``GET /v1/tasks/{id}/pushNotificationConfigs``."""
    wire: JSON = {"configs": [push_config_to_proto(config) for config in response.configs]}
    put(wire, "nextPageToken", response.next_page_token or None)
    return wire

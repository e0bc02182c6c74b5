"""The 0.3 JSON-RPC object shapes, read: validated as 0.3, returned as 1.0 models.

Each model here accepts what the 0.3 JSON schema describes (``kind``
discriminators, lower-case states and roles, file parts with ``bytes`` or
``uri``) and its ``to_v1()`` builds the 1.0 model. Validation runs first and
under the request's limits, so a bad value is reported with the field path the
0.3 client sent (``message.parts.0.kind``), never a 1.0 one. Pure.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from .._base import Base64Bytes, ProtoModel, Timestamp
from ..limits import bounded_parts
from ..models import (
    Artifact,
    AuthenticationInfo,
    Message,
    Part,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from ..models.fields import JsonValue, Struct
from ._spellings import ROLE_BY_V0_3, STATE_BY_V0_3

__all__ = [
    "DEFAULT_PUSH_CONFIG_ID",
    "ArtifactV03",
    "FileV03",
    "MessageV03",
    "PartV03",
    "PushNotificationConfigV03",
    "TaskArtifactUpdateEventV03",
    "TaskPushNotificationConfigV03",
    "TaskStatusUpdateEventV03",
    "TaskStatusV03",
    "TaskV03",
    "event_from_v0_3",
]

#: The metadata key a2a-sdk sets on a data part whose 1.0 value was not an
#: object: 0.3 data parts hold objects only, so the value travels as
#: ``{"value": ...}``. Read back here so both SDKs' conversions agree with ours.
DATA_PART_COMPAT = "data_part_compat"

StateV03 = Literal[
    "submitted",
    "working",
    "input-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
    "auth-required",
    "unknown",
]


class FileV03(ProtoModel):
    """``FileWithBytes`` or ``FileWithUri``: exactly one of ``bytes`` and ``uri``."""

    content: Base64Bytes | None = Field(default=None, alias="bytes")
    uri: str | None = None
    mime_type: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _bytes_or_uri(self) -> FileV03:
        if (self.content is None) == (self.uri is None):
            found = "both" if self.content is not None else "neither"
            raise ValueError(f"a file must have exactly one of bytes or uri (found {found})")
        return self


class PartV03(ProtoModel):
    """A ``TextPart``, ``FilePart`` or ``DataPart``, told apart by ``kind``."""

    kind: Literal["text", "file", "data"] | None = None
    text: str | None = None
    file: FileV03 | None = None
    data: Struct | None = None
    metadata: Struct | None = None

    @model_validator(mode="after")
    def _content_of_its_kind(self) -> PartV03:
        present = [name for name in ("text", "file", "data") if getattr(self, name) is not None]
        if self.kind is None:
            # The schema requires kind, but a2a-sdk's 0.3 models default it: a
            # part that holds exactly one member is read as that kind.
            if len(present) != 1:
                raise ValueError('a part needs a kind: "text", "file" or "data"')
            self.kind = present[0]  # type: ignore[assignment]
        elif self.kind not in present:
            raise ValueError(f'a part of kind "{self.kind}" needs {self.kind}')
        return self

    def to_v1(self) -> Part:
        metadata = self.metadata
        if self.kind == "text":
            return Part(text=self.text, metadata=metadata)
        if self.kind == "file":
            assert self.file is not None
            return Part(
                raw=self.file.content,
                url=self.file.uri,
                media_type=self.file.mime_type,
                filename=self.file.name,
                metadata=metadata,
            )
        data: JsonValue = self.data
        wrapped = self.data is not None and len(self.data) == 1 and "value" in self.data
        if wrapped and metadata and metadata.get(DATA_PART_COMPAT) is True:
            # Only the exact {"value": ...} wrapping is undone: any other object
            # is the client's data, whatever its metadata says.
            data = self.data.get("value") if self.data is not None else None
            metadata = {key: value for key, value in metadata.items() if key != DATA_PART_COMPAT}
        return Part(data=data, metadata=metadata or None)


PartsV03 = Annotated[list[PartV03], BeforeValidator(bounded_parts), Field(min_length=1)]


class MessageV03(ProtoModel):
    kind: Literal["message"] | None = None
    message_id: str = Field(min_length=1)
    context_id: str | None = None
    task_id: str | None = None
    role: Literal["user", "agent"]
    parts: PartsV03
    metadata: Struct | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None

    def to_v1(self) -> Message:
        return Message(
            message_id=self.message_id,
            context_id=self.context_id,
            task_id=self.task_id,
            role=ROLE_BY_V0_3[self.role],
            parts=[part.to_v1() for part in self.parts],
            metadata=self.metadata,
            extensions=self.extensions,
            reference_task_ids=self.reference_task_ids,
        )


class TaskStatusV03(ProtoModel):
    state: StateV03
    message: MessageV03 | None = None
    timestamp: Timestamp | None = None

    def to_v1(self) -> TaskStatus:
        return TaskStatus(
            state=STATE_BY_V0_3[self.state],
            message=self.message.to_v1() if self.message else None,
            timestamp=self.timestamp,
        )


class ArtifactV03(ProtoModel):
    artifact_id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    parts: PartsV03
    metadata: Struct | None = None
    extensions: list[str] | None = None

    def to_v1(self) -> Artifact:
        return Artifact(
            artifact_id=self.artifact_id,
            name=self.name,
            description=self.description,
            parts=[part.to_v1() for part in self.parts],
            metadata=self.metadata,
            extensions=self.extensions,
        )


class TaskV03(ProtoModel):
    kind: Literal["task"] | None = None
    id: str = Field(min_length=1)
    # Required by the 0.3 schema; 1.0 leaves it optional, and writers.py sends
    # "" for a task without one.
    context_id: str | None = None
    status: TaskStatusV03
    artifacts: list[ArtifactV03] | None = None
    history: list[MessageV03] | None = None
    metadata: Struct | None = None

    def to_v1(self) -> Task:
        return Task(
            id=self.id,
            context_id=self.context_id or None,
            status=self.status.to_v1(),
            artifacts=[artifact.to_v1() for artifact in self.artifacts]
            if self.artifacts is not None
            else None,
            history=[message.to_v1() for message in self.history]
            if self.history is not None
            else None,
            metadata=self.metadata,
        )


class TaskStatusUpdateEventV03(ProtoModel):
    kind: Literal["status-update"] | None = None
    task_id: str
    context_id: str
    status: TaskStatusV03
    # 1.0 dropped ``final``: the state says it. Read and ignored.
    final: bool | None = None
    metadata: Struct | None = None

    def to_v1(self) -> TaskStatusUpdateEvent:
        return TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            status=self.status.to_v1(),
            metadata=self.metadata,
        )


class TaskArtifactUpdateEventV03(ProtoModel):
    kind: Literal["artifact-update"] | None = None
    task_id: str
    context_id: str
    artifact: ArtifactV03
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: Struct | None = None

    def to_v1(self) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=self.artifact.to_v1(),
            append=self.append,
            last_chunk=self.last_chunk,
            metadata=self.metadata,
        )


class AuthenticationInfoV03(ProtoModel):
    """``PushNotificationAuthenticationInfo``: several schemes where 1.0 has one."""

    schemes: list[str]
    credentials: str | None = None

    @model_validator(mode="after")
    def _a_scheme_when_credentials(self) -> AuthenticationInfoV03:
        if self.credentials is not None and not any(self.schemes):
            raise ValueError("credentials need a scheme in schemes")
        return self

    def to_v1(self) -> AuthenticationInfo | None:
        schemes = [scheme for scheme in self.schemes if scheme]
        if not schemes:
            return None
        # 1.0 names one scheme; the first is the one the 0.3 client prefers.
        return AuthenticationInfo(scheme=schemes[0], credentials=self.credentials)


#: The id of a 0.3 push config set without one, and what a 0.3 ``get``
#: without a config id reads: 0.3 clients (and the 0.3 line of the
#: conformance kit) read such a config back as ``default``.
DEFAULT_PUSH_CONFIG_ID = "default"


class PushNotificationConfigV03(ProtoModel):
    id: str | None = None
    url: str = Field(min_length=1)
    token: str | None = None
    authentication: AuthenticationInfoV03 | None = None

    def to_v1(self, task_id: str | None = None) -> TaskPushNotificationConfig:
        return TaskPushNotificationConfig(
            id=self.id,
            task_id=task_id,
            url=self.url,
            token=self.token,
            authentication=self.authentication.to_v1() if self.authentication else None,
        )


class TaskPushNotificationConfigV03(ProtoModel):
    task_id: str = Field(min_length=1)
    push_notification_config: PushNotificationConfigV03

    def to_v1(self) -> TaskPushNotificationConfig:
        return self.push_notification_config.to_v1(self.task_id)


_EVENT_MODELS: dict[str, type[ProtoModel]] = {
    "task": TaskV03,
    "message": MessageV03,
    "status-update": TaskStatusUpdateEventV03,
    "artifact-update": TaskArtifactUpdateEventV03,
}


def event_from_v0_3(value: Any) -> StreamResponse:
    """Read one 0.3 stream ``result`` (or ``message/send`` result) by its ``kind``.

    Raises ValueError for a value without a known kind, pydantic's
    ValidationError for one that does not validate as that kind.
    """
    kind = value.get("kind") if isinstance(value, dict) else None
    model = _EVENT_MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ValueError(
            f"kind: expected one of {', '.join(map(repr, _EVENT_MODELS))}, got {kind!r}"
        )
    event = model.model_validate(value).to_v1()  # type: ignore[attr-defined]
    if isinstance(event, Task):
        return StreamResponse(task=event)
    if isinstance(event, Message):
        return StreamResponse(message=event)
    if isinstance(event, TaskStatusUpdateEvent):
        return StreamResponse(status_update=event)
    return StreamResponse(artifact_update=event)

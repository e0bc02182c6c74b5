"""Tasks and what they carry: states, roles, parts, messages, artifacts, their
updates, and where a task's updates are pushed."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from .._base import Base64Bytes, ProtoEnum, ProtoModel, Timestamp
from ..limits import bounded_parts
from .fields import HeaderValue, Id, JsonValue, OptionalId, Struct

__all__ = [
    "Artifact",
    "AuthenticationInfo",
    "Message",
    "Part",
    "Role",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskPushNotificationConfig",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
]

#: The parts of a message or an artifact: counted before any is validated.
Parts = Annotated[list["Part"], BeforeValidator(bounded_parts), Field(min_length=1)]


# --- enums -----------------------------------------------------------------


class TaskState(ProtoEnum):
    """Lifecycle state of a task. Declaration order is the proto numbering."""

    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @classmethod
    def _prefix(cls) -> str:
        return "TASK_STATE_"

    @property
    def is_final(self) -> bool:
        """COMPLETED, FAILED, CANCELED and REJECTED never change again."""
        return self in _FINAL_STATES

    @property
    def is_interrupted(self) -> bool:
        """INPUT_REQUIRED and AUTH_REQUIRED wait for the client."""
        return self in _INTERRUPTED_STATES


_FINAL_STATES = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
_INTERRUPTED_STATES = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


class Role(ProtoEnum):
    """Sender of a message."""

    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"

    @classmethod
    def _prefix(cls) -> str:
        return "ROLE_"


TaskStateField = Annotated[TaskState, BeforeValidator(TaskState.parse)]
RoleField = Annotated[Role, BeforeValidator(Role.parse)]


# --- core objects ----------------------------------------------------------


class Part(ProtoModel):
    """One piece of content: exactly one of ``text``, ``raw``, ``url``, ``data``."""

    text: str | None = None
    raw: Base64Bytes | None = None
    url: str | None = None
    data: JsonValue = None
    metadata: Struct | None = None
    filename: str | None = None
    media_type: str | None = None

    @model_validator(mode="after")
    def _exactly_one_content(self) -> Part:
        has_data = self.data is not None or "data" in self.model_fields_set
        contents = (self.text is not None) + (self.raw is not None) + (self.url is not None)
        if contents + has_data != 1:
            present = [
                name
                for name in ("text", "raw", "url", "data")
                if getattr(self, name) is not None or (name == "data" and has_data)
            ]
            found = ", ".join(present) if present else "none"
            raise ValueError(
                f"a part must have exactly one of text, raw, url or data (found: {found})"
            )
        return self

    @model_serializer(mode="wrap")
    def _keep_null_data(self, handler: SerializerFunctionWrapHandler) -> Any:
        # JSON null is a valid google.protobuf.Value: a data part holding it
        # keeps its "data" key when unset fields are left out.
        result = handler(self)
        if self.data is None and "data" in self.model_fields_set and isinstance(result, dict):
            result["data"] = None
        return result


class Message(ProtoModel):
    """One unit of communication between client and agent."""

    message_id: Id
    context_id: OptionalId = None
    task_id: OptionalId = None
    role: RoleField
    parts: Parts
    metadata: Struct | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None

    @model_validator(mode="after")
    def _role_is_set(self) -> Message:
        if self.role is Role.UNSPECIFIED:
            raise ValueError("role must be ROLE_USER or ROLE_AGENT")
        return self


class TaskStatus(ProtoModel):
    """A task's state, with the agent message that explains it and when it was reached."""

    state: TaskStateField
    message: Message | None = None
    timestamp: Timestamp | None = None


class Artifact(ProtoModel):
    """An output of a task: parts under an id, built whole or streamed chunk by chunk."""

    artifact_id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    parts: Parts
    metadata: Struct | None = None
    extensions: list[str] | None = None


class Task(ProtoModel):
    """A unit of work with its status, its artifacts and (a window of) its conversation."""

    id: str = Field(min_length=1)
    context_id: str | None = None
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None
    metadata: Struct | None = None


class TaskStatusUpdateEvent(ProtoModel):
    """A streamed change of a task's status; ``status.state`` says where the task is now."""

    task_id: str
    context_id: str
    status: TaskStatus
    metadata: Struct | None = None


class TaskArtifactUpdateEvent(ProtoModel):
    """A streamed artifact, or a chunk of it (``append``), the last one marked ``last_chunk``."""

    task_id: str
    context_id: str
    artifact: Artifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: Struct | None = None


# --- push notifications ----------------------------------------------------


class AuthenticationInfo(ProtoModel):
    """How a webhook authenticates to its receiver: an HTTP scheme and its credentials."""

    scheme: str = Field(min_length=1, pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
    credentials: HeaderValue = None


class TaskPushNotificationConfig(ProtoModel):
    """Where, and with which token or credentials, a task's updates are pushed."""

    tenant: str | None = None
    id: OptionalId = None
    task_id: OptionalId = None
    url: str = Field(min_length=1)
    token: HeaderValue = None
    authentication: AuthenticationInfo | None = None

"""The A2A 1.0 data model (``lf.a2a.v1`` in a2a.proto) as pydantic models.

Field names follow the proto in snake_case; on the wire they are camelCase.
Optional scalars and repeated fields default to ``None`` so that what was not
set is not sent.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ._base import Base64Bytes, ProtoEnum, ProtoModel, Timestamp, oneof_count
from .limits import bounded_id, bounded_json, bounded_parts

__all__ = [
    "APIKeySecurityScheme",
    "AgentCapabilities",
    "AgentCard",
    "AgentCardSignature",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "Artifact",
    "AuthenticationInfo",
    "AuthorizationCodeOAuthFlow",
    "CancelTaskRequest",
    "ClientCredentialsOAuthFlow",
    "DeleteTaskPushNotificationConfigRequest",
    "DeviceCodeOAuthFlow",
    "GetExtendedAgentCardRequest",
    "GetTaskPushNotificationConfigRequest",
    "GetTaskRequest",
    "HTTPAuthSecurityScheme",
    "ImplicitOAuthFlow",
    "ListTaskPushNotificationConfigsRequest",
    "ListTaskPushNotificationConfigsResponse",
    "ListTasksRequest",
    "ListTasksResponse",
    "Message",
    "MutualTlsSecurityScheme",
    "OAuth2SecurityScheme",
    "OAuthFlows",
    "OpenIdConnectSecurityScheme",
    "Part",
    "PasswordOAuthFlow",
    "Role",
    "SecurityRequirement",
    "SecurityScheme",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "SendMessageResponse",
    "StreamResponse",
    "StringList",
    "SubscribeToTaskRequest",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskPushNotificationConfig",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
]

#: A google.protobuf.Struct: free-form JSON, bounded (see limits.py).
Struct = Annotated[dict[str, Any], BeforeValidator(bounded_json)]
#: An identifier a client sends (see limits.bounded_id).
Id = Annotated[str, Field(min_length=1), AfterValidator(bounded_id)]
OptionalId = Annotated[str | None, AfterValidator(bounded_id)]
#: A google.protobuf.Value (a data part's content), bounded the same way.
JsonValue = Annotated[Any, BeforeValidator(bounded_json)]
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


def _header_value(value: str | None) -> str | None:
    if value is not None and not _HEADER_VALUE.fullmatch(value):
        raise ValueError("must be printable ASCII: it is sent in an HTTP header of each webhook")
    return value


_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]*")
#: A value the push worker sends as an HTTP header (a token, credentials).
HeaderValue = Annotated[str | None, AfterValidator(_header_value)]


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


# --- agent card ------------------------------------------------------------


class AgentInterface(ProtoModel):
    """One way to reach the agent: a URL, its protocol binding and version."""

    url: str
    protocol_binding: str
    tenant: str | None = None
    protocol_version: str


class AgentProvider(ProtoModel):
    """The organisation that provides the agent."""

    url: str
    organization: str


class AgentExtension(ProtoModel):
    """A protocol extension the agent supports, and whether clients must too."""

    uri: str | None = None
    description: str | None = None
    required: bool | None = None
    params: Struct | None = None


class AgentCapabilities(ProtoModel):
    """What the agent can do: streaming, push notifications, extensions, an extended card."""

    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] | None = None
    extended_agent_card: bool | None = None


class StringList(ProtoModel):
    """A list of strings, as the wire format nests it (``{"list": [...]}``)."""

    values: list[str] = Field(default_factory=list, alias="list")


class SecurityRequirement(ProtoModel):
    """The schemes a caller must satisfy together, each with the scopes it needs."""

    schemes: dict[str, StringList] = Field(default_factory=dict)


class AgentSkill(ProtoModel):
    """One thing the agent is good at, with examples and the media types it takes and gives."""

    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None
    security_requirements: list[SecurityRequirement] | None = None


class AgentCardSignature(ProtoModel):
    """A JWS signature over the card (spec 8.4): protected header, signature, unprotected header."""

    protected: str
    signature: str
    header: Struct | None = None


class APIKeySecurityScheme(ProtoModel):
    """An API key sent in a header, query parameter or cookie."""

    description: str | None = None
    location: str
    name: str


class HTTPAuthSecurityScheme(ProtoModel):
    """HTTP authentication (RFC 9110): Basic, Bearer and the like."""

    description: str | None = None
    scheme: str
    bearer_format: str | None = None


class AuthorizationCodeOAuthFlow(ProtoModel):
    """OAuth 2.0's authorization code flow."""

    authorization_url: str
    token_url: str
    refresh_url: str | None = None
    scopes: dict[str, str] = Field(default_factory=dict)
    pkce_required: bool | None = None


class ClientCredentialsOAuthFlow(ProtoModel):
    """OAuth 2.0's client credentials flow."""

    token_url: str
    refresh_url: str | None = None
    scopes: dict[str, str] = Field(default_factory=dict)


class ImplicitOAuthFlow(ProtoModel):
    """OAuth 2.0's implicit flow (deprecated by OAuth 2.1)."""

    authorization_url: str | None = None
    refresh_url: str | None = None
    scopes: dict[str, str] | None = None


class PasswordOAuthFlow(ProtoModel):
    """OAuth 2.0's resource owner password flow (deprecated by OAuth 2.1)."""

    token_url: str | None = None
    refresh_url: str | None = None
    scopes: dict[str, str] | None = None


class DeviceCodeOAuthFlow(ProtoModel):
    """OAuth 2.0's device authorization flow (RFC 8628)."""

    device_authorization_url: str
    token_url: str
    refresh_url: str | None = None
    scopes: dict[str, str] = Field(default_factory=dict)


class OAuthFlows(ProtoModel):
    """A oneof: exactly one flow is described."""

    authorization_code: AuthorizationCodeOAuthFlow | None = None
    client_credentials: ClientCredentialsOAuthFlow | None = None
    implicit: ImplicitOAuthFlow | None = None
    password: PasswordOAuthFlow | None = None
    device_code: DeviceCodeOAuthFlow | None = None

    @model_validator(mode="after")
    def _exactly_one_flow(self) -> OAuthFlows:
        if oneof_count(self) != 1:
            raise ValueError("OAuth flows must describe exactly one flow")
        return self


class OAuth2SecurityScheme(ProtoModel):
    """OAuth 2.0, with the one flow the agent accepts."""

    description: str | None = None
    flows: OAuthFlows
    oauth2_metadata_url: str | None = None


class OpenIdConnectSecurityScheme(ProtoModel):
    """OpenID Connect, from its discovery document."""

    description: str | None = None
    open_id_connect_url: str


class MutualTlsSecurityScheme(ProtoModel):
    """Mutual TLS: the client presents a certificate."""

    description: str | None = None


class SecurityScheme(ProtoModel):
    """A oneof: exactly one of the scheme kinds is set."""

    api_key_security_scheme: APIKeySecurityScheme | None = None
    http_auth_security_scheme: HTTPAuthSecurityScheme | None = None
    oauth2_security_scheme: OAuth2SecurityScheme | None = None
    open_id_connect_security_scheme: OpenIdConnectSecurityScheme | None = None
    mtls_security_scheme: MutualTlsSecurityScheme | None = None

    @model_validator(mode="after")
    def _exactly_one_scheme(self) -> SecurityScheme:
        if oneof_count(self) != 1:
            raise ValueError("a security scheme must set exactly one scheme kind")
        return self


class AgentCard(ProtoModel):
    """The agent's self-description served for discovery."""

    name: str
    description: str
    supported_interfaces: list[AgentInterface] | None = None
    provider: AgentProvider | None = None
    version: str
    documentation_url: str | None = None
    capabilities: AgentCapabilities = Field(default_factory=AgentCapabilities)
    security_schemes: dict[str, SecurityScheme] | None = None
    security_requirements: list[SecurityRequirement] | None = None
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    signatures: list[AgentCardSignature] | None = None
    icon_url: str | None = None


# --- requests and responses ------------------------------------------------


class SendMessageConfiguration(ProtoModel):
    """How a SendMessage should be answered: accepted output modes, a webhook, history, blocking."""

    accepted_output_modes: list[str] | None = None
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: int | None = Field(default=None, ge=0)
    return_immediately: bool | None = None


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
    history_length: int | None = Field(default=None, ge=0)


class ListTasksRequest(ProtoModel):
    """ListTasks: the caller's tasks, filtered and paged."""

    tenant: str | None = None
    context_id: OptionalId = None
    status: TaskStateField | None = None
    page_size: int | None = Field(default=None, ge=1, le=100)
    page_token: str | None = None
    history_length: int | None = Field(default=None, ge=0)
    status_timestamp_after: Timestamp | None = None
    include_artifacts: bool | None = None


class ListTasksResponse(ProtoModel):
    """A page of ListTasks; ``next_page_token`` is empty on the last page."""

    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int


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
    page_size: int | None = Field(default=None, ge=0)
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

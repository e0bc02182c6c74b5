"""A client for any A2A 1.0 agent, on trio and httpx.

::

    async with await A2AClient.connect("http://127.0.0.1:8000") as client:
        text = await answer_text(client.send("hello"))

It discovers the agent from ``{agent_url}/.well-known/agent-card.json``, picks
a binding from the card's ``supportedInterfaces`` (JSON-RPC first unless told
otherwise), sends ``A2A-Version: 1.0`` on every request, and raises the typed
protocol errors of :mod:`a2a_trio.protocol.errors`. Every send yields
StreamResponse events, blocking or streaming alike.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import ssl
import uuid
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from . import telemetry
from ._http import CLIENT_LIMITS
from .protocol import (
    PROTOCOL_VERSION,
    A2AError,
    AgentCard,
    AgentInterface,
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    InternalError,
    InvalidAgentResponseError,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Operation,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    error_from_code,
)
from .protocol.operations import rest_request
from .protocol.sse import SSEDecoder

# gRPC (h2, protobuf) and card signatures (cryptography, PyJWT) are imported
# by the calls that use them: a JSON-RPC or HTTP+JSON client, the command
# line's `send` included, starts without them.
if TYPE_CHECKING:
    from ._grpc_channel import GrpcCallError, GrpcChannel
    from .protocol.grpc_wire import GrpcMethod
    from .protocol.signing import CardKeys

__all__ = ["A2AClient", "answer_text", "fetch_jwks", "text_of"]

WELL_KNOWN_PATH = "/.well-known/agent-card.json"
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
M = TypeVar("M", bound=BaseModel)


def text_of(response: StreamResponse | Task | Message) -> str:
    """The answer text an event carries.

    An artifact update gives its parts' text; a task, the text of every
    artifact's parts; a message, its own text parts.
    """
    if isinstance(response, StreamResponse):
        if response.artifact_update is not None:
            return _texts(response.artifact_update.artifact.parts)
        if response.task is not None:
            return text_of(response.task)
        if response.message is not None:
            return text_of(response.message)
        return ""
    if isinstance(response, Task):
        return "".join(_texts(artifact.parts) for artifact in response.artifacts or [])
    return _texts(response.parts)


def _texts(parts: Sequence[Part]) -> str:
    return "".join(part.text for part in parts if part.text is not None)


async def answer_text(events: AsyncIterable[StreamResponse]) -> str:
    """The whole answer of a send: every event's text, in order."""
    return "".join([text_of(event) async for event in events])


def _error_from_payload(document: Any, status: int | None = None) -> A2AError:
    """Rebuild the typed error of a JSON-RPC error object or an AIP-193 body."""
    if isinstance(document, dict) and isinstance(document.get("error"), dict):
        error = document["error"]
        details = error.get("data") if "data" in error else error.get("details")
        reason = None
        if isinstance(details, list):
            for detail in details:
                if isinstance(detail, dict) and detail.get("reason"):
                    reason = str(detail["reason"])
                    break
        code = error.get("code") if status is None else None
        rebuilt = error_from_code(code, str(error.get("message") or ""), reason=reason)
        if reason is None and status == 404:
            rebuilt = error_from_code(-32001, rebuilt.message)
        return rebuilt
    return InternalError(f"the agent answered HTTP {status} without an A2A error")


def card_url(agent_url: str) -> str:
    """Where an agent's card is: ``agent_url`` itself when it names a .json file."""
    if agent_url.endswith(".json"):
        return agent_url
    return agent_url.rstrip("/") + WELL_KNOWN_PATH


class _Transport:
    """One binding: unary calls and event streams over one httpx client."""

    def __init__(self, http: httpx.AsyncClient, interface: AgentInterface) -> None:
        self.http = http
        self.url = interface.url.rstrip("/")

    async def call(self, operation: Operation, request: BaseModel) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Let go of what the transport holds beyond the httpx client (nothing, mostly)."""

    def stream(
        self, operation: Operation, request: BaseModel, headers: Mapping[str, str]
    ) -> AsyncIterator[tuple[str | None, Any]]:
        raise NotImplementedError

    @staticmethod
    async def _events(response: httpx.Response) -> AsyncIterator[tuple[str | None, Any]]:
        decoder = SSEDecoder()
        async for line in response.aiter_lines():
            event = decoder.feed(line.rstrip("\r"))
            if event is None:
                continue
            try:
                document = json.loads(event.data)
            except ValueError:
                raise InvalidAgentResponseError("an SSE event is not JSON") from None
            yield event.id, document


class _JsonRpc(_Transport):
    _ids = itertools.count(1)

    def _envelope(self, operation: Operation, request: BaseModel) -> dict[str, Any]:
        params = request.model_dump(mode="json", exclude_none=True, by_alias=True)
        return {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": operation.value,
            "params": params,
        }

    @staticmethod
    def _result(document: Any) -> Any:
        if not isinstance(document, dict):
            raise InvalidAgentResponseError("a JSON-RPC response must be an object")
        if "error" in document:
            raise _error_from_payload(document)
        if "result" not in document:
            raise InvalidAgentResponseError("a JSON-RPC response without result or error")
        return document["result"]

    async def call(self, operation: Operation, request: BaseModel) -> Any:
        response = await self.http.post(self.url, json=self._envelope(operation, request))
        try:
            document = response.json()
        except ValueError:
            raise _error_from_payload(None, response.status_code) from None
        return self._result(document)

    async def stream(
        self, operation: Operation, request: BaseModel, headers: Mapping[str, str]
    ) -> AsyncIterator[tuple[str | None, Any]]:
        body = self._envelope(operation, request)
        async with self.http.stream(
            "POST", self.url, json=body, headers={"Accept": "text/event-stream", **headers}
        ) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()
                self._result(response.json())
                raise InvalidAgentResponseError("a streaming call answered without a stream")
            async for event_id, document in self._events(response):
                yield event_id, self._result(document)


class _Rest(_Transport):
    async def call(self, operation: Operation, request: BaseModel) -> Any:
        rest = rest_request(operation, request)
        response = await self.http.request(
            rest.method, self.url + rest.path, params=rest.query or None, json=rest.body
        )
        return self._document(response)

    @staticmethod
    def _document(response: httpx.Response) -> Any:
        try:
            document = response.json() if response.content else {}
        except ValueError:
            document = None
        if response.status_code >= 400:
            raise _error_from_payload(document, response.status_code)
        if document is None:
            raise InvalidAgentResponseError("the agent's answer is not JSON")
        return document

    async def stream(
        self, operation: Operation, request: BaseModel, headers: Mapping[str, str]
    ) -> AsyncIterator[tuple[str | None, Any]]:
        rest = rest_request(operation, request)
        async with self.http.stream(
            rest.method,
            self.url + rest.path,
            params=rest.query or None,
            json=rest.body,
            headers={"Accept": "text/event-stream", **headers},
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                self._document(response)
            async for event_id, document in self._events(response):
                yield event_id, document


#: Headers of the httpx client that are not a gRPC call's metadata.
_NOT_METADATA = frozenset(
    {
        "accept",
        "accept-encoding",
        "connection",
        "host",
        "keep-alive",
        "te",
        "upgrade",
        "transfer-encoding",
        "user-agent",
    }
)


@functools.cache
def _grpc_methods() -> dict[Operation, GrpcMethod]:
    from .protocol.grpc_wire import METHODS

    return {method.operation: method for method in METHODS.values()}


class _Grpc(_Transport):
    """The gRPC binding: A2AService over HTTP/2 connections of our own (see _grpc_channel).

    The interface's URL is ``host:port`` (TLS when it says ``https://`` or the
    port is 443); its tenant goes into every request, as the official clients
    do. The httpx client's headers (A2A-Version, authentication) are the
    calls' metadata. gRPC streams carry no event ids: resuming a subscription
    starts over with the task's snapshot.
    """

    def __init__(self, http: httpx.AsyncClient, interface: AgentInterface) -> None:
        super().__init__(http, interface)
        self.tenant = interface.tenant
        target = interface.url
        tls = target.startswith("https://")
        target = target.split("://", 1)[-1].split("/", 1)[0]
        host, _, port_text = target.rpartition(":")
        if not host or not port_text.isdigit():
            host, port_text = target, "443" if tls else "80"
        port = int(port_text)
        context = ssl.create_default_context() if tls or port == 443 else None
        if context is not None:
            context.set_alpn_protocols(["h2"])
        from ._grpc_channel import GrpcChannel

        self.channel: GrpcChannel = GrpcChannel(host.strip("[]"), port, tls=context)

    def _metadata(self, extra: Mapping[str, str]) -> dict[str, str]:
        metadata = {
            name.lower(): value
            for name, value in self.http.headers.items()
            if name.lower() not in _NOT_METADATA
        }
        metadata.update({name.lower(): value for name, value in extra.items()})
        telemetry.inject(metadata)  # the call's trace, when tracing is on
        return metadata

    def _message(self, operation: Operation, request: BaseModel) -> bytes:
        if self.tenant and "tenant" in type(request).model_fields:
            request = request.model_copy(update={"tenant": self.tenant})
        from .protocol.protobuf import to_proto

        return to_proto(request).SerializeToString()

    @staticmethod
    def _document(response: str, data: bytes) -> Any:
        if response == "Empty":
            return {}
        from .protocol.protobuf import MODELS, decode_message, proto_fields

        try:
            return _model(MODELS[response], proto_fields(decode_message(data, response))).to_wire()
        except A2AError as error:
            raise InvalidAgentResponseError(f"unexpected {response}: {error.message}") from None

    async def call(self, operation: Operation, request: BaseModel) -> Any:
        from ._grpc_channel import GrpcCallError

        method = _grpc_methods()[operation]
        try:
            data = await self.channel.unary(
                method.path, self._message(operation, request), self._metadata({})
            )
        except GrpcCallError as error:
            raise _grpc_error(error) from None
        return self._document(method.response, data)

    async def stream(
        self, operation: Operation, request: BaseModel, headers: Mapping[str, str]
    ) -> AsyncIterator[tuple[str | None, Any]]:
        from ._grpc_channel import GrpcCallError

        method = _grpc_methods()[operation]
        extra = {k: v for k, v in headers.items() if k.lower() != "last-event-id"}
        try:
            async for data in self.channel.server_stream(
                method.path, self._message(operation, request), self._metadata(extra)
            ):
                yield None, self._document(method.response, data)
        except GrpcCallError as error:
            raise _grpc_error(error) from None

    async def aclose(self) -> None:
        await self.channel.aclose()


def _grpc_error(error: GrpcCallError) -> A2AError:
    """The typed A2A error of a failed call, from its ErrorInfo (or its status alone)."""
    from google.protobuf.message import DecodeError

    from .protocol.grpc_wire import GrpcStatus, decode_status_details, error_from_status

    reason: str | None = None
    metadata: dict[str, str] = {}
    details = error.trailers.get("grpc-status-details-bin")
    if details:
        with contextlib.suppress(ValueError, DecodeError):  # a status we cannot read
            reason, metadata = error_from_status(decode_status_details(details))
    #: The errors a status names without an ErrorInfo (any other is an InternalError).
    reasons = {
        GrpcStatus.UNAUTHENTICATED: "UNAUTHENTICATED",
        GrpcStatus.PERMISSION_DENIED: "PERMISSION_DENIED",
        GrpcStatus.INVALID_ARGUMENT: "INVALID_PARAMS",
    }
    rebuilt = error_from_code(None, error.message, reason=reason or reasons.get(error.status))
    rebuilt.metadata = metadata
    return rebuilt


_TRANSPORTS: dict[str, type[_Transport]] = {"JSONRPC": _JsonRpc, "HTTP+JSON": _Rest, "GRPC": _Grpc}


async def fetch_jwks(url: str, http: httpx.AsyncClient) -> CardKeys:
    """The card-signing keys of the JWKS at ``url`` (raises ValueError if it is none)."""
    response = await http.get(url)
    if response.status_code != 200:
        raise ValueError(f"{url} answered HTTP {response.status_code}, not a JWKS")
    try:
        document = response.json()
    except ValueError:
        raise ValueError(f"{url} did not answer JSON, not a JWKS") from None
    from .protocol.signing import CardKeys

    try:
        return CardKeys.from_jwks(document)
    except ValueError as error:
        raise ValueError(f"{url}: {error}") from None


def _verified(document: Any, keys: CardKeys | None, what: str) -> Any:
    """``document`` itself, once one of its signatures verifies with ``keys`` (if any).

    The received JSON is checked, not a model rebuilt from it: fields this
    client does not know are covered by the signature too.
    """
    if keys is None:
        return document
    if not isinstance(document, dict):
        raise InvalidAgentResponseError(f"{what} is not a JSON object")
    from .protocol.signing import CardSignatureError, verify_card

    try:
        verify_card(document, keys)
    except CardSignatureError as error:
        raise CardSignatureError(f"{what}: {error}") from None
    return document


def _model(cls: type[M], document: Any) -> M:
    try:
        return cls.model_validate(document)
    except ValidationError as error:
        raise InvalidAgentResponseError(f"unexpected {cls.__name__}: {error}") from None


class A2AClient:
    """A connection to one agent over the binding its card and your preference agree on."""

    def __init__(
        self,
        card: AgentCard,
        http: httpx.AsyncClient,
        *,
        prefer: Sequence[str] = BINDINGS,
        owns_http: bool = False,
        card_keys: CardKeys | None = None,
    ) -> None:
        self.card = card
        self.card_keys = card_keys
        self.http = http
        self._owns_http = owns_http
        interface = self._choose(card, prefer)
        self.interface = interface
        transport = _TRANSPORTS[interface.protocol_binding]
        self._transport: _Transport = telemetry.client_transport(
            transport(http, interface), interface.protocol_binding, interface.url
        )
        #: The id of the last event a subscription received (resume with it).
        self.last_event_id: str | None = None

    @staticmethod
    def _choose(card: AgentCard, prefer: Sequence[str]) -> AgentInterface:
        offered = card.supported_interfaces or []
        for binding in prefer:
            for interface in offered:
                if interface.protocol_binding == binding and interface.protocol_version.startswith(
                    PROTOCOL_VERSION
                ):
                    return interface
        bindings = ", ".join(f"{i.protocol_binding} {i.protocol_version}" for i in offered)
        raise ValueError(
            f"the agent offers no interface this client speaks ({', '.join(prefer)} "
            f"{PROTOCOL_VERSION}); it offers: {bindings or 'nothing'}"
        )

    @classmethod
    async def connect(
        cls,
        agent_url: str,
        *,
        prefer: Sequence[str] = BINDINGS,
        headers: Mapping[str, str] | None = None,
        request_timeout: float = 30.0,
        http: httpx.AsyncClient | None = None,
        card_keys: CardKeys | None = None,
    ) -> A2AClient:
        """Fetch the agent's card and connect over the preferred binding it offers.

        With ``card_keys`` the card (and later the extended card) must carry
        a signature that verifies with one of them, or
        :class:`~a2a_trio.protocol.signing.CardSignatureError` says why not.
        ``headers`` (authentication, say) go on every request.
        ``request_timeout`` bounds connecting and sending; reads are not
        bounded, since streams wait as long as their task. Pass ``http`` to
        reuse your own httpx client; otherwise one is made and closed with
        this client.
        """
        owns = http is None
        # Streams may be quiet for long: only connecting and writing are bounded.
        client = http or httpx.AsyncClient(
            timeout=httpx.Timeout(request_timeout, read=None), limits=CLIENT_LIMITS
        )
        client.headers.update({"A2A-Version": PROTOCOL_VERSION, **(headers or {})})
        try:
            card = await cls.fetch_card(agent_url, client, card_keys=card_keys)
            return cls(card, client, prefer=prefer, owns_http=owns, card_keys=card_keys)
        except BaseException:
            if owns:
                await client.aclose()
            raise

    @staticmethod
    async def fetch_card(
        agent_url: str, http: httpx.AsyncClient, *, card_keys: CardKeys | None = None
    ) -> AgentCard:
        """The card at ``{agent_url}/.well-known/agent-card.json`` (or ``agent_url`` itself).

        With ``card_keys``, one of its signatures must verify with them.
        """
        url = card_url(agent_url)
        response = await http.get(url)
        if response.status_code != 200:
            raise InvalidAgentResponseError(f"{url} answered HTTP {response.status_code}")
        try:
            document = response.json()
        except ValueError:
            raise InvalidAgentResponseError(f"{url} did not answer JSON") from None
        return _model(AgentCard, _verified(document, card_keys, f"the card at {url}"))

    async def aclose(self) -> None:
        """Close the transport, and the HTTP client if this client made it."""
        await self._transport.aclose()
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- messages -------------------------------------------------------------------

    @staticmethod
    def message(
        content: str | Message | Sequence[Part],
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Message:
        """A user message with a fresh id."""
        if isinstance(content, Message):
            return content
        parts = [Part(text=content)] if isinstance(content, str) else list(content)
        return Message(
            message_id=str(uuid.uuid4()),
            role=Role.USER,
            parts=parts,
            task_id=task_id,
            context_id=context_id,
            metadata=dict(metadata) if metadata else None,
        )

    async def send(
        self,
        content: str | Message | Sequence[Part],
        *,
        stream: bool = False,
        task_id: str | None = None,
        context_id: str | None = None,
        configuration: SendMessageConfiguration | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[StreamResponse, None]:
        """Send a message; yields each event (one for a blocking send)."""
        request = SendMessageRequest(
            message=self.message(content, task_id=task_id, context_id=context_id),
            configuration=configuration,
            metadata=dict(metadata) if metadata else None,
        )
        if stream:
            async for event_id, document in self._transport.stream(
                Operation.SEND_STREAMING_MESSAGE, request, {}
            ):
                self.last_event_id = event_id
                yield _model(StreamResponse, document)
            return
        answer = _model(
            SendMessageResponse, await self._transport.call(Operation.SEND_MESSAGE, request)
        )
        if answer.task is not None:
            yield StreamResponse(task=answer.task)
        elif answer.message is not None:
            yield StreamResponse(message=answer.message)
        else:
            raise InvalidAgentResponseError("SendMessage answered neither a task nor a message")

    async def send_message(
        self, content: str | Message | Sequence[Part], **options: Any
    ) -> Task | Message:
        """A blocking send: the task (or the agent's direct message)."""
        # Closed here, not left half-read to the garbage collector (ResourceWarning).
        async with contextlib.aclosing(self.send(content, **options)) as events:
            async for event in events:
                payload = event.payload
                if isinstance(payload, Task | Message):
                    return payload
        raise InvalidAgentResponseError("no task or message in the answer")

    # --- tasks ----------------------------------------------------------------------

    async def get_task(self, task_id: str, *, history_length: int | None = None) -> Task:
        """The task (GetTask), with at most ``history_length`` messages of its history."""
        request = GetTaskRequest(id=task_id, history_length=history_length)
        return _model(Task, await self._transport.call(Operation.GET_TASK, request))

    async def list_tasks(
        self,
        *,
        context_id: str | None = None,
        status: TaskState | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
        history_length: int | None = None,
        include_artifacts: bool | None = None,
    ) -> ListTasksResponse:
        """One page of the caller's tasks (ListTasks), filtered by context and state."""
        request = ListTasksRequest(
            context_id=context_id,
            status=status,
            page_size=page_size,
            page_token=page_token,
            history_length=history_length,
            include_artifacts=include_artifacts,
        )
        return _model(ListTasksResponse, await self._transport.call(Operation.LIST_TASKS, request))

    async def cancel_task(self, task_id: str) -> Task:
        """Ask the agent to stop the task (CancelTask); the task as it stands after."""
        request = CancelTaskRequest(id=task_id)
        return _model(Task, await self._transport.call(Operation.CANCEL_TASK, request))

    async def subscribe(
        self, task_id: str, *, last_event_id: str | None = None
    ) -> AsyncIterator[StreamResponse]:
        """The task's events until it ends; resume after ``last_event_id`` if given."""
        headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
        async for event_id, document in self._transport.stream(
            Operation.SUBSCRIBE_TO_TASK, SubscribeToTaskRequest(id=task_id), headers
        ):
            self.last_event_id = event_id
            yield _model(StreamResponse, document)

    # --- push notification configs -------------------------------------------------------

    async def create_push_config(
        self,
        task_id: str,
        url: str,
        *,
        config_id: str | None = None,
        token: str | None = None,
        authentication: AuthenticationInfo | None = None,
    ) -> TaskPushNotificationConfig:
        """Have the task's updates pushed to ``url`` (CreateTaskPushNotificationConfig)."""
        request = TaskPushNotificationConfig(
            task_id=task_id, id=config_id, url=url, token=token, authentication=authentication
        )
        document = await self._transport.call(Operation.CREATE_PUSH_CONFIG, request)
        return _model(TaskPushNotificationConfig, document)

    async def get_push_config(self, task_id: str, config_id: str) -> TaskPushNotificationConfig:
        """One webhook config of the task."""
        request = GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        document = await self._transport.call(Operation.GET_PUSH_CONFIG, request)
        return _model(TaskPushNotificationConfig, document)

    async def list_push_configs(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every webhook config of the task."""
        request = ListTaskPushNotificationConfigsRequest(task_id=task_id)
        document = await self._transport.call(Operation.LIST_PUSH_CONFIGS, request)
        return _model(ListTaskPushNotificationConfigsResponse, document).configs

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Remove a webhook config of the task."""
        request = DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        await self._transport.call(Operation.DELETE_PUSH_CONFIG, request)

    async def get_extended_card(self) -> AgentCard:
        """The extended card; with ``card_keys``, one of its signatures must verify."""
        document = await self._transport.call(
            Operation.GET_EXTENDED_CARD, GetExtendedAgentCardRequest()
        )
        return _model(AgentCard, _verified(document, self.card_keys, "the extended card"))

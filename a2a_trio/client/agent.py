"""A2AClient: a connection to one agent, and the operations of the protocol on it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx

from .. import telemetry
from .._http import CLIENT_LIMITS
from ..protocol import (
    PROTOCOL_VERSION,
    AgentCard,
    AgentInterface,
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
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
)
from .cards import card_url, verified
from .grpc_transport import GrpcTransport
from .transports import JsonRpcTransport, RestTransport, Transport, parsed

# Card signatures (cryptography, PyJWT) are imported by the calls that check
# them, as gRPC is (see .grpc_transport): the command line's `send` starts
# without them.
if TYPE_CHECKING:
    from ..protocol.signing import CardKeys

__all__ = ["BINDINGS", "A2AClient"]

#: The bindings this client speaks, in the order it prefers them by default.
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
#: The transport of each binding.
TRANSPORTS: dict[str, type[Transport]] = {
    "JSONRPC": JsonRpcTransport,
    "HTTP+JSON": RestTransport,
    "GRPC": GrpcTransport,
}


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
        transport = TRANSPORTS[interface.protocol_binding]
        self._transport: Transport = telemetry.client_transport(
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
        return parsed(AgentCard, verified(document, card_keys, f"the card at {url}"))

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
                yield parsed(StreamResponse, document)
            return
        answer = parsed(
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
        return parsed(Task, await self._transport.call(Operation.GET_TASK, request))

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
        return parsed(ListTasksResponse, await self._transport.call(Operation.LIST_TASKS, request))

    async def cancel_task(self, task_id: str) -> Task:
        """Ask the agent to stop the task (CancelTask); the task as it stands after."""
        request = CancelTaskRequest(id=task_id)
        return parsed(Task, await self._transport.call(Operation.CANCEL_TASK, request))

    async def subscribe(
        self, task_id: str, *, last_event_id: str | None = None
    ) -> AsyncIterator[StreamResponse]:
        """The task's events until it ends; resume after ``last_event_id`` if given."""
        headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
        async for event_id, document in self._transport.stream(
            Operation.SUBSCRIBE_TO_TASK, SubscribeToTaskRequest(id=task_id), headers
        ):
            self.last_event_id = event_id
            yield parsed(StreamResponse, document)

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
        return parsed(TaskPushNotificationConfig, document)

    async def get_push_config(self, task_id: str, config_id: str) -> TaskPushNotificationConfig:
        """One webhook config of the task."""
        request = GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        document = await self._transport.call(Operation.GET_PUSH_CONFIG, request)
        return parsed(TaskPushNotificationConfig, document)

    async def list_push_configs(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every webhook config of the task."""
        request = ListTaskPushNotificationConfigsRequest(task_id=task_id)
        document = await self._transport.call(Operation.LIST_PUSH_CONFIGS, request)
        return parsed(ListTaskPushNotificationConfigsResponse, document).configs

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Remove a webhook config of the task."""
        request = DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        await self._transport.call(Operation.DELETE_PUSH_CONFIG, request)

    async def get_extended_card(self) -> AgentCard:
        """The extended card; with ``card_keys``, one of its signatures must verify."""
        document = await self._transport.call(
            Operation.GET_EXTENDED_CARD, GetExtendedAgentCardRequest()
        )
        return parsed(AgentCard, verified(document, self.card_keys, "the extended card"))

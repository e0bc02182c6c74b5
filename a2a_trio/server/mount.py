"""One mounted agent: its card, its host, and the operation dispatch both bindings share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..protocol import (
    PROTOCOL_VERSION,
    AgentCard,
    Call,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    Operation,
    ProtoModel,
    SendMessageResponse,
    Task,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from ..protocol.compat_v0_3 import declares_v0_3, says_v0_3
from ..protocol.signing import CardSigner
from ..runtime import AgentHost, Principal, TaskEventStream
from .auth import RequestCredentials
from .cards import ServedCard, signed_card

__all__ = ["AgentMount", "Authenticate", "Empty", "Outcome"]

#: Resolves the caller of a protocol request from its credentials, or raises
#: UnauthenticatedError / ForbiddenError (a :class:`CardGuard` by default).
Authenticate = Callable[[RequestCredentials], Awaitable[Principal]]


class Empty(ProtoModel):
    """``google.protobuf.Empty``: the answer of DeleteTaskPushNotificationConfig."""


#: What an operation produces: one response object, or a stream of events.
Outcome = ProtoModel | TaskEventStream


@dataclass
class AgentMount:
    """An agent mounted under ``prefix``, with the name its routes carry."""

    name: str
    prefix: str
    card: ServedCard
    host: AgentHost
    well_known: bool
    authenticate: Authenticate
    extended_card: AgentCard | None = None
    #: True when the card declares security schemes: the extended card then
    #: goes only to authenticated callers.
    secured: bool = False
    #: The ``WWW-Authenticate`` challenge of the card's schemes.
    challenge: str = ""
    #: Signs the extended card (the public card's signer is ``card.signer``).
    signer: CardSigner | None = None
    #: Serve protocol 0.3 too: its method names and paths, and its card keys.
    compat_v0_3: bool = True
    #: Answer a card request that names no protocol version (0.3 clients'
    #: default resolution) with the card holding the 0.3 keys too.
    default_card_v0_3: bool = False
    #: Serve the gRPC binding too (A2AService, by this agent's tenant).
    grpc: bool = True
    #: Signed extended cards by base URL, and the extended card they were made from.
    _signed_extended: dict[str, AgentCard] = field(default_factory=dict)
    _signed_from: AgentCard | None = None

    @property
    def public_card(self) -> AgentCard:
        return self.card.card

    def card_is_v0_3(self, version: str | None) -> bool:
        """Whether a default card path request naming ``version`` gets the 0.3 form.

        A 1.x client names its version (both official SDKs send
        ``A2A-Version: 1.0`` when they resolve a card) and gets the 1.0 card,
        which may hold no other keys. A request naming 0.3 gets the card
        with the 0.3 keys. One naming none is a 0.3 client's (spec 3.6.2),
        or a client that does not follow the spec's MUST (the conformance
        kit fetches the card so and validates the strict 1.0 schema): it
        gets the 0.3 form only when this agent says it expects 0.3 readers
        there (``default_card_v0_3``, or a 0.3 interface in its card, as
        a2a-sdk 1.3 decides).
        """
        if not self.compat_v0_3 or not says_v0_3(version):
            return False
        if (version or "").strip():
            return True
        return self.default_card_v0_3 or declares_v0_3(self.public_card)

    def _required_extensions(self) -> list[str]:
        extensions = self.public_card.capabilities.extensions or []
        return [ext.uri for ext in extensions if ext.required and ext.uri]

    def _check_extensions(self, requested: frozenset[str]) -> None:
        missing = [uri for uri in self._required_extensions() if uri not in requested]
        if missing:
            raise ExtensionSupportRequiredError(
                "This agent requires the client to support extension(s): "
                + ", ".join(missing)
                + " (declare them in the A2A-Extensions header)",
                metadata={"extensions": ",".join(missing)},
            )

    def get_extended_card(self, base_url: str, caller: Principal) -> AgentCard:
        if not self.public_card.capabilities.extended_agent_card:
            raise UnsupportedOperationError("This agent does not offer an extended agent card")
        if self.secured and not caller.authenticated:
            error = UnauthenticatedError("The extended agent card is for authenticated callers")
            error.challenge = self.challenge  # type: ignore[attr-defined]
            raise error
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError(
                "This agent declares an extended agent card but none is configured"
            )
        if self.signer is None:
            return self._complete_extended(self.extended_card, base_url)
        if self._signed_from is not self.extended_card:
            self._signed_extended.clear()
            self._signed_from = self.extended_card
        signed = self._signed_extended.get(base_url)
        if signed is None:
            if len(self._signed_extended) > 64:  # many Host headers: do not grow without bound
                self._signed_extended.clear()
            complete = self._complete_extended(self.extended_card, base_url)
            signed = self._signed_extended[base_url] = signed_card(complete, self.signer)
        return signed

    def _complete_extended(self, card: AgentCard, base_url: str) -> AgentCard:
        if card.supported_interfaces:
            return card
        interfaces = self.card.complete(base_url).supported_interfaces
        return card.model_copy(update={"supported_interfaces": interfaces})

    async def dispatch(
        self,
        call: Call,
        caller: Principal,
        *,
        extensions: frozenset[str] = frozenset(),
        last_event_id: int | None = None,
        base_url: str = "",
        version: str = PROTOCOL_VERSION,
    ) -> Outcome:
        """Run one operation. Both bindings call this and only render the outcome.

        ``version`` is the protocol the caller speaks; only push configs keep
        it, so that their webhooks carry the body that version expects.
        """
        host, request = self.host, call.request
        match call.operation:
            case Operation.SEND_MESSAGE:
                self._check_extensions(extensions)
                answer = await host.send_message(request, caller, extensions, protocol=version)
                if isinstance(answer, Task):
                    return SendMessageResponse(task=answer)
                return SendMessageResponse(message=answer)
            case Operation.SEND_STREAMING_MESSAGE:
                self._check_extensions(extensions)
                return await host.stream_message(request, caller, extensions, protocol=version)
            case Operation.GET_TASK:
                return await host.get_task(request, caller)
            case Operation.LIST_TASKS:
                return await host.list_tasks(request, caller)
            case Operation.CANCEL_TASK:
                return await host.cancel_task(request, caller)
            case Operation.SUBSCRIBE_TO_TASK:
                return await host.subscribe(request, caller, last_event_id)
            case Operation.CREATE_PUSH_CONFIG:
                return await host.create_push_config(request, caller, protocol=version)
            case Operation.GET_PUSH_CONFIG:
                return await host.get_push_config(request, caller)
            case Operation.LIST_PUSH_CONFIGS:
                return await host.list_push_configs(request, caller)
            case Operation.DELETE_PUSH_CONFIG:
                await host.delete_push_config(request, caller)
                return Empty()
            case Operation.GET_EXTENDED_CARD:
                return self.get_extended_card(base_url, caller)
        raise AssertionError(f"unhandled operation {call.operation}")  # pragma: no cover

"""The client's gRPC transport: A2AService over HTTP/2 connections of our own.

gRPC (h2, protobuf) is imported by the calls that use it: a JSON-RPC or
HTTP+JSON client, the command line's ``send`` included, starts without it.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel

from .. import telemetry
from ..protocol import (
    A2AError,
    AgentInterface,
    InvalidAgentResponseError,
    Operation,
    error_from_code,
)
from .transports import Transport, parsed

if TYPE_CHECKING:
    from .._grpc_channel import GrpcCallError, GrpcChannel
    from ..protocol.grpc_wire import GrpcMethod

__all__ = ["GrpcTransport"]


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
    from ..protocol.grpc_wire import METHODS

    return {method.operation: method for method in METHODS.values()}


class GrpcTransport(Transport):
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
        from .._grpc_channel import GrpcChannel

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
        from ..protocol.protobuf import to_proto

        return to_proto(request).SerializeToString()

    @staticmethod
    def _document(response: str, data: bytes) -> Any:
        if response == "Empty":
            return {}
        from ..protocol.protobuf import MODELS, decode_message, proto_fields

        try:
            return parsed(MODELS[response], proto_fields(decode_message(data, response))).to_wire()
        except A2AError as error:
            raise InvalidAgentResponseError(f"unexpected {response}: {error.message}") from None

    async def call(self, operation: Operation, request: BaseModel) -> Any:
        from .._grpc_channel import GrpcCallError

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
        from .._grpc_channel import GrpcCallError

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

    from ..protocol.grpc_wire import GrpcStatus, decode_status_details, error_from_status

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

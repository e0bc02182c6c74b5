"""The gRPC binding (spec 10): A2AService over hypercorn's HTTP/2, straight from ASGI.

A request on HTTP/2 whose content type is ``application/grpc`` (or
``+proto``) is a gRPC call; :class:`~a2a_trio.server.app.A2AApp` hands it
here before any other route. Like the JSON bindings, this module parses,
authenticates, calls :meth:`AgentMount.dispatch` and renders; the operations
are the same ones, so the three bindings cannot drift apart.

Which agent a call reaches: every request message of a2a.proto has a
``tenant`` field, and the official clients fill it from the ``tenant`` of the
card's GRPC interface. An agent's tenant is its mount prefix without the
leading slash (``echo`` for ``/echo``); its name is accepted too, and an empty
tenant reaches the agent mounted at the root (or, without one, the agent
owning ``/.well-known/agent-card.json``).

The call's status always travels in trailers (ASGI ``http.response.trailers``);
a call that fails before its first message has no message, only trailers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio
from google.protobuf.message import Message
from google.rpc import status_pb2

from .. import telemetry
from ..protocol import PROTOCOL_VERSION, A2AError, Operation
from ..protocol.grpc_wire import (
    ACCEPT_ENCODING,
    GRPC_CONTENT_TYPES,
    GrpcError,
    GrpcMethod,
    GrpcStatus,
    error_status,
    frame,
    method_at,
    parse_timeout,
    read_frames,
    status_trailers,
)
from ..protocol.operations import validate_params
from ..protocol.protobuf import decode_message, proto_fields, to_proto
from ..protocol.versions import negotiate_version
from ..runtime import TaskEventStream
from .asgi import ClientGone, ProtocolRequest, Receive, Scope, Send
from .bindings import ServerSettings, _extensions, base_url, credentials_of
from .body_budget import BodyBudget, unbudgeted
from .failures import answer_for
from .mount import AgentMount

__all__ = ["is_grpc", "serve_grpc"]

log = logging.getLogger("a2a_trio.server")

#: Finds the agent a call names in its ``tenant`` field (None: no such agent).
Tenants = Callable[[str], AgentMount | None]

_GRPC_VERSIONS = frozenset({PROTOCOL_VERSION})
#: Every answer's head (hypercorn copies it).
_HEAD = (
    (b"content-type", b"application/grpc"),
    (b"grpc-accept-encoding", ACCEPT_ENCODING.encode()),
)


def is_grpc(scope: Scope) -> bool:
    """True for a gRPC call: HTTP/2 and a gRPC content type."""
    if scope.get("http_version") != "2":
        return False
    for name, value in scope["headers"]:
        if name == b"content-type":
            mime = value.split(b";", 1)[0].strip().lower().decode("latin-1")
            return mime in GRPC_CONTENT_TYPES
    return False


class _Reply:
    """The response of one call: headers once, messages, then the status trailers."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False
        #: What the metrics count the call under, once known.
        self.agent = "unknown"
        self.operation = "unknown"
        #: When the response began (its headers went out), by time.perf_counter().
        self.started_at: float | None = None
        self._ended = False

    async def start(self) -> None:
        if not self.started:
            self.started = True
            self.started_at = time.perf_counter()
            await self._send(
                {"type": "http.response.start", "status": 200, "headers": _HEAD, "trailers": True}
            )

    async def message(self, message: Message, *, last: bool = False) -> None:
        """One message; ``last``: the body ends with it (a unary answer), trailers follow."""
        await self.start()
        body = frame(message.SerializeToString())
        self._ended = last
        await self._send({"type": "http.response.body", "body": body, "more_body": not last})

    async def finish(
        self, code: GrpcStatus, text: str = "", details: status_pb2.Status | None = None
    ) -> None:
        await self.start()
        if not self._ended:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})
        await self._send(
            {
                "type": "http.response.trailers",
                "headers": status_trailers(code, text, details),
                "more_trailers": False,
            }
        )


async def serve_grpc(
    scope: Scope,
    receive: Receive,
    send: Send,
    tenants: Tenants,
    settings: ServerSettings,
    observer: Callable[[str, str, str, str, float], None] | None = None,
    budget: BodyBudget | None = None,
    guard: AgentMount | None = None,
) -> None:
    """Answer one gRPC call, whatever happens to it.

    ``observer`` is told of it as the JSON bindings tell theirs (binding
    ``grpc``; the time is until the response began: a stream's first message).
    The call holds its share of ``budget`` (its body, then what decoding it
    costs) until it ends; past the budget it ends RESOURCE_EXHAUSTED. A call
    to a tenant no agent serves is authenticated as ``guard``'s calls are (a
    secured agent's), so that an unauthenticated caller gets the same answer
    for an unknown tenant as for a real one: it learns no agent's name.
    """
    with budget.share() if budget is not None else unbudgeted() as share:
        request = ProtocolRequest(scope, receive, share)
        await _serve(request, receive, send, tenants, settings, observer, guard)


async def _serve(
    request: ProtocolRequest,
    receive: Receive,
    send: Send,
    tenants: Tenants,
    settings: ServerSettings,
    observer: Callable[[str, str, str, str, float], None] | None,
    guard: AgentMount | None,
) -> None:
    began = time.perf_counter()
    scope = request.scope
    reply = _Reply(send)
    code, text, details = GrpcStatus.OK, "", None
    outcome = "ok"
    try:
        method = method_at(scope["path"])
        timeout = parse_timeout(request.header("grpc-timeout"))
        if timeout is None:  # no deadline: no cancel scope
            await _call(request, receive, method, tenants, settings, reply, guard)
        else:
            with trio.move_on_after(timeout) as deadline:
                await _call(request, receive, method, tenants, settings, reply, guard)
            if deadline.cancelled_caught:
                code, text = GrpcStatus.DEADLINE_EXCEEDED, "Deadline exceeded"
    except ClientGone:
        outcome = "client_gone"
    except A2AError as error:
        code, details = error_status(error)
        text, outcome = error.message, error.spec.reason
    except GrpcError as error:
        code, text, outcome = error.status, error.message, error.status.name
    except Exception as failure:
        answer = answer_for(failure, log, "gRPC call failed")
        code, details = error_status(answer)
        text, outcome = details.message, answer.spec.reason
    if outcome == "ok" and code is GrpcStatus.DEADLINE_EXCEEDED:
        outcome = code.name
    if observer is not None:
        ended = reply.started_at if reply.started_at is not None else time.perf_counter()
        observer(reply.agent, "grpc", reply.operation, outcome, ended - began)
    if outcome != "client_gone":
        await reply.finish(code, text, details)


async def _call(
    request: ProtocolRequest,
    receive: Receive,
    method: GrpcMethod,
    tenants: Tenants,
    settings: ServerSettings,
    reply: _Reply,
    guard: AgentMount | None,
) -> None:
    reply.operation = method.operation.value
    # Held for the body, the message and the fields read from it.
    body = await request.body(settings.max_body_bytes, settings.body_timeout, cost=3)
    messages = read_frames(body)
    if len(messages) != 1:
        raise GrpcError(
            GrpcStatus.UNIMPLEMENTED if messages else GrpcStatus.INTERNAL,
            f"{method.operation.value} takes exactly one request message, not {len(messages)}",
        )
    message = decode_message(messages[0], method.request)
    version = request.header("a2a-version")
    if version is not None and version.strip():
        negotiate_version(version, supported=_GRPC_VERSIONS)
    tenant: str = getattr(message, "tenant", "")
    mount = tenants(tenant)
    if mount is None:
        if guard is not None:  # UNAUTHENTICATED as from a real agent, if it is
            await guard.authenticate(credentials_of(request))
        raise GrpcError(GrpcStatus.NOT_FOUND, f"No agent serves the tenant {tenant!r}")
    reply.agent = mount.name
    outcome = await _perform(request, mount, settings, method.operation, message)
    if isinstance(outcome, TaskEventStream):
        await _relay(outcome, receive, reply)
    else:
        await reply.message(to_proto(outcome), last=True)


async def _perform(
    request: ProtocolRequest,
    mount: AgentMount,
    settings: ServerSettings,
    operation: Operation,
    message: Message,
) -> Any:
    """Authenticate, validate, run: what the JSON bindings' ``_perform`` does."""
    caller = await mount.authenticate(credentials_of(request))
    call = validate_params(operation, proto_fields(message), mount.host.settings.limits)
    dispatch: Callable[[], Awaitable[Any]] = partial(
        mount.dispatch,
        call,
        caller,
        extensions=_extensions(request),
        base_url=base_url(request, settings),
        version=PROTOCOL_VERSION,
    )
    dispatch = telemetry.operation(dispatch, request, mount, call, PROTOCOL_VERSION, "grpc")
    if operation is Operation.SEND_MESSAGE:
        # As on the JSON bindings: a client that gives up on a blocking call is seen to.
        return await request.while_connected(dispatch)
    return await dispatch()


async def _relay(stream: TaskEventStream, receive: Receive, reply: _Reply) -> None:
    """Each recorded event as one StreamResponse message, until the stream ends.

    A client that leaves ends the relay (:class:`ClientGone`), never the task:
    the stream lets go of it and the task goes on. An error that ends the
    stream (see :meth:`TaskEventStream.receive`) is raised, for its status.
    """
    ended = False
    failure: A2AError | None = None
    try:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            await reply.start()
            while True:
                try:
                    _, event, _ = await stream.receive_rendered()
                except trio.EndOfChannel:
                    ended = True
                    break
                except A2AError as error:  # raised out here: a nursery would wrap it
                    ended, failure = True, error
                    break
                await reply.message(to_proto(event))
            nursery.cancel_scope.cancel()
    finally:
        stream.close()
    if not ended:
        raise ClientGone
    if failure is not None:
        raise failure

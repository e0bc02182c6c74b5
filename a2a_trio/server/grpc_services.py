"""Health and reflection over gRPC, on the port and the HTTP/2 that serve A2AService.

``grpc.health.v1.Health/Check`` answers SERVING while ``/_a2a/health/ready``
would answer 200 and NOT_SERVING otherwise (the database down, an agent
stopped), for the server as a whole (``""``) and for each service it lists;
``Watch`` sends the status, then each change. ``ServerReflectionInfo`` (v1
and v1alpha) is a bidirectional stream: each request is answered as soon as
it has arrived, as grpcio's reflection client, which sends one request and
waits for its answer, needs. The messages and answers are
:mod:`a2a_trio.protocol.grpc_services`; this module only does the I/O.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import trio

from ..protocol.grpc_services import (
    HEALTH_SERVICE,
    STANDARD_SERVICES,
    ReflectionSession,
    ServingStatus,
    health_request_service,
    health_response,
    served_services,
)
from ..protocol.grpc_wire import FrameError, GrpcError, GrpcStatus, take_frames
from .asgi import ClientGone, Receive, Scope, Send, _cancel_on_disconnect
from .grpc_binding import _Reply

__all__ = ["WATCH_INTERVAL", "is_standard_service", "serve_standard_service"]

log = logging.getLogger("a2a_trio.server")

#: Whether the server takes work now (the readiness check).
Ready = Callable[[], Awaitable[bool]]

#: Seconds between two readiness checks of a Health/Watch stream.
WATCH_INTERVAL = 5.0
#: The largest request message these services read (their requests are names).
MAX_REQUEST_BYTES = 64 * 1024


def is_standard_service(path: str) -> bool:
    """True for a call to health or reflection (``/grpc.health.v1.Health/Check``, ...)."""
    return path.split("/", 2)[1] in STANDARD_SERVICES if path.count("/") >= 2 else False


async def serve_standard_service(scope: Scope, receive: Receive, send: Send, ready: Ready) -> None:
    """Answer one call to health or reflection, whatever happens to it."""
    reply = _Reply(send)
    code, text = GrpcStatus.OK, ""
    _, service, method = scope["path"].split("/", 2)
    try:
        if service == HEALTH_SERVICE and method == "Check":
            await _check(receive, reply, ready)
        elif service == HEALTH_SERVICE and method == "Watch":
            await _watch(receive, reply, ready)
        elif service != HEALTH_SERVICE and method == "ServerReflectionInfo":
            await _reflect(receive, reply, service.split(".")[2])
        else:
            raise GrpcError(GrpcStatus.UNIMPLEMENTED, f"Method not found: {scope['path']}")
    except ClientGone:
        return
    except GrpcError as error:
        code, text = error.status, error.message
    except Exception:
        log.exception("gRPC %s call failed", service)
        code, text = GrpcStatus.INTERNAL, "Internal error"
    await reply.finish(code, text)


async def _requests(receive: Receive) -> AsyncIterator[bytes]:
    """Each request message as soon as it has arrived, until the client's stream ends."""
    buffer = bytearray()
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            raise ClientGone
        buffer += event.get("body", b"")
        if len(buffer) > MAX_REQUEST_BYTES:
            raise GrpcError(GrpcStatus.RESOURCE_EXHAUSTED, "Request message too large")
        for message in take_frames(buffer):
            yield message
        if not event.get("more_body", False):
            if buffer:
                raise FrameError(GrpcStatus.INTERNAL, "Truncated gRPC message")
            return


async def _one_request(receive: Receive) -> bytes:
    messages = [message async for message in _requests(receive)]
    if len(messages) != 1:
        raise GrpcError(GrpcStatus.INTERNAL, f"expected one request message, not {len(messages)}")
    return messages[0]


def _known(service: str) -> bool:
    return service == "" or service in served_services()


async def _status(ready: Ready) -> ServingStatus:
    return ServingStatus.SERVING if await ready() else ServingStatus.NOT_SERVING


async def _check(receive: Receive, reply: _Reply, ready: Ready) -> None:
    service = health_request_service(await _one_request(receive))
    if not _known(service):
        raise GrpcError(GrpcStatus.NOT_FOUND, f"unknown service {service!r}")
    await reply.message(health_response(await _status(ready)))


async def _watch(receive: Receive, reply: _Reply, ready: Ready) -> None:
    """The status now, then each change, until the client leaves (the health protocol)."""
    service = health_request_service(await _one_request(receive))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
        if not _known(service):
            # The protocol keeps the stream open: the service may appear later.
            await reply.message(health_response(ServingStatus.SERVICE_UNKNOWN))
            await trio.sleep_forever()
        sent: ServingStatus | None = None
        while True:
            status = await _status(ready)
            if status != sent:
                await reply.message(health_response(status))
                sent = status
            await trio.sleep(WATCH_INTERVAL)
    raise ClientGone


async def _reflect(receive: Receive, reply: _Reply, version: str) -> None:
    session = ReflectionSession(version)
    async for message in _requests(receive):
        await reply.message(session.answer(message))

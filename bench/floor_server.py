"""The HTTP stack alone: ``python -m bench.floor_server PORT IGNORED``.

hypercorn's trio worker, configured as for a2a-trio, in front of a bare ASGI
app that does no A2A work and stores nothing: it reads the body, decodes the
JSON and answers what the wrk script checks for (the card's name, a
COMPLETED task, a stream of four events ending COMPLETED). Run beside
a2a-trio, it shows what this machine's core can do through the same HTTP
layer at that moment: the ceiling a2a-trio's figures are measured against.

A gRPC call (HTTP/2, ``application/grpc``) is answered the same way: its
request message parsed by protobuf, a canned ``SendMessageResponse`` holding a
COMPLETED task, ``grpc-status: 0`` in trailers; the card names the GRPC
interface, as a2a-trio's does, for :mod:`bench.grpc_load`. Its HTTP/2 is
hypercorn's as a2a-trio serves it (:mod:`a2a_trio.server.hypercorn_h2`'s
mended protocol, :mod:`a2a_trio.server.h2_header_checks`): unmended,
hypercorn's HTTP/2 fails a connection after 1,000 answers ended by trailers
(that module's fault 1).
"""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from a2a_trio.protocol.grpc_wire import frame
from a2a_trio.protocol.proto import a2a_pb2
from a2a_trio.server import h2_header_checks, hypercorn_h2
from a2a_trio.server.serving import KEEP_ALIVE_TIMEOUT

from .common import (
    CARD_NAME,
    CARD_PATH,
    COMPLETED,
    SUBMITTED,
    WORKING,
    raise_nofile_limit,
)

_GRPC_ANSWER = frame(
    a2a_pb2.SendMessageResponse(
        task=a2a_pb2.Task(
            id="t",
            context_id="c",
            status=a2a_pb2.TaskStatus(state=a2a_pb2.TaskState.TASK_STATE_COMPLETED),
        )
    ).SerializeToString()
)
_TASK = {"id": "t", "contextId": "c", "status": {"state": COMPLETED}}
_EVENTS = [
    {"task": {"id": "t", "contextId": "c", "status": {"state": SUBMITTED}}},
    {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": WORKING}}},
    {"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {"parts": [{"text": "x"}]}}},
    {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": COMPLETED}}},
]


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] == "GET" and scope["path"] == CARD_PATH:
        await _answer(send, "application/json", _card(scope["server"][1]))
        return
    body = await _body(receive)
    if scope["http_version"] == "2" and (b"content-type", b"application/grpc") in scope["headers"]:
        await _answer_grpc(send, body)
        return
    document = json.loads(body)
    if scope["path"].startswith("/rest/"):
        await _answer(send, "application/json", json.dumps({"task": _TASK}).encode())
    elif document.get("method") == "SendStreamingMessage":
        results = [{"jsonrpc": "2.0", "id": document["id"], "result": e} for e in _EVENTS]
        frames = "".join(
            f"id: {n}\ndata: {json.dumps(result)}\n\n" for n, result in enumerate(results, 1)
        )
        await _answer(send, "text/event-stream", frames.encode(), streamed=True)
    else:
        answer = {"jsonrpc": "2.0", "id": document.get("id"), "result": {"task": _TASK}}
        await _answer(send, "application/json", json.dumps(answer).encode())


@cache
def _card(port: int) -> bytes:
    """The card: the name the wrk script checks, and the GRPC interface on ``port``."""
    grpc = {"protocolBinding": "GRPC", "protocolVersion": "1.0", "url": f"127.0.0.1:{port}"}
    return json.dumps(
        {"name": CARD_NAME, "version": "1.0.0", "supportedInterfaces": [grpc]}
    ).encode()


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _answer_grpc(send: Any, body: bytes) -> None:
    a2a_pb2.SendMessageRequest.FromString(body[5:])  # parsed, as a server must
    head = [(b"content-type", b"application/grpc")]
    await send({"type": "http.response.start", "status": 200, "headers": head, "trailers": True})
    await send({"type": "http.response.body", "body": _GRPC_ANSWER, "more_body": False})
    trailers = [(b"grpc-status", b"0")]
    await send({"type": "http.response.trailers", "headers": trailers, "more_trailers": False})


async def _answer(send: Any, content_type: str, body: bytes, *, streamed: bool = False) -> None:
    headers = [(b"content-type", content_type.encode())]
    if not streamed:
        headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python -m bench.floor_server PORT IGNORED")
    raise_nofile_limit()
    port = int(argv[0])
    hypercorn_h2.install()
    h2_header_checks.install()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.backlog = 4096
    config.accesslog = None
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT  # as a2a-trio serve and docs/deployment.md
    trio.run(serve, app, config)


if __name__ == "__main__":
    main(sys.argv[1:])

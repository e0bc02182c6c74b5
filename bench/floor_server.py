"""The HTTP stack alone: ``python -m bench.floor_server PORT IGNORED``.

hypercorn's trio worker, configured as for a2a-trio, in front of a bare ASGI
app that does no A2A work and stores nothing: it reads the body, decodes the
JSON and answers what the wrk script checks for (the card's name, a
COMPLETED task, a stream of four events ending COMPLETED). Run beside
a2a-trio, it shows what this machine's core can do through the same HTTP
layer at that moment: the ceiling a2a-trio's figures are measured against.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from .common import (
    CARD_NAME,
    CARD_PATH,
    COMPLETED,
    SUBMITTED,
    WORKING,
    raise_nofile_limit,
)

_CARD = json.dumps({"name": CARD_NAME, "version": "1.0.0"}).encode()
_TASK = {"id": "t", "contextId": "c", "status": {"state": COMPLETED}}
_EVENTS = [
    {"task": {"id": "t", "contextId": "c", "status": {"state": SUBMITTED}}},
    {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": WORKING}}},
    {"artifactUpdate": {"taskId": "t", "contextId": "c", "artifact": {"parts": [{"text": "x"}]}}},
    {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": COMPLETED}}},
]


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] == "GET" and scope["path"] == CARD_PATH:
        await _answer(send, "application/json", _CARD)
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    document = json.loads(b"".join(chunks))
    if scope["path"].startswith("/rest/"):
        await _answer(send, "application/json", json.dumps({"task": _TASK}).encode())
    elif document.get("method") == "SendStreamingMessage":
        results = [{"jsonrpc": "2.0", "id": document["id"], "result": e} for e in _EVENTS]
        frames = "".join(
            f"id: {n}\ndata: {json.dumps(result)}\n\n" for n, result in enumerate(results, 1)
        )
        await _answer(send, "text/event-stream", frames.encode(), streamed=True)
    else:
        body = {"jsonrpc": "2.0", "id": document.get("id"), "result": {"task": _TASK}}
        await _answer(send, "application/json", json.dumps(body).encode())


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
    config = Config()
    config.bind = [f"127.0.0.1:{int(argv[0])}"]
    config.backlog = 4096
    config.accesslog = None
    trio.run(serve, app, config)


if __name__ == "__main__":
    main(sys.argv[1:])

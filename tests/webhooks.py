"""A real webhook receiver for tests: HTTP on 127.0.0.1, every request recorded.

::

    async with webhook_receiver(Reply(503), Reply(503)) as hook:
        ...register hook.url_for("/hook") as a webhook...
        first, second, third = await hook.wait_for(3)

The receiver is a tiny ASGI app served by ``hypercorn.trio.serve`` on a free
port, in a nursery of the caller's trio run, so it shares the run's clock: a
``Reply(delay=...)`` sleeps on trio's clock, and every recorded time is
``trio.current_time()``. Replies are scripted: the ones given are used in
order, one per request, then :attr:`WebhookReceiver.default` (which a test may
change at any time).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, HTTPResponseStartEvent, Scope

__all__ = ["Received", "Reply", "WebhookReceiver", "webhook_receiver"]


@dataclass(frozen=True)
class Reply:
    """How the receiver answers one request: after ``delay`` seconds (trio's clock)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


@dataclass
class Received:
    """One request as it arrived, and what it was answered."""

    #: trio.current_time() when the whole body had arrived.
    at: float
    method: str
    path: str
    #: Lowercased names; repeated headers joined with ", ".
    headers: dict[str, str]
    body: bytes
    reply: Reply
    #: trio.current_time() when the answer was sent; None while the reply waits
    #: out its delay (or if the sender went away first).
    answered_at: float | None = None

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def notification_id(self) -> str:
        return self.headers["x-a2a-notification-id"]


class WebhookReceiver:
    """The running receiver: its address, its script and what it received."""

    def __init__(self, replies: tuple[Reply, ...], default: Reply) -> None:
        self.base_url = ""
        self.default = default
        self.requests: list[Received] = []
        self._script: deque[Reply] = deque(replies)
        self._arrival = trio.Event()

    def url_for(self, path: str = "/hook") -> str:
        """The URL of ``path`` on this receiver (every path is answered alike)."""
        return self.base_url + path

    @property
    def url(self) -> str:
        return self.url_for()

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with ``replies``, in order, before the default."""
        self._script.extend(replies)

    def on_path(self, path: str) -> list[Received]:
        return [request for request in self.requests if request.path == path]

    async def wait_for(self, count: int, path: str | None = None) -> list[Received]:
        """Wait until ``count`` requests (to ``path``, if given) have arrived; returns them."""
        while True:
            arrived = self.requests if path is None else self.on_path(path)
            if len(arrived) >= count:
                return arrived[:count]
            await self._arrival.wait()

    async def wait_answered(self, count: int, path: str | None = None) -> list[Received]:
        """Like :meth:`wait_for`, and until each of those requests has been answered."""
        while True:
            arrived = await self.wait_for(count, path)
            if all(request.answered_at is not None for request in arrived):
                return arrived
            await self._arrival.wait()

    def _changed(self) -> None:
        self._arrival.set()
        self._arrival = trio.Event()

    # --- the ASGI app -------------------------------------------------------------

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the sender went away
            body += message["body"]
            if not message["more_body"]:
                break
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        reply = self._script.popleft() if self._script else self.default
        received = Received(
            at=trio.current_time(),
            method=scope["method"],
            path=scope["path"],
            headers=headers,
            body=bytes(body),
            reply=reply,
        )
        self.requests.append(received)
        self._changed()
        if reply.delay:
            await trio.sleep(reply.delay)
        response_headers = [(b"content-length", str(len(reply.body)).encode())]
        response_headers += [(k.encode(), v.encode()) for k, v in reply.headers.items()]
        start: HTTPResponseStartEvent = {
            "type": "http.response.start",
            "status": reply.status,
            "headers": response_headers,
        }
        await send(start)
        await send({"type": "http.response.body", "body": reply.body, "more_body": False})
        received.answered_at = trio.current_time()
        self._changed()


@asynccontextmanager
async def webhook_receiver(
    *replies: Reply, default: Reply | None = None
) -> AsyncIterator[WebhookReceiver]:
    """Serve a receiver on a free 127.0.0.1 port until the block ends.

    ``replies`` answer the first requests, in order; every later request gets
    ``default`` (200 with an empty body unless given).
    """
    receiver = WebhookReceiver(replies, default or Reply())
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(receiver, config, task_status=task_status)
        )
        receiver.base_url = binds[0]
        try:
            yield receiver
        finally:
            # Replies still waiting out a delay are abandoned with the server.
            nursery.cancel_scope.cancel()

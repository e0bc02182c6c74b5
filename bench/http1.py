"""Minimal HTTP/1.1 on trio sockets for the Python cases: a client and a webhook receiver.

The client (:class:`Http1Client`) is one keep-alive connection parsed by h11:
cheap enough to hold thousands of SSE streams open and to drive a few hundred
blocking requests at a time without being the bottleneck. The receiver
(:class:`WebhookReceiver`) is a hand-rolled server that records every POST
and answers 200 at once, or after a delay on ``/slow/...`` paths.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import h11
import trio

from .common import PROTOCOL_VERSION, VERSION_HEADER

__all__ = [
    "Delivery",
    "Http1Client",
    "HttpError",
    "HttpResponse",
    "WebhookReceiver",
    "first_sse_event",
]

RECEIVE_SIZE = 65536


class HttpError(RuntimeError):
    """The connection closed or the peer broke HTTP/1.1."""


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def first_sse_event(buffer: bytes) -> dict[str, Any] | None:
    """The JSON ``data`` of the first complete SSE event in ``buffer``, if one is complete."""
    text = buffer.replace(b"\r\n", b"\n")
    end = text.find(b"\n\n")
    while end == 0:  # blank lines before the first event
        text = text[2:]
        end = text.find(b"\n\n")
    if end < 0:
        return None
    lines = text[:end].split(b"\n")
    data = b"\n".join(line[5:].lstrip(b" ") for line in lines if line.startswith(b"data:"))
    if not data:  # a comment or keep-alive without data: skip it
        return first_sse_event(text[end + 2 :])
    document: dict[str, Any] = json.loads(data)
    return document


class Http1Client:
    """One HTTP/1.1 keep-alive connection to 127.0.0.1:``port``."""

    def __init__(self, stream: trio.SocketStream, port: int) -> None:
        self.stream = stream
        self._port = port
        self._host = f"127.0.0.1:{port}"
        self._h11 = h11.Connection(h11.CLIENT)

    @classmethod
    async def connect(cls, port: int) -> Http1Client:
        return cls(await trio.open_tcp_stream("127.0.0.1", port), port)

    async def aclose(self) -> None:
        await self.stream.aclose()

    def _headers(self, body: bytes, accept: str) -> list[tuple[str, str]]:
        return [
            ("Host", self._host),
            ("Content-Type", "application/json"),
            ("Accept", accept),
            (VERSION_HEADER, PROTOCOL_VERSION),
            ("Content-Length", str(len(body))),
        ]

    async def _send(self, method: str, path: str, body: bytes, accept: str) -> None:
        wire = self._h11.send(
            h11.Request(method=method, target=path, headers=self._headers(body, accept))
        )
        wire = (wire or b"") + (self._h11.send(h11.Data(data=body)) or b"")
        wire += self._h11.send(h11.EndOfMessage()) or b""
        await self.stream.send_all(wire)

    async def _next_event(self) -> Any:
        while True:
            event = self._h11.next_event()
            if event is not h11.NEED_DATA:
                if isinstance(event, h11.ConnectionClosed):
                    raise HttpError("the server closed the connection")
                return event
            self._h11.receive_data(await self.stream.receive_some(RECEIVE_SIZE))

    async def request(self, method: str, path: str, document: Any) -> HttpResponse:
        """Send ``document`` as JSON and read the whole answer; the connection stays open."""
        await self._send(method, path, json.dumps(document).encode(), "application/json")
        status = 0
        chunks: list[bytes] = []
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
        else:
            # The server ends the connection after this answer (hypercorn does
            # after keep_alive_max_requests, 1,000): the next request goes on a
            # new one, as wrk's or a browser's would.
            await self.stream.aclose()
            self.stream = await trio.open_tcp_stream("127.0.0.1", self._port)
            self._h11 = h11.Connection(h11.CLIENT)
        return HttpResponse(status, b"".join(chunks))

    async def open_event_stream(self, path: str, document: Any) -> tuple[int, dict[str, Any]]:
        """POST ``document`` asking for SSE and read until the first event arrives.

        Returns the status and the first event's JSON. The stream stays open
        (the rest of it is never read); close it with :meth:`aclose`.
        """
        await self._send("POST", path, json.dumps(document).encode(), "text/event-stream")
        status = 0
        buffer = b""
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                buffer += bytes(event.data)
                first = first_sse_event(buffer)
                if first is not None:
                    return status, first
            elif isinstance(event, h11.EndOfMessage):
                raise HttpError(
                    f"the stream ended before its first event: {status} {buffer[:300]!r}"
                )


# --- the webhook receiver --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivery:
    """One webhook POST as received."""

    time: float
    path: str
    token: str | None
    body: bytes


@dataclass
class WebhookReceiver:
    """A fast HTTP/1.1 server on 127.0.0.1 that records POSTs and answers 200.

    Keep-alive, Content-Length and chunked request bodies are supported (all
    that webhook senders use). Paths starting with ``/slow`` answer only after
    ``slow_delay`` seconds.
    """

    slow_delay: float = 3.0
    deliveries: list[Delivery] = field(default_factory=list)
    port: int = 0

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on a free 127.0.0.1 port; ``nursery.start`` returns the port."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1", backlog=1024)
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._handle, listeners)
            task_status.started(self.port)

    async def _handle(self, stream: trio.SocketStream) -> None:
        buffer = bytearray()
        try:
            while True:
                head_end = buffer.find(b"\r\n\r\n")
                while head_end < 0:
                    data = await stream.receive_some(RECEIVE_SIZE)
                    if not data:
                        return
                    buffer += data
                    head_end = buffer.find(b"\r\n\r\n")
                head = bytes(buffer[:head_end]).decode("latin-1").split("\r\n")
                del buffer[: head_end + 4]
                _method, path, _version = head[0].split(" ", 2)
                headers = {}
                for line in head[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    body = await self._read_chunked(stream, buffer)
                else:
                    length = int(headers.get("content-length", "0"))
                    while len(buffer) < length:
                        data = await stream.receive_some(RECEIVE_SIZE)
                        if not data:
                            return
                        buffer += data
                    body = bytes(buffer[:length])
                    del buffer[:length]
                self.deliveries.append(
                    Delivery(
                        trio.current_time(), path, headers.get("x-a2a-notification-token"), body
                    )
                )
                if path.startswith("/slow"):
                    await trio.sleep(self.slow_delay)
                await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                if headers.get("connection", "").lower() == "close":
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, ValueError):
            return
        finally:
            await stream.aclose()

    @staticmethod
    async def _read_chunked(stream: trio.SocketStream, buffer: bytearray) -> bytes:
        body = bytearray()
        while True:
            line_end = buffer.find(b"\r\n")
            while line_end < 0:
                data = await stream.receive_some(RECEIVE_SIZE)
                if not data:
                    raise trio.BrokenResourceError
                buffer += data
                line_end = buffer.find(b"\r\n")
            size = int(bytes(buffer[:line_end]).split(b";")[0], 16)
            del buffer[: line_end + 2]
            while len(buffer) < size + 2:
                data = await stream.receive_some(RECEIVE_SIZE)
                if not data:
                    raise trio.BrokenResourceError
                buffer += data
            if size == 0:
                # A final chunk; no trailers are expected (their line would follow).
                del buffer[:2]
                return bytes(body)
            body += buffer[:size]
            del buffer[: size + 2]

"""Protocol requests straight from ASGI: the hot path without a web framework.

Every protocol call goes through here, so its cost is paid on every message.
Quart's routing, request and app contexts and response conversion cost about
0.2 ms of CPU a request (a trivial JSON POST on one core of the benchmark
machine: 1,250-1,550 answers a second through Quart, 1,850-2,100 straight
from ASGI, both on hypercorn's trio worker; see docs/benchmarks.md).
:class:`A2AApp` therefore answers its protocol routes (``{prefix}/jsonrpc``
and ``{prefix}/rest/...``) from these few classes, and leaves Quart the
rest: cards, the lifespan, and any route an application adds.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import trio
from werkzeug.http import parse_cookie

from ..protocol import (
    A2AError,
    InvalidRequestError,
    PayloadTooLargeError,
    RequestTimeoutError,
    ServerBusyError,
    StreamResponse,
)
from ..protocol.sse import KEEPALIVE, format_event
from ..runtime import TaskEventStream
from .body_budget import BudgetShare, unbudgeted
from .failures import answer_for
from .hypercorn_disconnect import EXTENSION as DISCONNECT_EXTENSION
from .hypercorn_disconnect import Disconnect

__all__ = ["ClientGone", "EventStreamBody", "ProtocolRequest", "ProtocolResponse"]

log = logging.getLogger("a2a_trio.server")

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

JSON_CONTENT_TYPE = "application/json"
#: The media type spec v1.0.1 names for A2A's JSON (application/json stays valid).
A2A_JSON_CONTENT_TYPE = "application/a2a+json"


def answers_a2a_json(accept: str | None) -> bool:
    """Whether an ``Accept`` header asks for ``application/a2a+json`` (with a q above 0)."""
    if not accept or "a2a+json" not in accept.lower():
        return False
    for item in accept.split(","):
        media, *parameters = (part.strip() for part in item.split(";"))
        if media.lower() == A2A_JSON_CONTENT_TYPE:
            quality = next((p[2:] for p in parameters if p.lower().startswith("q=")), "1")
            try:
                return float(quality) > 0
            except ValueError:
                return False
    return False


T = TypeVar("T")


class ClientGone(Exception):
    """The client disconnected before its request was read."""


#: Pieces (HTTP/1.1 chunks or reads, HTTP/2 DATA frames) a request body may
#: arrive in: this many, and one more per BODY_PIECE_BYTES of it. Each piece
#: costs the server some 15 µs however small it is (mostly in hypercorn and
#: h11): one byte at a time, a 10 MiB body would cost two and a half minutes
#: of CPU. So bounded, a one-byte drip is refused after some 1,000 pieces and
#: no body costs more than a third of a second; the reads of a slow link
#: (536-byte segments) fit.
BODY_PIECES = 1_000
BODY_PIECE_BYTES = 512


class ProtocolRequest:
    """One HTTP request as the bindings need it: headers, query, body."""

    def __init__(self, scope: Scope, receive: Receive, share: BudgetShare | None = None) -> None:
        self.scope = scope
        #: The request's share of the app's body budget (see :mod:`.body_budget`).
        self.share = share if share is not None else unbudgeted()
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self._receive = receive
        self._headers: dict[str, list[str]] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            self._headers.setdefault(name, []).append(raw_value.decode("latin-1"))
        self._query: dict[str, str] | None = None
        self._last_values: dict[str, str] | None = None
        #: The operation once resolved, and how the request ended (``ok`` or
        #: the error's reason), for the metrics.
        self.operation = "unknown"
        self.outcome = "ok"
        self._body_begun = False
        self._body_ended = False

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or None."""
        values = self._headers.get(name.lower())
        return values[0] if values else None

    def header_values(self, name: str) -> list[str]:
        return self._headers.get(name.lower(), [])

    @property
    def headers(self) -> dict[str, str]:
        """Every header, lower-case names, the last value of repeated ones."""
        if self._last_values is None:
            self._last_values = {name: values[-1] for name, values in self._headers.items()}
        return self._last_values

    @property
    def query(self) -> dict[str, str]:
        """Query parameters, the first value of repeated ones."""
        if self._query is None:
            text = self.scope.get("query_string", b"").decode("latin-1")
            query: dict[str, str] = {}
            for key, value in parse_qsl(text, keep_blank_values=True):
                query.setdefault(key, value)
            self._query = query
        return self._query

    @property
    def cookies(self) -> dict[str, str]:
        header = self.header("cookie")
        return dict(parse_cookie(header)) if header else {}

    @property
    def content_type(self) -> str | None:
        return self.header("content-type")

    @property
    def content_length(self) -> int | None:
        value = self.header("content-length")
        if value is None or not value.strip().isdigit():
            return None
        return int(value)

    @property
    def host_url(self) -> str:
        """``scheme://host/`` as the client addressed this server."""
        host = self.header("host")
        if not host:
            server = self.scope.get("server") or ("127.0.0.1", None)
            host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
        root = self.scope.get("root_path", "").rstrip("/")
        return f"{self.scope.get('scheme', 'http')}://{host}{root}/"

    @property
    def disconnect(self) -> Disconnect | None:
        """What tells of the client's disconnect as it happens (:mod:`.hypercorn_disconnect`);
        None when the server does not, and a waiter must read ``http.disconnect`` itself."""
        notice = (self.scope.get("extensions") or {}).get(DISCONNECT_EXTENSION)
        return notice if isinstance(notice, Disconnect) else None

    async def while_connected(self, work: Callable[[], Awaitable[T]]) -> T:
        """``await work()``; :class:`ClientGone` if the client disconnects first.

        Call it once the body is read: it then takes every message the
        request receives, waiting for ``http.disconnect`` -- unless the server
        tells of the disconnect itself (:mod:`.hypercorn_disconnect`).
        """
        notice = self.disconnect
        if notice is not None:
            with trio.CancelScope() as gone:
                notice.cancel_on_disconnect(gone)
                try:
                    return await work()
                finally:
                    notice.cancel_on_disconnect(None)
            raise ClientGone
        done: list[T] = []
        failure: Exception | None = None
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                while (await self._receive())["type"] != "http.disconnect":
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            try:
                done.append(await work())
            except Exception as error:  # raised as is, not in the nursery's group
                failure = error
            nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if not done:
            raise ClientGone
        return done[0]

    async def body(self, limit: int, time_limit: float = math.inf, *, cost: int = 2) -> bytes:
        """The whole body; :class:`PayloadTooLargeError` past ``limit`` bytes.

        :class:`RequestTimeoutError` when it has not all arrived ``time_limit``
        seconds after the first read: a client trickling a body would
        otherwise hold its connection, and what it sent so far, for good.
        Before the body is taken, the request's :attr:`share` of the body
        budget grows to ``cost`` times its declared length (as it comes
        without one): the body and what decoding it will cost, at least.
        """
        self._body_begun = True
        with trio.move_on_after(time_limit) as deadline:
            return await self._read_body(limit, cost)
        assert deadline.cancelled_caught
        raise RequestTimeoutError(f"The request body did not arrive within {time_limit:g} s")

    @property
    def must_close(self) -> bool:
        """Whether the answer must close an HTTP/1.x connection: its body was refused unread.

        The rest of the body is still on its way; a client that reused the
        connection would find it closed under its next request, so the answer
        says ``Connection: close`` (HTTP/2 refuses the stream alone). So is a
        body refused before any of it was read (on its headers: a media type,
        a version, a method), if the request has one.
        """
        return (
            not self._body_ended
            and (self._body_begun or self._declares_body)
            and str(self.scope.get("http_version", "1.1")).startswith("1")
        )

    @property
    def _declares_body(self) -> bool:
        return bool(self.content_length) or self.header("transfer-encoding") is not None

    async def _read_body(self, limit: int, cost: int) -> bytes:
        declared = self.content_length
        if declared is not None and declared > limit:
            raise PayloadTooLargeError(
                f"Request body of {declared} bytes exceeds the limit of {limit}"
            )
        if declared:  # the budget's share before any of it is taken
            await self._hold_or_discard(cost * declared, ended=False)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            self._body_ended = not message.get("more_body", False)
            if size > limit:
                raise PayloadTooLargeError(f"Request body exceeds the limit of {limit} bytes")
            # An undeclared length is held as it comes.
            await self._hold_or_discard(cost * size, ended=not message.get("more_body", False))
            chunks.append(chunk)
            if len(chunks) > BODY_PIECES + size // BODY_PIECE_BYTES:
                raise InvalidRequestError(
                    f"The request body arrived in more than {len(chunks) - 1} pieces for its"
                    f" {size} bytes: send it in larger pieces"
                )
            if self._body_ended:
                return b"".join(chunks)

    async def _hold_or_discard(self, size: int, *, ended: bool) -> None:
        """Hold ``size`` bytes of the budget, or read the rest of the body away and refuse."""
        try:
            await self.share.grow_to(size)
        except ServerBusyError:
            # Refused before it is kept, but read to its end: a client sends
            # its whole body before it reads the answer (httpx, most HTTP/1.1
            # clients), and would otherwise see its connection reset.
            if not ended:
                await self._discard_rest()
            raise

    async def _discard_rest(self) -> None:
        """Read the rest of the body, keeping none of it."""
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            if not message.get("more_body", False):
                self._body_ended = True
                return


@dataclass(slots=True)
class EventStreamBody:
    """An SSE body: each event rendered by ``render(event, its JSON text)``, with keep-alives.

    A 1.0 stream wraps the recorded JSON text as it is; a 0.3 stream writes
    the event in its own shape. An error that ends the stream (see
    :meth:`TaskEventStream.receive`) is its last frame, ``render_error(error)``.
    """

    stream: TaskEventStream
    render: Callable[[StreamResponse, str], str]
    keepalive: float
    render_error: Callable[[A2AError], str]


# Not frozen, as the records of a round are not: made for each request (see store.rounds).
@dataclass(slots=True)
class ProtocolResponse:
    """A response of the protocol routes: a complete body, or an event stream."""

    status: int
    body: bytes | EventStreamBody
    content_type: str | None = JSON_CONTENT_TYPE
    headers: Mapping[str, str] = field(default_factory=dict)

    def closing(self) -> ProtocolResponse:
        """This response, closing its HTTP/1.x connection (:attr:`ProtocolRequest.must_close`)."""
        return replace(self, headers={**self.headers, "connection": "close"})

    def _start(self) -> dict[str, Any]:
        headers: list[tuple[bytes, bytes]] = []
        if self.content_type is not None:
            headers.append((b"content-type", self.content_type.encode()))
        if isinstance(self.body, bytes):
            headers.append((b"content-length", str(len(self.body)).encode()))
        headers += _encode(self.headers.items())
        return {"type": "http.response.start", "status": self.status, "headers": headers}

    async def send(
        self, send: Send, receive: Receive, disconnect: Disconnect | None = None
    ) -> None:
        """Send this response over ASGI; a stream ends early if the client leaves.

        ``disconnect`` (:attr:`ProtocolRequest.disconnect`) tells of it without
        a task of the stream's own waiting for ``http.disconnect``.
        """
        body = self.body
        if isinstance(body, bytes):
            await send(self._start())
            await send({"type": "http.response.body", "body": body})
            return
        try:
            end: bytes | None = None
            if disconnect is not None:
                with trio.CancelScope() as watched:
                    disconnect.cancel_on_disconnect(watched)
                    try:
                        await send(self._start())
                        end = await _relay(body, send)
                    finally:
                        disconnect.cancel_on_disconnect(None)
            else:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
                    await send(self._start())
                    end = await _relay(body, send)
                    nursery.cancel_scope.cancel()
            if end is not None:
                # Not under the watcher: ending the body makes hypercorn report
                # http.disconnect, then recycle or close the connection within
                # this very send, and the watcher's cancellation would cut that
                # short (a closing connection would keep its socket open).
                await send({"type": "http.response.body", "body": end})
        finally:
            # The client may be gone: the task goes on, the stream lets go of it.
            body.stream.close()


async def _relay(body: EventStreamBody, send: Send) -> bytes:
    """Relay the stream's events; returns the end of the body, for the caller to send.

    The events already there when one arrives go in the same write; those
    published with the end of the stream go with the end of the body, and
    so does the error that ended it, if one did.
    """
    stream = body.stream
    frames: list[bytes] = []
    try:
        while True:
            # receive_rendered() is cancel-safe: a keep-alive timeout loses nothing.
            with trio.move_on_after(body.keepalive) as timer:
                try:
                    seq, event, text = await stream.receive_rendered()
                except trio.EndOfChannel:
                    return b""
            if timer.cancelled_caught:
                await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                continue
            frames = [format_event(body.render(event, text), event_id=seq)]
            while True:
                try:
                    ready = await stream.receive_ready()
                except trio.EndOfChannel:
                    return b"".join(frames)
                if ready is None:
                    break
                frames.append(format_event(body.render(ready[1], ready[2]), event_id=ready[0]))
            await send({"type": "http.response.body", "body": b"".join(frames), "more_body": True})
            frames = []
    except A2AError as error:
        return b"".join([*frames, format_event(body.render_error(error))])
    except Exception as failure:
        # The client hears that the stream failed, not a stream that just stops.
        answer = answer_for(failure, log, "event stream failed")
        return b"".join([*frames, format_event(body.render_error(answer))])


async def _cancel_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


def _encode(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]

"""A gRPC channel on trio: calls over HTTP/2 connections of our own (h2), no asyncio.

httpx speaks HTTP/2 but hands no response trailers over, and a gRPC call's
status is in its trailers; so the client's gRPC transport holds its own
connections, with the h2 state machine doing the framing. Each connection
carries one call at a time and goes back to the pool when the call ended
cleanly (a call abandoned halfway closes its connection instead): no
background reader, so nothing outlives the call that started it.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import trio

from .protocol.grpc_wire import GrpcError, GrpcStatus, frame, unquote_message

__all__ = ["GrpcCallError", "GrpcChannel"]

_RECEIVE_BYTES = 65536
_HEADER_BYTES = 5


class GrpcCallError(GrpcError):
    """A call that ended with a status other than OK; ``trailers`` are its last metadata."""

    def __init__(self, status: GrpcStatus, message: str, trailers: Mapping[str, str]) -> None:
        super().__init__(status, message)
        self.trailers = dict(trailers)


@dataclass
class _Connection:
    stream: trio.abc.Stream
    h2: h2.connection.H2Connection
    broken: bool = False

    async def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            await self.stream.send_all(data)

    async def events(self) -> list[Any]:
        data = await self.stream.receive_some(_RECEIVE_BYTES)
        if not data:
            raise GrpcError(GrpcStatus.UNAVAILABLE, "the server closed the connection")
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as error:
            raise GrpcError(GrpcStatus.INTERNAL, f"HTTP/2 protocol error: {error}") from None
        await self.flush()
        return events


@dataclass
class _Response:
    headers: dict[str, str] = field(default_factory=dict)
    trailers: dict[str, str] = field(default_factory=dict)
    buffer: bytearray = field(default_factory=bytearray)
    ended: bool = False


class GrpcChannel:
    """Calls to one ``host:port``; cleartext HTTP/2 (prior knowledge) or TLS with ALPN h2."""

    def __init__(self, host: str, port: int, *, tls: ssl.SSLContext | None = None) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self._idle: list[_Connection] = []
        self.authority = f"{host}:{port}"

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await _close(connection)

    async def _connect(self) -> _Connection:
        stream: trio.abc.Stream
        try:
            if self.tls is None:
                stream = await trio.open_tcp_stream(self.host, self.port)
            else:
                stream = await trio.open_ssl_over_tcp_stream(
                    self.host, self.port, ssl_context=self.tls
                )
        except OSError as error:
            message = f"cannot connect to {self.authority}: {error}"
            raise GrpcError(GrpcStatus.UNAVAILABLE, message) from None
        connection = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        connection.initiate_connection()
        opened = _Connection(stream, connection)
        await opened.flush()
        return opened

    async def unary(self, path: str, message: bytes, metadata: Mapping[str, str]) -> bytes:
        """The one response message of a unary call."""
        messages = [reply async for reply in self.server_stream(path, message, metadata)]
        if len(messages) != 1:
            raise GrpcError(GrpcStatus.INTERNAL, f"a unary call answered {len(messages)} messages")
        return messages[0]

    async def server_stream(
        self, path: str, message: bytes, metadata: Mapping[str, str]
    ) -> AsyncIterator[bytes]:
        """Each response message of the call, as it arrives; GrpcCallError at a bad status."""
        connection = self._idle.pop() if self._idle else await self._connect()
        finished = False
        try:
            async for reply in self._call(connection, path, message, metadata):
                yield reply
            finished = True
        finally:
            if finished and not connection.broken:
                self._idle.append(connection)
            else:
                with trio.CancelScope(shield=True):
                    await _close(connection)

    async def _call(
        self, connection: _Connection, path: str, message: bytes, metadata: Mapping[str, str]
    ) -> AsyncIterator[bytes]:
        h2_connection = connection.h2
        stream_id = h2_connection.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", "https" if self.tls is not None else "http"),
            (":path", path),
            (":authority", self.authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            *((name.lower(), value) for name, value in metadata.items()),
        ]
        h2_connection.send_headers(stream_id, headers)
        await self._send_body(connection, stream_id, frame(message))
        response = _Response()
        while not response.ended:
            for event in await connection.events():
                self._on_event(connection, event, stream_id, response)
            while len(response.buffer) >= _HEADER_BYTES:
                reply = _next_message(response.buffer)
                if reply is None:
                    break
                yield reply
            await connection.flush()
        if response.buffer:
            raise GrpcError(GrpcStatus.INTERNAL, "the response ended inside a message")
        _check_status(response)

    async def _send_body(self, connection: _Connection, stream_id: int, body: bytes) -> None:
        h2_connection = connection.h2
        view = memoryview(body)
        while view:
            window = min(
                h2_connection.local_flow_control_window(stream_id),
                h2_connection.max_outbound_frame_size,
            )
            if window <= 0:
                await connection.flush()
                for event in await connection.events():
                    if isinstance(event, h2.events.StreamReset | h2.events.ConnectionTerminated):
                        connection.broken = True
                        raise GrpcError(GrpcStatus.UNAVAILABLE, "the server reset the call")
                continue
            chunk, view = view[:window], view[window:]
            h2_connection.send_data(stream_id, bytes(chunk), end_stream=not view)
        if not body:
            h2_connection.end_stream(stream_id)
        await connection.flush()

    @staticmethod
    def _on_event(connection: _Connection, event: Any, stream_id: int, response: _Response) -> None:
        if isinstance(event, h2.events.ConnectionTerminated):
            connection.broken = True
            raise GrpcError(GrpcStatus.UNAVAILABLE, "the server closed the connection")
        if getattr(event, "stream_id", stream_id) != stream_id:
            return
        if isinstance(event, h2.events.ResponseReceived):
            response.headers = _decode_headers(event.headers)
        elif isinstance(event, h2.events.DataReceived):
            response.buffer += event.data
            connection.h2.acknowledge_received_data(event.flow_controlled_length, stream_id)
        elif isinstance(event, h2.events.TrailersReceived):
            response.trailers = _decode_headers(event.headers)
        elif isinstance(event, h2.events.StreamEnded):
            response.ended = True
        elif isinstance(event, h2.events.StreamReset):
            connection.broken = True
            raise GrpcError(
                GrpcStatus.UNAVAILABLE, f"the server reset the call ({event.error_code})"
            )


def _decode_headers(headers: Any) -> dict[str, str]:
    decoded: dict[str, str] = {}
    for name, value in headers:
        key = name.decode() if isinstance(name, bytes) else name
        decoded[key] = value.decode() if isinstance(value, bytes) else value
    return decoded


def _next_message(buffer: bytearray) -> bytes | None:
    """Take one whole message off the front of ``buffer`` (None: not all here yet)."""
    flag = buffer[0]
    length = int.from_bytes(buffer[1:_HEADER_BYTES], "big")
    if len(buffer) < _HEADER_BYTES + length:
        return None
    if flag != 0:
        raise GrpcError(GrpcStatus.INTERNAL, "the server sent a compressed message")
    message = bytes(buffer[_HEADER_BYTES : _HEADER_BYTES + length])
    del buffer[: _HEADER_BYTES + length]
    return message


def _check_status(response: _Response) -> None:
    # A call that fails at once may send its status in the headers alone.
    trailers = response.trailers or response.headers
    http_status = response.headers.get(":status")
    status = trailers.get("grpc-status")
    if status is None:
        raise GrpcError(
            GrpcStatus.UNKNOWN if http_status == "200" else GrpcStatus.UNAVAILABLE,
            f"the call ended without a gRPC status (HTTP {http_status})",
        )
    try:
        code = GrpcStatus(int(status))
    except ValueError:
        code = GrpcStatus.UNKNOWN
    if code is not GrpcStatus.OK:
        raise GrpcCallError(code, unquote_message(trailers.get("grpc-message", "")), trailers)


async def _close(connection: _Connection) -> None:
    try:
        connection.h2.close_connection()
        await connection.flush()
    except (trio.BrokenResourceError, trio.ClosedResourceError, h2.exceptions.ProtocolError):
        pass
    await connection.stream.aclose()

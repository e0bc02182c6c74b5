"""hypercorn's HTTP/2 connections, mended (a2a_trio/server/hypercorn_h2.py), on the wire.

The server is ``hypercorn --worker-class trio a2a_trio:app`` in a child
process, with hypercorn's own settings, as an operator runs it. Each test
plays a client that stock hypercorn 0.18 fails on: the first three stop
the whole server there, the request limit breaks the calls in flight, and
a shut window holds the answers in memory for as long as its client stays.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import httpx
import pytest
import trio

from a2a_trio import A2AApp
from a2a_trio.protocol.grpc_wire import frame
from a2a_trio.protocol.proto import a2a_pb2
from a2a_trio.protocol.protobuf import proto_class
from a2a_trio.server import hypercorn_h2

from .agents import ScriptedExecutor
from .conftest import live_server, make_card, user_message
from .servers import CARD_PATH, ServerProcess
from .test_hypercorn_tcp import closers_are_each_logged_once

SERVICE = "/lf.a2a.v1.A2AService/"
VERSION = (("a2a-version", "1.0"),)
#: Comfortably past hypercorn's 1,000 streams in its priority tree, and past
#: its default limit of 1,000 requests on a connection.
CALLS = 2_500
IN_FLIGHT = 16
TIMEOUT = 20.0
STREAMS = 50
VERSION_HEADER = {"A2A-Version": "1.0"}


class RawH2:
    """A bare HTTP/2 client connection (prior knowledge), frame by frame with h2."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self.statuses: dict[int, str] = {}
        self.ended: set[int] = set()
        self.resets: dict[int, int] = {}
        self.goaway: h2.events.ConnectionTerminated | None = None
        self.closed = False

    @classmethod
    @asynccontextmanager
    async def connect(cls, port: int) -> AsyncIterator[RawH2]:
        """A connection to ``port`` for the block; its socket closes with the block."""
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            connection = cls(stream)
            connection.h2.initiate_connection()
            await connection.flush()
            yield connection

    async def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            await self.stream.send_all(data)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> int:
        """Open a stream; its body, when given, is left open (send the rest with ``send``)."""
        stream_id = self.h2.get_next_available_stream_id()
        headers = [(":method", method), (":path", path), (":scheme", "http")]
        headers += [(":authority", "127.0.0.1"), ("content-type", content_type)]
        self.h2.send_headers(stream_id, headers, end_stream=body is None)
        if body is not None:
            self.h2.send_data(stream_id, body)
        return stream_id

    async def read(self) -> list[h2.events.Event]:
        """One read from the socket, its events recorded and returned."""
        data = await self.stream.receive_some(65536)
        if not data:
            self.closed = True
            return []
        events = self.h2.receive_data(data)
        for event in events:
            if isinstance(event, h2.events.ResponseReceived):
                # str under header_encoding, whatever h2's annotations say (bytes).
                headers: dict[Any, Any] = dict(event.headers)
                self.statuses[event.stream_id] = headers[":status"]
            elif isinstance(event, h2.events.DataReceived):
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.resets[event.stream_id] = event.error_code
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.goaway = event
        await self.flush()
        return events

    async def answers(self, *stream_ids: int) -> dict[int, str]:
        """The status of each stream, once every one of them has ended."""
        with trio.fail_after(TIMEOUT):
            while not self.ended.issuperset(stream_ids):
                assert not self.closed and self.goaway is None, (self.goaway, self.statuses)
                await self.read()
        return {stream_id: self.statuses[stream_id] for stream_id in stream_ids}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("h2")
    with ServerProcess.configured_app_served(directory) as process:
        yield process


async def assert_both_still_serve(connection: RawH2, server: ServerProcess) -> None:
    """The card answers on ``connection`` (it survived), and the server is alive."""
    card = connection.request("GET", CARD_PATH)
    await connection.flush()
    assert await connection.answers(card) == {card: "200"}
    await server.assert_still_serving()


def test_the_mend_is_installed_for_the_hypercorn_in_use() -> None:
    # Fails on a hypercorn release the mend was not written for: check the
    # faults there (this file) and extend hypercorn_release.MENDED_VERSIONS
    # (and pyproject's pin) or drop the mend.
    assert hypercorn_h2.install()


def _serialize(message: Any) -> bytes:
    return bytes(message.SerializeToString())


def _many_calls(target: str, calls: int = CALLS) -> list[str]:
    """``calls`` ListTasks calls, IN_FLIGHT at a time on one grpcio channel; each one's outcome."""
    outcomes: list[str] = []
    with grpc.insecure_channel(target) as channel:
        list_tasks = channel.unary_unary(
            SERVICE + "ListTasks",
            request_serializer=_serialize,
            response_deserializer=proto_class("ListTasksResponse").FromString,
        )
        request = a2a_pb2.ListTasksRequest(page_size=1)
        pending: list[Future[Any]] = []
        for _ in range(calls):
            if len(pending) == IN_FLIGHT:
                outcomes.append(_outcome(pending.pop(0)))
            pending.append(list_tasks.future(request, metadata=VERSION, timeout=TIMEOUT))
        outcomes += [_outcome(call) for call in pending]
    return outcomes


def _outcome(call: Future[Any]) -> str:
    try:
        call.result()
    except grpc.RpcError as error:
        return f"{error.code()}: {error.details()}"
    return "ok"


async def test_thousands_of_grpc_calls_on_one_connection_all_answer(
    server: ServerProcess,
) -> None:
    # Every gRPC answer ends with trailers. Stock hypercorn kept each such
    # stream in its priority tree until a later visit that steady load never
    # gave, and died at 1,000; and at its 1,000-request limit it sent GOAWAY
    # with calls in flight, which then failed.
    target = server.url.removeprefix("http://")

    outcomes = await trio.to_thread.run_sync(_many_calls, target)

    failed = [outcome for outcome in outcomes if outcome != "ok"]
    assert (len(outcomes), failed[:3]) == (CALLS, [])
    await server.assert_still_serving()


async def test_a_unary_grpc_answer_leaves_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # hypercorn wrote a gRPC answer's head, its message and its trailers to
    # the socket one after another: three writes (each a lock, cancel scopes
    # and a system call) where one does.
    writes: list[bytes] = []  # the server's, not the client's (it is in this process too)
    send_all = trio.SocketStream.send_all

    async def counted(stream: trio.SocketStream, data: Any) -> None:
        if stream.socket.getsockname()[1] == port:
            writes.append(bytes(data))
        await send_all(stream, data)

    def mount(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=ScriptedExecutor())

    async with live_server(tmp_path, mount) as server:
        port = int(server.url.rsplit(":", 1)[1])
        async with RawH2.connect(port) as connection:
            monkeypatch.setattr(trio.SocketStream, "send_all", counted)
            await connection.answers(await _list_tasks(connection))  # the connection settles
            writes.clear()
            call = await _list_tasks(connection)
            assert await connection.answers(call) == {call: "200"}

    assert len(writes) == 1, writes


async def _list_tasks(connection: RawH2) -> int:
    """Send a unary ListTasks call on ``connection``; its stream id."""
    stream_id = connection.h2.get_next_available_stream_id()
    headers = [(":method", "POST"), (":path", SERVICE + "ListTasks"), (":scheme", "http")]
    headers += [(":authority", "127.0.0.1"), ("content-type", "application/grpc")]
    headers += [("te", "trailers"), *VERSION]
    connection.h2.send_headers(stream_id, headers)
    request = a2a_pb2.ListTasksRequest(page_size=1).SerializeToString()
    connection.h2.send_data(stream_id, frame(request), end_stream=True)
    await connection.flush()
    return stream_id


async def test_priority_frames_for_streams_never_opened_are_ignored(
    server: ServerProcess,
) -> None:
    # Stock hypercorn added a stream to its tree for each, for good: 1,000
    # frames (a few kilobytes) from one client stopped the server.
    async with RawH2.connect(server.port) as connection:
        for number in range(3_000):
            connection.h2.prioritize(100_001 + 2 * number, weight=16)
        await connection.flush()

        await assert_both_still_serve(connection, server)


async def test_a_body_sent_after_its_answer_is_dropped_and_the_connection_goes_on(
    server: ServerProcess,
) -> None:
    # Stock hypercorn looked up the answered stream for that body and failed
    # the connection, and with it the server. (A JSON-RPC call that is not
    # JSON is refused, -32005 on HTTP 200, before its body is read; Quart's
    # 404s now read the body first.)
    async with RawH2.connect(server.port) as connection:
        early = connection.request(
            "POST", "/jsonrpc", body=b'{"partial": ', content_type="text/plain"
        )
        await connection.flush()
        assert await connection.answers(early) == {early: "200"}

        connection.h2.send_data(early, b'"rest"}' * 1000, end_stream=True)
        await assert_both_still_serve(connection, server)


async def test_event_streams_over_http2_each_end_when_their_answer_does(
    server: ServerProcess,
) -> None:
    # The mend ends a stream's body itself when its last chunk is already
    # out; each of these SSE answers must still end, and end whole.
    finals: list[dict[str, Any]] = []

    async def stream_one(client: httpx.AsyncClient, url: str) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": user_message("over h2")},
        }
        async with client.stream("POST", url, json=body, headers=VERSION_HEADER) as response:
            assert response.http_version == "HTTP/2"
            frames = [
                json.loads(line[5:])
                async for line in response.aiter_lines()
                if line.startswith("data:")
            ]
        finals.append(frames[-1])

    async with httpx.AsyncClient(http1=False, http2=True, trust_env=False) as client:
        card = (await client.get(server.url + CARD_PATH)).json()
        url = next(
            interface["url"]
            for interface in card["supportedInterfaces"]
            if interface["protocolBinding"] == "JSONRPC"
        )
        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                for _ in range(STREAMS):
                    nursery.start_soon(stream_one, client, url)

    assert len(finals) == STREAMS
    assert [final for final in finals if "result" not in final] == []


# Serial (noxfile.py): on -n 4 beside other jobs (load 11-14 on two cores) a few of the
# 3,000 calls failed once with UNAVAILABLE (RST_STREAM code 7, REFUSED_STREAM): see the
# CHANGELOG; alone it passes.
@pytest.mark.serial
async def test_retiring_connections_at_the_request_limit_fails_no_call(tmp_path: Path) -> None:
    # Stock hypercorn's GOAWAY (and a first mend's, through h2's
    # close_connection) turned a call the client sent before the GOAWAY
    # reached it into a protocol error: 30 of 3,000 calls failed at a limit
    # of 50 by hand, and this test failed in about one run of two or three.
    # Calls after the GOAWAY are refused (REFUSED_STREAM) and retried.
    settings = tmp_path / "hypercorn.toml"
    settings.write_text("keep_alive_max_requests = 10\n")
    with ServerProcess.configured_app_served(
        tmp_path, options=("--config", str(settings))
    ) as server:
        target = server.url.removeprefix("http://")
        outcomes = await trio.to_thread.run_sync(_many_calls, target, 3_000)
        failed = [outcome for outcome in outcomes if outcome != "ok"]
        assert (len(outcomes), failed[:3]) == (3_000, [])
        await server.assert_still_serving()


async def test_the_request_limit_retires_a_connection_once_its_calls_are_answered(
    tmp_path: Path,
) -> None:
    settings = tmp_path / "hypercorn.toml"
    settings.write_text("keep_alive_max_requests = 4\n")
    with ServerProcess.configured_app_served(
        tmp_path, options=("--config", str(settings))
    ) as server:
        async with RawH2.connect(server.port) as connection:
            streams = [connection.request("GET", CARD_PATH) for _ in range(10)]
            await connection.flush()

            # All ten answer, though the limit passed while they were in flight...
            assert set((await connection.answers(*streams)).values()) == {"200"}
            # ...and then the server lets the connection go, saying all ten were served.
            with trio.fail_after(TIMEOUT):
                while connection.goaway is None and not connection.closed:
                    await connection.read()
            assert connection.goaway is not None
            assert (connection.goaway.error_code, connection.goaway.last_stream_id) == (
                0,
                streams[-1],
            )
            await server.assert_still_serving()


async def test_an_answer_the_client_never_makes_room_for_is_given_up(tmp_path: Path) -> None:
    # A client whose flow-control window stays shut: stock hypercorn kept
    # each answer waiting for it, with its app task, as long as the client
    # stayed (100 streams of 8 MB each: 1.5 GB on one connection).
    (tmp_path / "a2a.toml").write_text("[server]\nsend_timeout = 1.0\n")
    with ServerProcess.configured_app_served(tmp_path) as server:
        async with RawH2.connect(server.port) as connection:
            connection.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
            card = connection.request("GET", CARD_PATH)
            await connection.flush()

            with trio.fail_after(TIMEOUT):
                while card not in connection.resets:
                    assert not connection.closed and connection.goaway is None
                    await connection.read()

            assert connection.statuses[card] == "200"
            assert connection.resets[card] == h2.errors.ErrorCodes.CANCEL
            await server.assert_still_serving()


async def test_an_answer_its_client_takes_and_closes_at_once_is_logged_once(
    tmp_path: Path,
) -> None:
    # 6 to 13 of 40 such requests were logged twice, first as unanswered.
    await closers_are_each_logged_once(tmp_path, "--http2-prior-knowledge")

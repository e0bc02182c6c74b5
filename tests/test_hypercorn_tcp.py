"""hypercorn's trio TCP server, mended (a2a_trio/server/hypercorn_tcp.py), on the wire.

The server is ``hypercorn --worker-class trio --keep-alive 75 a2a_trio:app``
in a child process, as docs/deployment.md runs it. Against stock hypercorn
0.18 the first two clients stop the whole server, the third leaves its
connection open for the 75 s of the idle timeout, and the last holds its
answer in the server's memory for as long as it stays.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import logging
import shutil
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trio
import trio.testing
from hypercorn.config import Config

from a2a_trio.config import Settings, build_app
from a2a_trio.server import hypercorn_tcp, serve
from a2a_trio.server.asgi import ClientGone, ProtocolRequest
from a2a_trio.server.hypercorn_disconnect import EXTENSION as DISCONNECT_EXTENSION
from a2a_trio.server.hypercorn_disconnect import Disconnect

from .conftest import user_message
from .servers import CARD_PATH, ServerProcess
from .test_keep_alive import answer_status

TIMEOUT = 10.0
#: Connections racing their refusal: one in two or three stops a stock server.
RACERS = 20
#: A refused handshake: the console's feed, without its token.
REFUSED_HANDSHAKE = (
    b"GET /_a2a/feed HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\n\r\n"
)
CARD_REQUEST = f"GET {CARD_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
SEND_TIMEOUT = 1.0
#: A text whose task (history and echoed artifact) is twice as large: more
#: than the client's and the server's socket buffers hold (4 MB at most here).
LARGE_TEXT = "x" * 4_500_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("tcp")
    with ServerProcess.configured_app_served(directory, options=("--keep-alive", "75")) as process:
        yield process


def test_the_mend_is_installed_for_the_hypercorn_in_use() -> None:
    # Fails on a hypercorn release the mend was not written for: check the
    # faults there (this file) and extend hypercorn_release.MENDED_VERSIONS
    # (and pyproject's pin) or drop the mend.
    assert hypercorn_tcp.install()


async def _handshake_then_bytes(port: int) -> None:
    """A refused WebSocket handshake, then a byte every 2 ms for half a second."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(REFUSED_HANDSHAKE)
        with (
            trio.move_on_after(0.5),
            contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
        ):
            while True:
                await stream.send_all(b"x")
                await trio.sleep(0.002)


async def test_bytes_during_a_refused_websocket_handshake_close_only_that_connection(
    server: ServerProcess,
) -> None:
    # Stock hypercorn answers a byte arriving before the app accepted with
    # a 400 of its own; when the app's refusal (401) has begun, h11 refuses
    # to start a second answer, and that exception stopped the server.
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for _ in range(RACERS):
                nursery.start_soon(_handshake_then_bytes, server.port)

    await server.assert_still_serving()


async def test_an_h2c_upgrade_with_forbidden_settings_closes_only_that_connection(
    server: ServerProcess,
) -> None:
    # INITIAL_WINDOW_SIZE past 2**31 - 1: h2 refuses it while hypercorn
    # switches the connection to HTTP/2, outside any protocol's handling.
    settings = base64.urlsafe_b64encode(struct.pack(">HI", 4, 2**31)).rstrip(b"=")
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        await stream.send_all(
            CARD_REQUEST.removesuffix(b"\r\n")
            + b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
            + b"HTTP2-Settings: "
            + settings
            + b"\r\n\r\n"
        )
        with trio.fail_after(TIMEOUT):
            while await stream.receive_some():
                pass

    await server.assert_still_serving()


async def test_a_connection_the_client_closes_is_closed_by_the_server_at_once(
    server: ServerProcess,
) -> None:
    # Stock hypercorn kept it open (CLOSE-WAIT) until its idle timer ran
    # out, 75 s later: a descriptor and tasks held for every connection a
    # pooled client closes.
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    async with stream:
        await stream.send_all(CARD_REQUEST)
        answer = b""
        with trio.fail_after(TIMEOUT):
            while not answer.endswith(b"}"):
                answer += await stream.receive_some()
        assert answer.startswith(b"HTTP/1.1 200")
        await trio.sleep(0.2)  # idle, as a pool leaves it

        await stream.send_eof()  # the client is done with it

        with trio.fail_after(2.0):
            assert await stream.receive_some() == b""


async def test_a_connection_idle_after_a_quart_route_is_closed_after_the_keep_alive(
    tmp_path: Path,
) -> None:
    # Stock hypercorn started the idle timer from the app's task, inside
    # Quart's request, which quart-trio cancels when hypercorn tells it the
    # request is over: the timer never ran, and the connection stayed open,
    # idle, for as long as the client kept it (and SIGTERM waited the whole
    # graceful_timeout for it: tests/test_shutdown_keep_alive.py).
    with ServerProcess.configured_app_served(tmp_path, options=("--keep-alive", "1")) as server:
        async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
            request = b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            assert await answer_status(stream, request) == b"HTTP/1.1 404 "
            with trio.fail_after(TIMEOUT):
                assert await stream.receive_some() == b""


async def test_a_client_that_stops_reading_is_let_go(tmp_path: Path) -> None:
    # Stock hypercorn waited, shielded, for the client to take the answer:
    # as long as it stayed, the answer stayed in memory, and SIGTERM did
    # not stop the server.
    (tmp_path / "a2a.toml").write_text(f"[server]\nsend_timeout = {SEND_TIMEOUT}\n")
    with ServerProcess.configured_app_served(tmp_path) as server:
        assert await _received_while_not_reading(server.url) < 2 * len(LARGE_TEXT)
        await server.assert_still_serving()


async def test_each_app_keeps_its_own_send_timeout(tmp_path: Path) -> None:
    # The timeout was once the process's, set by whichever app was built
    # last: here the app served would then have waited 60 s, not 1 s.
    served = build_app(_settings(tmp_path / "served.db", SEND_TIMEOUT))
    build_app(_settings(tmp_path / "other.db", 60.0))
    config = Config()
    config.bind = ["127.0.0.1:0"]
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        [url] = await nursery.start(
            functools.partial(serve, served, config, shutdown_trigger=stop.wait)
        )
        assert await _received_while_not_reading(url) < 2 * len(LARGE_TEXT)
        stop.set()


def _settings(database: Path, send_timeout: float) -> Settings:
    """The echo agent on ``database``, its clients given ``send_timeout`` seconds."""
    return Settings.model_validate(
        {"storage": {"url": str(database)}, "server": {"send_timeout": send_timeout}}
    )


async def _received_while_not_reading(url: str) -> int:
    """Bytes a client gets of an answer twice LARGE_TEXT after reading nothing for a while.

    Less than the whole answer when the server let the client go within
    SEND_TIMEOUT seconds and dropped the rest.
    """
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
        sent = await client.post(
            url + "/jsonrpc",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": user_message(LARGE_TEXT)},
            },
            headers={"A2A-Version": "1.0"},
        )
    task_id = sent.json()["result"]["task"]["id"]
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    ).encode()

    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect(("127.0.0.1", httpx.URL(url).port))
    async with trio.SocketStream(sock) as stream:
        await stream.send_all(
            b"POST /jsonrpc HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await trio.sleep(SEND_TIMEOUT + 1.5)  # reading nothing: the behaviour under test

        # What the sockets held arrives, then the end: the rest was dropped.
        received = 0
        with trio.fail_after(TIMEOUT), contextlib.suppress(trio.BrokenResourceError):
            while received < 2 * len(LARGE_TEXT) and (chunk := await stream.receive_some()):
                received += len(chunk)
    return received


def _request(extensions: dict[str, object]) -> ProtocolRequest:
    async def never() -> dict[str, object]:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    scope = {"method": "POST", "path": "/", "headers": [], "extensions": extensions}
    return ProtocolRequest(scope, never)


async def test_a_blocking_call_hears_of_its_clients_disconnect_through_the_scope() -> None:
    notice = Disconnect()
    request = _request({DISCONNECT_EXTENSION: notice})
    gone: list[bool] = []

    async def call() -> None:
        with pytest.raises(ClientGone):
            await request.while_connected(trio.sleep_forever)
        gone.append(True)

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            notice.disconnected()
        assert gone == [True]
        # A client gone before the call began: it is cut short at once.
        with pytest.raises(ClientGone):
            await request.while_connected(trio.sleep_forever)


async def test_a_call_whose_client_stays_gets_its_answer_and_leaves_no_scope_behind() -> None:
    notice = Disconnect()
    request = _request({DISCONNECT_EXTENSION: notice})

    async def answer() -> str:
        await trio.lowlevel.checkpoint()
        return "answer"

    assert await request.while_connected(answer) == "answer"
    notice.disconnected()  # after the answer: cancels nothing
    assert notice.gone


#: Answers a client reads in full and then closes its connection at once: some
#: 13 in 40 were logged twice by stock hypercorn 0.18 (docs/upstream).
CLOSERS = 40


async def test_an_answer_its_client_takes_and_closes_at_once_is_logged_once(
    tmp_path: Path,
) -> None:
    await closers_are_each_logged_once(tmp_path, "--http1.1")


async def test_an_answer_a_client_of_this_event_loop_takes_and_closes_is_logged_once(
    tmp_path: Path,
) -> None:
    # The server in this process, beside its client: trio's scheduler runs
    # their tasks in a shuffled order, so the client's close meets the stream
    # between its last write and its end some times in every run (3 failed runs
    # of 3 without the mend; curl's test above, 2 of 3).
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    access = logging.getLogger("tests.hypercorn_tcp.access")
    access.addHandler(handler)
    access.propagate = False
    access.setLevel(logging.INFO)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = access
    config.access_log_format = "%(s)s %(r)s"
    app = build_app(_settings(tmp_path / "a2a.db", SEND_TIMEOUT))
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            [url] = await nursery.start(
                functools.partial(serve, app, config, shutdown_trigger=stop.wait)
            )
            port = httpx.URL(url).port
            assert port is not None
            for _ in range(CLOSERS):
                # A body of declared length (the card), and a chunked stream.
                await _take_and_close(port, CARD_REQUEST)
                await _take_and_close(port, _stream_request())
            stop.set()
    finally:
        access.removeHandler(handler)
    asked = [line for line in lines if " /" in line]
    assert len(asked) == 2 * CLOSERS, asked
    assert {line.split(" ", 1)[0] for line in asked} == {"200"}, asked


def _stream_request() -> bytes:
    body = json.dumps({"message": user_message("echo")}).encode()
    return (
        b"POST /rest/message:stream HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n"
        b"Content-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


async def _take_and_close(port: int, request: bytes) -> None:
    """Send ``request``, read its answer to the last byte, and close at once."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        answer = b""
        with trio.fail_after(TIMEOUT):
            while not _whole(answer):
                chunk = await stream.receive_some()
                assert chunk, f"the server closed before the whole answer: {answer!r}"
                answer += chunk


def _whole(answer: bytes) -> bool:
    head, found, body = answer.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return body.endswith(b"0\r\n\r\n")  # chunked: its last chunk


async def closers_are_each_logged_once(directory: Path, version: str) -> None:
    """CLOSERS card GETs and as many streams, by curl (``version``), each logged once.

    curl, in its own process, closes as soon as it has the answer: soon enough
    to meet the server between its last write and its stream's end, which a
    client in the test's own event loop (or a Python thread) seldom does.
    """
    log = ("--access-logfile", str(directory / "access.log"))
    options = (*log, "--access-logformat", "%(s)s %(r)s %(a)s")
    message = json.dumps({"message": user_message("echo")})
    with ServerProcess.configured_app_served(directory, options=options) as server:
        for _ in range(CLOSERS):
            await _curl(version, server.url + CARD_PATH)
            await _curl(
                version,
                server.url + "/rest/message:stream",
                "-H", "A2A-Version: 1.0", "-H", "Content-Type: application/json",
                "--data", message,
            )  # fmt: skip
    text = (directory / "access.log").read_text()
    lines = [line.rpartition("] ")[2] for line in text.splitlines()]
    asked = [line for line in lines if "curl/" in line]  # not the readiness probe's
    assert len(asked) == 2 * CLOSERS, asked
    assert {line.split(" ", 1)[0] for line in asked} == {"200"}, asked


async def _curl(version: str, url: str, *options: str) -> None:
    curl = shutil.which("curl")
    assert curl is not None, "these tests need curl (.ci/run installs it)"
    done = await trio.run_process([curl, "-sS", "-o", "/dev/null", version, *options, url])
    assert done.returncode == 0

"""A request's head is timed apart from the wait between requests (issue 31).

hypercorn times a request line and headers with its idle timer, which
``a2a-trio serve`` sets to 75 s so that clients, never the server, close idle
connections: 1,008 clients sending their headers slowly (or nothing) held a
1,024-descriptor process for 75 s. ``server.header_timeout`` bounds the head;
a connection idle between requests still has the whole keep-alive.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from .servers import CARD_PATH, ServerProcess, serve_command, session_processes
from .test_keep_alive import answer_status

HEADER_TIMEOUT = 1.0
REQUEST = f"GET {CARD_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("heads")
    (directory / "a2a.toml").write_text(f"[server]\nheader_timeout = {HEADER_TIMEOUT}\n")
    with ServerProcess.configured_app_served(directory, command=serve_command) as process:
        yield process


async def closed_after(stream: trio.SocketStream) -> float:
    """Seconds until the server closes ``stream``."""
    started = trio.current_time()
    with trio.fail_after(HEADER_TIMEOUT + 5):
        while await stream.receive_some(65536):
            pass
    return trio.current_time() - started


async def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(
    server: ServerProcess,
) -> None:
    async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
        assert await closed_after(stream) < HEADER_TIMEOUT + 2


async def test_headers_sent_a_byte_at_a_time_are_cut_off_after_the_header_timeout(
    server: ServerProcess,
) -> None:
    async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
        assert await answer_status(stream) == b"HTTP/1.1 200 "
        await trio.sleep(HEADER_TIMEOUT + 0.5)  # idle between requests: kept

        async def trickle() -> None:
            for byte in REQUEST:
                await trio.sleep(0.3)
                await stream.send_all(bytes([byte]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trickle)
            elapsed = await closed_after(stream)
            nursery.cancel_scope.cancel()
        assert elapsed < HEADER_TIMEOUT + 2


async def test_a_kept_alive_connection_outlives_the_header_timeout(
    server: ServerProcess, tmp_path: Path
) -> None:
    async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
        assert await answer_status(stream) == b"HTTP/1.1 200 "
        await trio.sleep(3 * HEADER_TIMEOUT)
        assert await answer_status(stream) == b"HTTP/1.1 200 "


def cpu_seconds(group: int) -> float:
    """CPU seconds used so far by the processes of process group ``group``."""
    ticks = sum(int(fields[11]) + int(fields[12]) for _, fields in session_processes(group))
    return ticks / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The conformance agent at ``/slow``: ``test-resubscribe-message-id...`` takes 4 s."""
    directory = tmp_path_factory.mktemp("slow")
    (directory / "a2a.toml").write_text(
        f"[server]\nheader_timeout = {HEADER_TIMEOUT}\n\n"
        '[[agents]]\nname = "slow"\nprefix = "/slow"\n'
        'executor = "a2a_trio.conformance:ConformanceExecutor"\n'
        'card = "a2a_trio.conformance:conformance_card"\n'
    )
    with ServerProcess.configured_app_served(directory, command=serve_command) as process:
        yield process


async def test_an_answer_slower_than_the_header_timeout_keeps_its_connection(
    slow_server: ServerProcess,
) -> None:
    # The head's timer is stopped while the request is served: a 4 s answer on a
    # connection whose head was timed to 1 s arrives, and the connection goes on.
    message = {
        "messageId": f"test-resubscribe-message-id-{uuid.uuid4().hex}",
        "role": "ROLE_USER",
        "parts": [{"text": "slow"}],
    }
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    ).encode()
    post = (
        b"POST /slow/jsonrpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"A2A-Version: 1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    async with await trio.open_tcp_stream("127.0.0.1", slow_server.port) as stream:
        started, cpu = trio.current_time(), cpu_seconds(slow_server.process.pid)
        with trio.fail_after(20):
            assert await answer_status(stream, post) == b"HTTP/1.1 200 "
        assert trio.current_time() - started > 3 * HEADER_TIMEOUT
        # ... and its timer waited for it without spinning.
        assert cpu_seconds(slow_server.process.pid) - cpu < 1.0
        card = f"GET /slow{CARD_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        assert await answer_status(stream, card) == b"HTTP/1.1 200 "

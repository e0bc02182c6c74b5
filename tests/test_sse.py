"""SSE framing of a live stream on the autojump clock: keep-alives, ids, and letting go."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config

from a2a_trio.protocol import SubscribeToTaskRequest
from a2a_trio.protocol.sse import KEEPALIVE
from a2a_trio.server.bindings import _event_stream
from a2a_trio.server.hypercorn_disconnect import Disconnect

from .agents import ScriptedExecutor
from .conftest import live_server, make_card, user_message
from .postgres import sqlite_url
from .test_host import ALICE, request, running_host, sent_task


async def test_an_idle_stream_sends_a_keepalive_comment_every_interval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(sqlite_url(tmp_path / "a2a.db"), executor) as host:
        task = await sent_task(host, "hold", return_immediately=True)
        await executor.gate.reached.wait()
        stream = await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE)
        response = _event_stream(stream, lambda _, text: text, 15.0, str)
        chunks: list[tuple[float, bytes]] = []
        started = trio.current_time()

        async def send(message: dict[str, Any]) -> None:  # the ASGI server's side
            if message["type"] == "http.response.body" and message["body"]:
                chunks.append((trio.current_time() - started, message["body"]))
                if len(chunks) == 3:
                    executor.gate.release.set()

        async def receive() -> dict[str, Any]:  # a client that stays
            await trio.sleep_forever()

        await response.send(send, receive)
        # The snapshot at once, keep-alives at 15 s and 30 s, then the live events.
        assert chunks[0][0] == 0 and chunks[0][1].startswith(b'id: 2\ndata: {"task"')
        assert [c for t, c in chunks[1:3]] == [KEEPALIVE, KEEPALIVE]
        assert [round(t) for t, _ in chunks[1:3]] == [15, 30]
        # The artifact and the completion were published together: one write.
        assert len(chunks) == 4
        frames = chunks[-1][1].split(b"\n\n")
        assert frames[0].startswith(b"id: 3\n") and frames[1].startswith(b"id: 4\n")
        assert b"TASK_STATE_COMPLETED" in frames[1] and frames[2:] == [b""]


async def test_a_client_that_goes_away_ends_the_relay_but_not_the_task(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(sqlite_url(tmp_path / "a2a.db"), executor) as host:
        task = await sent_task(host, "hold", return_immediately=True)
        await executor.gate.reached.wait()
        stream = await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE)
        response = _event_stream(stream, lambda _, text: text, 15.0, str)
        frames: list[bytes] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                frames.append(message["body"])

        async def receive() -> dict[str, Any]:  # the client reads a while, then leaves
            await trio.sleep(1)
            return {"type": "http.disconnect"}

        with trio.fail_after(5):
            await response.send(send, receive)
        assert len(frames) == 1 and frames[0].startswith(b"id: ")
        assert task.id in host.state.live.tasks  # still held by the running execution only
        assert host.state.live.tasks[task.id].users == 1
        executor.gate.release.set()
        await trio.sleep(1)
        stored = await host.store.get_task("test", task.id, owner=None)
        assert stored is not None and stored.state.is_final
        assert task.id not in host.state.live.tasks


async def test_a_disconnect_told_by_the_server_ends_the_relay_with_no_one_reading_receive(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(sqlite_url(tmp_path / "a2a.db"), executor) as host:
        held = await host.stream_message(request("hold"), ALICE)
        task_id = held._task_id
        frames: list[bytes] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                frames.append(message["body"])

        notice = Disconnect()

        async def leave_later() -> None:
            await trio.sleep(1)
            notice.disconnected()  # as hypercorn_disconnect's task group tells it

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(leave_later)
                response = _event_stream(held, lambda _, text: text, 15.0, str)
                # Nothing reads the receive channel: the notice alone ends the relay.
                await response.send(send, trio.sleep_forever, notice)
        assert frames and b"TASK_STATE_WORKING" in b"".join(frames)
        assert host.state.live.tasks[task_id].users == 1  # the running execution only
        executor.gate.release.set()
        await trio.sleep(1)
        assert task_id not in host.state.live.tasks


async def test_a_message_stream_holds_its_task_only_until_it_ends_or_its_client_leaves(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(sqlite_url(tmp_path / "a2a.db"), executor) as host:
        # Read to the end: every event came from the feed, and the hold is let go.
        finished = await host.stream_message(request("echo hello"), ALICE)
        frames: list[bytes] = []

        async def collect(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                frames.append(message["body"])

        await _event_stream(finished, lambda _, text: text, 15.0, str).send(
            collect, trio.sleep_forever
        )
        assert b"TASK_STATE_COMPLETED" in b"".join(frames)
        assert host.state.live.tasks == {}

        # A client that leaves mid-stream: only the running execution still holds the task.
        held = await host.stream_message(request("hold"), ALICE)
        task_id = held._task_id

        async def leave() -> dict[str, Any]:
            await trio.sleep(1)
            return {"type": "http.disconnect"}

        with trio.fail_after(5):
            await _event_stream(held, lambda _, text: text, 15.0, str).send(collect, leave)
        assert host.state.live.tasks[task_id].users == 1
        executor.gate.release.set()
        await trio.sleep(1)
        assert task_id not in host.state.live.tasks


async def test_a_connection_whose_stream_ended_is_closed_once_idle_like_any_other(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Ending the body makes hypercorn report http.disconnect and restart its
    # keep-alive timer within that same send; a stream ending under its
    # disconnect watcher cancelled that, and the connection stayed open.
    def configure(app: Any) -> None:
        app.mount("", card=make_card(), executor=ScriptedExecutor())

    async with live_server(tmp_path, configure) as server:
        port = int(server.url.rsplit(":", 1)[1])
        connection = await trio.open_tcp_stream("127.0.0.1", port)
        params = {"message": user_message("echo hi")}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
        ).encode()
        head = (
            "POST /jsonrpc HTTP/1.1\r\nHost: test\r\nA2A-Version: 1.0\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        await connection.send_all(head.encode() + body)
        received = b""
        while not received.endswith(b"\r\n0\r\n\r\n"):  # the end of the chunked body
            received += await connection.receive_some()
        assert b"TASK_STATE_COMPLETED" in received
        with trio.fail_after(Config.keep_alive_timeout + 1):
            assert await connection.receive_some() == b""  # closed by the server
        await connection.aclose()

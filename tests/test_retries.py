"""A retried SendMessage gets the original task or answer instead of new work (spec 3.3.1).

The same caller sending the same messageId with the same content within
``retry_window`` is a retry; different content under a reused messageId is
new work, as is the same message from another caller.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from a2a_trio import A2AApp, HostSettings, Principal, TaskState
from a2a_trio.protocol import Message, Part, Role, SendMessageConfiguration, SendMessageRequest
from a2a_trio.runtime import AgentHost
from a2a_trio.store import TaskStore

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message

ALICE = Principal("alice", authenticated=True)
BOB = Principal("bob", authenticated=True)


def message_request(
    text: str, message_id: str, *, return_immediately: bool = False
) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=message_id, role=Role.USER, parts=[Part(text=text)]),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


@asynccontextmanager
async def host_on(
    path: Path, executor: ScriptedExecutor, **settings: Any
) -> AsyncIterator[AgentHost]:
    store = TaskStore(path)
    host = AgentHost(name="test", executor=executor, store=store, settings=HostSettings(**settings))
    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        try:
            yield host
        finally:
            await host.close()
    store.close()


async def test_a_repeated_message_returns_the_original_task_and_runs_once(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor) as host:
        first = await host.send_message(message_request("echo once", "m-1"), ALICE)
        again = await host.send_message(message_request("echo once", "m-1"), ALICE)
        # As the wire shows it (stored timestamps keep milliseconds).
        assert again.to_json() == first.to_json()
        assert executor.executions == 1


async def test_a_retry_while_the_original_runs_joins_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    answers: list[Any] = []
    async with host_on(tmp_path / "r.db", executor) as host:

        async def send() -> None:
            answers.append(await host.send_message(message_request("hold", "m-held"), ALICE))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            await executor.gate.reached.wait()
            nursery.start_soon(send)
            await trio.sleep(1)
            executor.gate.release.set()
        assert executor.executions == 1
        assert answers[0].id == answers[1].id
        assert answers[0].status.state is answers[1].status.state is TaskState.COMPLETED


async def test_different_content_under_a_reused_message_id_is_new_work(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor) as host:
        first = await host.send_message(message_request("echo one", "m-2"), ALICE)
        second = await host.send_message(message_request("echo two", "m-2"), ALICE)
        assert first.id != second.id  # type: ignore[union-attr]
        assert executor.executions == 2


async def test_the_same_message_from_another_caller_is_new_work(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor) as host:
        first = await host.send_message(message_request("echo mine", "m-3"), ALICE)
        second = await host.send_message(message_request("echo mine", "m-3"), BOB)
        assert first.id != second.id  # type: ignore[union-attr]
        assert executor.executions == 2


async def test_a_direct_answer_is_given_again(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor) as host:
        first = await host.send_message(message_request("reply hi", "m-4"), ALICE)
        again = await host.send_message(message_request("reply hi", "m-4"), ALICE)
        assert isinstance(first, Message) and again == first
        assert executor.executions == 1


async def test_retries_are_recognised_after_a_restart(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor) as host:
        first = await host.send_message(message_request("echo durable", "m-5"), ALICE)
    async with host_on(tmp_path / "r.db", executor) as host:
        again = await host.send_message(message_request("echo durable", "m-5"), ALICE)
    assert again.to_json() == first.to_json()
    assert executor.executions == 1


async def test_a_retry_after_the_window_is_new_work(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor, retry_window=0.2) as host:
        first = await host.send_message(message_request("echo late", "m-6"), ALICE)
        await trio.sleep(0.3)  # the window is wall-clock time, as the stored receipts are
        second = await host.send_message(message_request("echo late", "m-6"), ALICE)
        assert first.id != second.id  # type: ignore[union-attr]


async def test_a_window_of_0_turns_retries_off(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor, retry_window=0) as host:
        await host.send_message(message_request("echo off", "m-7"), ALICE)
        await host.send_message(message_request("echo off", "m-7"), ALICE)
        assert executor.executions == 2


async def test_a_retried_continuation_does_not_run_the_task_again(tmp_path: Path) -> None:
    executor = ScriptedExecutor()
    async with host_on(tmp_path / "r.db", executor) as host:
        asked = await host.send_message(message_request("ask", "m-8"), ALICE)
        follow_up = SendMessageRequest(
            message=Message(
                message_id="m-9", role=Role.USER, parts=[Part(text="Ada")], task_id=asked.id
            )
        )
        done = await host.send_message(follow_up, ALICE)
        again = await host.send_message(follow_up, ALICE)
        assert again.to_json() == done.to_json()
        assert done.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
        assert executor.executions == 2


EXECUTOR = ScriptedExecutor()


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=EXECUTOR)


async def test_a_retried_stream_replays_the_original_events(tmp_path: Path) -> None:
    EXECUTOR.executions = 0
    async with live_server(tmp_path, mount) as server:
        params = {"message": user_message("echo streamed", messageId=str(uuid.uuid4()))}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
        first = await server.sse("POST", "/jsonrpc", json=body)
        again = await server.sse("POST", "/jsonrpc", json=body)
        assert again == first
        assert len(first) == 4
        assert EXECUTOR.executions == 1
        # The blocking binding answers the same retry with the task it made.
        sent = await _send(server, params)
        assert sent["result"]["task"]["id"] == first[0]["result"]["task"]["id"]
        assert EXECUTOR.executions == 1


async def _send(server: LiveServer, params: dict[str, Any]) -> dict[str, Any]:
    return await server.jsonrpc("SendMessage", params)

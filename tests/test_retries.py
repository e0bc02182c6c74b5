"""A retried SendMessage gets the original task or answer instead of new work (spec 3.3.1).

The same caller sending the same messageId with the same content within
``retry_window`` is a retry; different content under a reused messageId is
new work, as is the same message from another caller.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from a2a_trio import (
    A2AApp,
    AgentExecutor,
    EventQueue,
    Principal,
    RequestContext,
    TaskState,
    TaskUpdater,
)
from a2a_trio.protocol import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
)
from a2a_trio.runtime import AgentHost

from .agents import Gate, ScriptedExecutor
from .conftest import live_server, make_card, user_message
from .test_host import running_host

ALICE = Principal("alice", authenticated=True)
BOB = Principal("bob", authenticated=True)


def message_request(
    text: str, message_id: str, *, return_immediately: bool = False
) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=message_id, role=Role.USER, parts=[Part(text=text)]),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


async def send_and_leave(host: AgentHost, request: SendMessageRequest, gate: trio.Event) -> None:
    """Send, then go away (a client timeout) once ``gate`` is set, before the answer."""
    with trio.move_on_after(3600) as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host.send_message, request, ALICE)
            await gate.wait()
            scope.cancel()


async def left_while_held(host: AgentHost, executor: ScriptedExecutor, message_id: str) -> None:
    """A ``hold`` message whose client goes away while it runs; then it completes."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            send_and_leave, host, message_request("hold", message_id), executor.gate.reached
        )
    executor.gate.release.set()
    await trio.sleep(1)


async def test_a_message_sent_again_after_its_answer_is_new_work(database: str) -> None:
    # The client has its answer, so it is asking again (the conformance kit does this).
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        first = await host.send_message(message_request("echo once", "m-1"), ALICE)
        again = await host.send_message(message_request("echo once", "m-1"), ALICE)
        assert again.id != first.id  # type: ignore[union-attr]
        assert executor.executions == 2


async def test_a_retry_after_the_client_went_away_gets_the_original_task(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        await left_while_held(host, executor, "m-gone")
        again = await host.send_message(message_request("hold", "m-gone"), ALICE)
        assert again.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
        assert executor.executions == 1
        assert again.artifacts and again.artifacts[0].parts[0].text == "released"  # type: ignore[union-attr]


async def test_a_retry_while_the_original_runs_joins_it(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    answers: list[Any] = []
    async with running_host(database, executor) as host:

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


async def test_different_content_under_a_reused_message_id_is_new_work(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        await left_while_held(host, executor, "m-2")
        second = await host.send_message(message_request("echo two", "m-2"), ALICE)
        assert isinstance(second, Task)
        assert second.artifacts is not None
        assert second.artifacts[0].parts[0].text == "two"
        assert executor.executions == 2


async def test_the_same_message_from_another_caller_is_new_work(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        await left_while_held(host, executor, "m-3")
        executor.gate = type(executor.gate)()
        executor.gate.release.set()
        await host.send_message(message_request("hold", "m-3"), BOB)
        assert executor.executions == 2


class _SlowReplier(AgentExecutor):
    """Answers with a single Message once released: no task is ever made."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.release = trio.Event()
        self.executions = 0

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        self.executions += 1
        self.started.set()
        await self.release.wait()
        await queue.enqueue_event(
            Message(
                message_id=f"answer-{self.executions}", role=Role.AGENT, parts=[Part(text="hi")]
            )
        )


async def test_a_direct_answer_the_client_missed_is_given_to_its_retry(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = _SlowReplier()
    async with running_host(database, executor) as host:
        # The client leaves before anything was made: the receipt is stored with the answer.
        await send_and_leave(host, message_request("hi", "m-4"), executor.started)
        executor.release.set()
        await trio.sleep(1)
        again = await host.send_message(message_request("hi", "m-4"), ALICE)
        assert isinstance(again, Message) and again.message_id == "answer-1"
        assert executor.executions == 1


async def test_retries_are_recognised_after_a_restart(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        await left_while_held(host, executor, "m-5")
    async with running_host(database, executor) as host:
        again = await host.send_message(message_request("hold", "m-5"), ALICE)
    assert again.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
    assert executor.executions == 1


async def test_a_retry_after_the_window_is_new_work(database: str) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor, retry_window=0.5) as host:
        await left_while_held(host, executor, "m-6")  # real time: 1 s, past the window
        await host.send_message(message_request("hold", "m-6"), ALICE)
        assert executor.executions == 2


async def test_a_window_of_0_turns_retries_off(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor, retry_window=0) as host:
        await left_while_held(host, executor, "m-7")
        await host.send_message(message_request("hold", "m-7"), ALICE)
        assert executor.executions == 2


class _SlowFinisher(AgentExecutor):
    """Asks for input; the follow-up completes the task once released."""

    def __init__(self) -> None:
        self.continued = trio.Event()
        self.release = trio.Event()
        self.executions = 0

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        self.executions += 1
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
            await updater.start_work()
            await updater.requires_input("Name?")
            return
        await updater.start_work()
        self.continued.set()
        await self.release.wait()
        await updater.complete(f"done: {context.user_text()}")


async def test_a_retried_continuation_does_not_run_the_task_again(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = _SlowFinisher()
    async with running_host(database, executor) as host:
        asked = await host.send_message(message_request("start", "m-8"), ALICE)
        assert isinstance(asked, Task)
        follow_up = SendMessageRequest(
            message=Message(
                message_id="m-9", role=Role.USER, parts=[Part(text="Ada")], task_id=asked.id
            )
        )
        await send_and_leave(host, follow_up, executor.continued)
        executor.release.set()
        await trio.sleep(1)
        again = await host.send_message(follow_up, ALICE)
        assert again.status.state is TaskState.COMPLETED  # type: ignore[union-attr]
        assert executor.executions == 2


EXECUTOR = ScriptedExecutor()


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=EXECUTOR)


async def test_a_stream_the_client_left_is_replayed_to_its_retry(
    tmp_path: Path, database: str
) -> None:
    EXECUTOR.executions = 0
    EXECUTOR.gate = Gate()
    async with live_server(tmp_path, mount, database=database) as server:
        params = {"message": user_message("hold", messageId=str(uuid.uuid4()))}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
        # The client reads the task and WORKING, then goes away.
        async with server.client.stream("POST", "/jsonrpc", json=body) as response:
            seen = 0
            # A cancel, not a break, so that httpx's nested generators all end here
            # (see tests/test_cluster.py, frames).
            with trio.CancelScope() as reading:
                async for line in response.aiter_lines():
                    seen += line.startswith("data:") and not reading.cancel_called
                    if seen == 2:
                        reading.cancel()
        # The server hears of the departure and keeps the receipt before the
        # task goes on (under load that can take a while: the test waits for it).
        with trio.fail_after(10):
            since = datetime.now(UTC) - timedelta(minutes=1)
            while not await server.app.store.remembered_messages("default", since):  # noqa: ASYNC110
                await trio.sleep(0.01)
        EXECUTOR.gate.release.set()
        again = await server.sse("POST", "/jsonrpc", json=body)
        states = [
            frame["result"].get("task", frame["result"].get("statusUpdate", {})).get("status")
            for frame in again
        ]
        assert [s["state"] for s in states if s] == [
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
        ]
        assert "artifactUpdate" in again[2]["result"]
        assert EXECUTOR.executions == 1
        # A client that got the whole stream and sends the message again asks again.
        await server.sse("POST", "/jsonrpc", json=body)
        assert EXECUTOR.executions == 2


async def test_a_retry_joins_its_original_though_other_content_came_under_its_id(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    answers: dict[str, Any] = {}
    async with running_host(database, executor) as host:

        async def send(name: str, text: str) -> None:
            answers[name] = await host.send_message(message_request(text, "m-shared"), ALICE)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send, "a", "hold")
            await executor.gate.reached.wait()
            nursery.start_soon(send, "b", "echo other")
            await trio.sleep(0.5)
            nursery.start_soon(send, "c", "hold")
            await trio.sleep(0.5)
            executor.gate.release.set()
        assert answers["c"].id == answers["a"].id
        assert answers["b"].id != answers["a"].id
        assert executor.executions == 2


async def test_a_blocking_client_that_gives_up_finds_the_original_on_retry(
    tmp_path: Path, database: str
) -> None:
    EXECUTOR.executions = 0
    EXECUTOR.gate = Gate()
    async with live_server(tmp_path, mount, database=database) as server:
        params = {"message": user_message("hold", messageId=str(uuid.uuid4()))}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        with pytest.raises(httpx.ReadTimeout):
            await server.client.post("/jsonrpc", json=body, timeout=0.5)
        await trio.sleep(0.3)  # the server sees the connection go
        EXECUTOR.gate.release.set()
        again = await server.jsonrpc("SendMessage", params)
    assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert again["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "released"
    assert EXECUTOR.executions == 1

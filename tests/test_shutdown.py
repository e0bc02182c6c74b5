"""Shutdown keeps its promise: the grace the settings give is the grace executions get.

The scripted agent is served in-process by hypercorn on trio's autojump clock,
either as hypercorn's CLI serves it (the grace begins with the ASGI lifespan
shutdown) or as ``a2a-trio serve`` does (:func:`a2a_trio.server.serve`:
the grace begins with the shutdown, while the requests in flight are served).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import pytest
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from a2a_trio import A2AApp, TaskState
from a2a_trio.server import serve as serve_app
from a2a_trio.store.factory import store_at

from .agents import ScriptedExecutor
from .conftest import VERSION_HEADERS, make_card, user_message

#: HostSettings' default grace.
GRACE = 10.0
#: The status message of a task that shutdown ended.
SHUTDOWN_REASON = "The server shut down before the task finished."


@dataclass
class Serving:
    """A served app, a client for it, and the end of its serving."""

    app: A2AApp
    database: str
    client: httpx.AsyncClient
    shutdown: trio.Event
    stopped: trio.Event

    async def send(self, text: str, **configuration: Any) -> dict[str, Any]:
        """SendMessage over JSON-RPC; returns the task answered."""
        params: dict[str, Any] = {"message": user_message(text)}
        if configuration:
            params["configuration"] = configuration
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        response = await self.client.post("/jsonrpc", json=body)
        task: dict[str, Any] = response.json()["result"]["task"]
        return task

    async def working(self, text: str) -> str:
        """Start a task with ``returnImmediately``; returns its id a second later, WORKING."""
        task_id: str = (await self.send(text, returnImmediately=True))["id"]
        await trio.sleep(1)
        assert (await self.stored(task_id))[0] is TaskState.WORKING
        return task_id

    async def stored(self, task_id: str) -> tuple[TaskState, str | None]:
        """The task's state and status text, read from the database."""
        store = store_at(self.database)
        await store.open()
        try:
            stored = await store.get_task("default", task_id, owner=None)
        finally:
            await store.aclose()
        assert stored is not None
        message = stored.task.status.message
        return stored.state, message.parts[0].text if message else None

    async def relay(
        self, method: str, params: dict[str, Any], frames: list[dict[str, Any]]
    ) -> None:
        """Read a JSON-RPC event stream to its end, each event's result into ``frames``."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with self.client.stream("POST", "/jsonrpc", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    frames.append(json.loads(line[5:])["result"])

    async def shut_down(self) -> float:
        """Begin the shutdown; returns how long serving took to end."""
        started = trio.current_time()
        self.shutdown.set()
        await self.stopped.wait()
        return trio.current_time() - started


@asynccontextmanager
async def serving(database: str, *, via: Literal["hypercorn", "serve"]) -> AsyncIterator[Serving]:
    """The scripted agent with default settings on ``database``, served until the block ends."""
    app = A2AApp(database=database)
    app.mount("", card=make_card(), executor=ScriptedExecutor())
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    shutdown, stopped = trio.Event(), trio.Event()
    run = hypercorn_serve if via == "hypercorn" else serve_app

    async def serve(*, task_status: trio.TaskStatus[list[str]]) -> None:
        try:
            await run(app, config, shutdown_trigger=shutdown.wait, task_status=task_status)
        finally:
            stopped.set()

    async with trio.open_nursery() as nursery:
        [url] = await nursery.start(serve)
        # No client timeout: the clock jumps over whatever the server waits for.
        async with httpx.AsyncClient(base_url=url, headers=VERSION_HEADERS, timeout=None) as client:
            yield Serving(app, database, client, shutdown, stopped)
            shutdown.set()


async def test_the_lifespan_shutdown_gives_a_running_task_the_whole_grace(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    # quart-trio cancels its own nursery 5 s into its shutdown; the hosts are not in it.
    async with serving(database, via="hypercorn") as server:
        task_id = await server.working("stubborn")
        took = await server.shut_down()
        assert took == pytest.approx(GRACE, abs=0.5)
        assert await server.stored(task_id) == (TaskState.FAILED, SHUTDOWN_REASON)


async def test_a_blocking_client_whose_task_finishes_within_the_grace_gets_its_answer(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    # hypercorn on its own cuts the requests in flight 3 s into its shutdown.
    answers: list[dict[str, Any]] = []
    async with serving(database, via="serve") as server, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: answer_into(answers, server.send("sleep 6")))
        await trio.sleep(1)
        took = await server.shut_down()
    [task] = answers
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert took == pytest.approx(5.0, abs=0.5)  # serving ends with the last request


async def test_a_blocking_client_whose_task_outlives_the_grace_gets_it_failed(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    answers: list[dict[str, Any]] = []
    async with serving(database, via="serve") as server, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: answer_into(answers, server.send("stubborn")))
        await trio.sleep(1)
        took = await server.shut_down()
    [task] = answers
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert task["status"]["message"]["parts"][0]["text"] == SHUTDOWN_REASON
    assert took == pytest.approx(GRACE, abs=0.5)


async def test_a_stream_ends_with_its_task_failed_by_the_shutdown(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    frames: list[dict[str, Any]] = []
    async with serving(database, via="serve") as server, trio.open_nursery() as nursery:
        params = {"message": user_message("stubborn")}
        nursery.start_soon(server.relay, "SendStreamingMessage", params, frames)
        await trio.sleep(1)
        took = await server.shut_down()
    status = frames[-1]["statusUpdate"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == SHUTDOWN_REASON
    assert took == pytest.approx(GRACE, abs=0.5)


async def test_a_subscription_to_a_waiting_task_does_not_hold_up_the_shutdown(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    # Nothing runs, so nothing needs the grace: serving ends at once, not at
    # hypercorn's graceful_timeout (stretched to the grace and more by serve).
    frames: list[dict[str, Any]] = []
    async with serving(database, via="serve") as server, trio.open_nursery() as nursery:
        task = await server.send("ask")
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        nursery.start_soon(server.relay, "SubscribeToTask", {"id": task["id"]}, frames)
        await trio.sleep(1)
        took = await server.shut_down()
    assert took < 0.5
    [snapshot] = frames
    assert snapshot["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_begin_shutdown_now_ends_the_grace_under_way(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    # What a second SIGINT or SIGTERM does to a2a-trio serve.
    async with serving(database, via="serve") as server:
        task_id = await server.working("stubborn")
        started = trio.current_time()
        server.shutdown.set()
        await trio.sleep(2)
        server.app.begin_shutdown(now=True)
        await server.stopped.wait()
        assert trio.current_time() - started == pytest.approx(2.0, abs=0.5)
    assert await server.stored(task_id) == (TaskState.FAILED, SHUTDOWN_REASON)


async def answer_into(answers: list[dict[str, Any]], sending: Awaitable[dict[str, Any]]) -> None:
    answers.append(await sending)

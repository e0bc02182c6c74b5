"""Shutdown keeps its promise: the grace the settings give is the grace executions get.

The scripted agent is served in-process by hypercorn on trio's autojump clock,
as hypercorn's CLI serves it (the grace begins with the ASGI lifespan shutdown).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from a2a_trio import A2AApp, TaskState
from a2a_trio.store import TaskStore

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
    database: Path
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
        assert self.stored(task_id)[0] is TaskState.WORKING
        return task_id

    def stored(self, task_id: str) -> tuple[TaskState, str | None]:
        """The task's state and status text, read from the database file."""
        store = TaskStore(self.database)
        try:
            stored = store.get_task("default", task_id, owner=None)
        finally:
            store.close()
        assert stored is not None
        message = stored.task.status.message
        return stored.state, message.parts[0].text if message else None

    async def shut_down(self) -> float:
        """Begin the shutdown; returns how long serving took to end."""
        started = trio.current_time()
        self.shutdown.set()
        await self.stopped.wait()
        return trio.current_time() - started


@asynccontextmanager
async def serving(tmp_path: Path) -> AsyncIterator[Serving]:
    """The scripted agent with default settings, served until the block ends."""
    database = tmp_path / "a2a.db"
    app = A2AApp(database=database)
    app.mount("", card=make_card(), executor=ScriptedExecutor())
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    shutdown, stopped = trio.Event(), trio.Event()

    async def serve(*, task_status: trio.TaskStatus[list[str]]) -> None:
        try:
            await hypercorn_serve(
                app, config, shutdown_trigger=shutdown.wait, task_status=task_status
            )
        finally:
            stopped.set()

    async with trio.open_nursery() as nursery:
        [url] = await nursery.start(serve)
        # No client timeout: the clock jumps over whatever the server waits for.
        async with httpx.AsyncClient(base_url=url, headers=VERSION_HEADERS, timeout=None) as client:
            yield Serving(app, database, client, shutdown, stopped)
            shutdown.set()


async def test_the_lifespan_shutdown_gives_a_running_task_the_whole_grace(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # quart-trio cancels its own nursery 5 s into its shutdown; the hosts are not in it.
    async with serving(tmp_path) as server:
        task_id = await server.working("stubborn")
        took = await server.shut_down()
        assert took == pytest.approx(GRACE, abs=0.5)
        assert server.stored(task_id) == (TaskState.FAILED, SHUTDOWN_REASON)

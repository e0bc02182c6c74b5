"""The asyncio bridge: asyncio agents served by the trio host, in a live server.

The agents below run on the bridge's asyncio loop, in its own thread, so these
tests run on real time (a mock clock cannot see that thread); every wait is
bounded. What the asyncio side does it reports through ``threading.Event``s.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest
import trio

from a2a_trio import (
    A2AApp,
    AgentExecutor,
    AsyncioAgentExecutor,
    AsyncioBridge,
    AsyncioEventQueue,
    EventQueue,
    HostSettings,
    RequestContext,
    TaskUpdater,
)
from a2a_trio.adapters.asyncio import THREAD_NAME
from a2a_trio.store.factory import store_at

from .conftest import LiveServer, live_server, make_card, user_message

#: Bound on every wait for the other thread.
PATIENCE = 10.0


class HeldAgent(AsyncioAgentExecutor):
    """Starts work, then waits on asyncio until cancelled; records when it was."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.cancelled_at = 0.0
        self.loop_thread = ""

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work("holding")
        self.loop_thread = threading.current_thread().name
        asyncio.get_running_loop()  # raises unless this runs on an asyncio loop
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled_at = time.monotonic()
            self.cancelled.set()
            raise


class FailingAgent(AsyncioAgentExecutor):
    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        await asyncio.sleep(0)
        raise ValueError("the model is on fire")


class CountingAgent(AsyncioAgentExecutor):
    """Streams ``n`` artifact chunks numbered in order, yielding to asyncio between some."""

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        n = int(context.user_text())
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        artifact = "numbers"
        for i in range(n):
            await updater.add_artifact(
                str(i), artifact_id=artifact, append=i > 0, last_chunk=i == n - 1
            )
            if i % 7 == 0:
                await asyncio.sleep(0)
        await updater.complete()


class StallingAgent(AsyncioAgentExecutor):
    """Blocks its asyncio loop (a blocking call in async code) until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        self.started.set()
        self.release.wait(PATIENCE)  # blocks the whole asyncio loop, on purpose
        await updater.complete("released")


class TrioEcho(AgentExecutor):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        await updater.complete(context.user_text())


async def wait_for(event: threading.Event) -> None:
    assert await trio.to_thread.run_sync(event.wait, PATIENCE), "the asyncio side never got there"


def bridge_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


async def start_held(server: LiveServer, agent: HeldAgent, prefix: str = "") -> str:
    body = await server.jsonrpc(
        "SendMessage",
        {"message": user_message("hold"), "configuration": {"returnImmediately": True}},
        prefix=prefix,
    )
    task_id: str = body["result"]["task"]["id"]
    await wait_for(agent.started)
    return task_id


async def test_an_asyncio_agent_runs_on_an_asyncio_loop_in_its_own_thread(tmp_path: Path) -> None:
    agent = HeldAgent()
    async with live_server(tmp_path, lambda app: app.mount("", make_card(), agent)) as server:
        task_id = await start_held(server, agent)
        assert agent.loop_thread.startswith(THREAD_NAME)
        assert agent.loop_thread != threading.current_thread().name
        got = await server.jsonrpc("GetTask", {"id": task_id})
        assert got["result"]["status"]["state"] == "TASK_STATE_WORKING"
        assert got["result"]["status"]["message"]["parts"] == [{"text": "holding"}]
        await server.jsonrpc("CancelTask", {"id": task_id})


async def test_cancel_stops_the_asyncio_task_within_50_ms_of_the_answer(tmp_path: Path) -> None:
    agent = HeldAgent()
    async with live_server(tmp_path, lambda app: app.mount("", make_card(), agent)) as server:
        task_id = await start_held(server, agent)
        body = await server.jsonrpc("CancelTask", {"id": task_id})
        answered_at = time.monotonic()
        assert body["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await wait_for(agent.cancelled)
        assert agent.cancelled_at - answered_at < 0.050
        got = await server.jsonrpc("GetTask", {"id": task_id})
        assert got["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_an_exception_in_the_asyncio_agent_ends_the_task_failed_with_the_reason(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, lambda app: app.mount("", make_card(), FailingAgent())) as s:
        body = await s.jsonrpc("SendMessage", {"message": user_message("go")})
        status = body["result"]["task"]["status"]
        assert status["state"] == "TASK_STATE_FAILED"
        assert status["message"]["parts"] == [
            {"text": "The agent failed: ValueError: the model is on fire"}
        ]


async def test_events_reach_the_stream_in_the_order_the_asyncio_agent_enqueued_them(
    tmp_path: Path,
) -> None:
    n = 1000  # far more than the bridge's window and the host's queue
    async with live_server(tmp_path, lambda app: app.mount("", make_card(), CountingAgent())) as s:
        frames = await s.sse(
            "POST",
            "/rest/message:stream",
            json={"message": user_message(str(n))},
        )
    chunks = [
        f["artifactUpdate"]["artifact"]["parts"][0]["text"] for f in frames if "artifactUpdate" in f
    ]
    assert chunks == [str(i) for i in range(n)]
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_shutdown_with_a_bridged_agent_running_leaves_no_thread_and_no_task_working(
    tmp_path: Path,
) -> None:
    agent = HeldAgent()
    settings = HostSettings(shutdown_grace=0.1)
    async with live_server(
        tmp_path, lambda app: app.mount("", make_card(), agent), host_settings=settings
    ) as server:
        task_id = await start_held(server, agent)
        assert bridge_threads()
    assert agent.cancelled.is_set()
    assert bridge_threads() == []
    store = store_at(tmp_path / "a2a.db")
    await store.open()
    try:
        stored = await store.get_task("default", task_id, owner=None)
        assert await store.unfinished_tasks("default") == []
    finally:
        await store.aclose()
    assert stored is not None
    assert stored.state.value == "TASK_STATE_FAILED"


async def test_a_stalled_asyncio_agent_does_not_block_the_trio_loop(tmp_path: Path) -> None:
    agent = StallingAgent()

    def mount(app: A2AApp) -> None:
        app.mount("/stalled", make_card(), agent, name="stalled")
        app.mount("/trio", make_card(), TrioEcho(), name="trio")

    async with live_server(tmp_path, mount) as server:
        try:
            body = await server.jsonrpc(
                "SendMessage",
                {"message": user_message("stall"), "configuration": {"returnImmediately": True}},
                prefix="/stalled",
            )
            task_id = body["result"]["task"]["id"]
            await wait_for(agent.started)
            # The asyncio loop is blocked now; the trio loop answers meanwhile.
            with trio.fail_after(PATIENCE / 2):
                card = await server.client.get("/stalled/.well-known/agent-card.json")
                echoed = await server.jsonrpc(
                    "SendMessage", {"message": user_message("still here")}, prefix="/trio"
                )
            assert card.status_code == 200
            assert echoed["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            assert not agent.release.is_set()
        finally:
            agent.release.set()
        with trio.fail_after(PATIENCE):
            while True:
                got = await server.jsonrpc("GetTask", {"id": task_id}, prefix="/stalled")
                if got["result"]["status"]["state"] == "TASK_STATE_COMPLETED":
                    break
                await trio.sleep(0.01)


async def test_two_executions_share_the_agent_loop_and_run_at_once(tmp_path: Path) -> None:
    agent = HeldAgent()
    async with live_server(tmp_path, lambda app: app.mount("", make_card(), agent)) as server:
        first = await start_held(server, agent)
        agent.started.clear()
        second = await start_held(server, agent)
        for task_id in (first, second):
            got = await server.jsonrpc("GetTask", {"id": task_id})
            assert got["result"]["status"]["state"] == "TASK_STATE_WORKING"
            await server.jsonrpc("CancelTask", {"id": task_id})


async def test_a_bridge_outside_a_host_says_its_loop_is_not_running() -> None:
    bridge = AsyncioBridge(HeldAgent())
    queue, _ = EventQueue.open()
    context = RequestContext(task_id="t", context_id="c")
    with pytest.raises(RuntimeError, match="not running"):
        await bridge.execute(context, queue)


async def test_the_bridge_lifespan_starts_and_joins_its_thread() -> None:
    bridge = AsyncioBridge(HeldAgent())
    async with bridge.lifespan():
        [thread] = bridge_threads()
        assert thread.is_alive()
    assert not thread.is_alive()
    assert bridge_threads() == []


def test_an_asyncio_executor_mounted_by_import_path_is_bridged(tmp_path: Path) -> None:
    app = A2AApp(database=tmp_path / "a2a.db")
    mount = app.mount("", make_card(), "tests.test_asyncio_bridge:FailingAgent")
    assert isinstance(mount.host.executor, AsyncioBridge)
    assert isinstance(mount.host.executor.agent, FailingAgent)


async def test_a_bridge_serves_one_host_at_a_time() -> None:
    bridge = AsyncioBridge(HeldAgent())
    async with bridge.lifespan():
        with pytest.raises(RuntimeError, match="one host at a time"):
            async with bridge.lifespan():
                pass  # pragma: no cover
    async with bridge.lifespan():  # and again once the first has ended
        assert len(bridge_threads()) == 1
    assert bridge_threads() == []

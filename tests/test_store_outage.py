"""A store that fails for a while: tasks whose ending could not be stored end once it is back."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path

import trio
import trio.testing

import a2a_trio
from a2a_trio import HostSettings
from a2a_trio.protocol import TaskState
from a2a_trio.runtime import AgentHost
from a2a_trio.store import Store
from a2a_trio.store.outage import RETRYING_LOGGERS

from .agents import ScriptedExecutor
from .postgres import broken, opened_store, raising_trigger
from .test_host import ALICE, request


def outage(store: Store) -> AbstractContextManager[None]:
    """A real database failure for every change of a task row, for the block."""
    return broken(
        store,
        sqlite="CREATE TRIGGER outage BEFORE UPDATE ON tasks"
        " BEGIN SELECT RAISE(ABORT, 'store down'); END",
        sqlite_undo="DROP TRIGGER outage",
        postgresql=raising_trigger("outage", "tasks", "true", on="UPDATE"),
    )


async def held_task(host: AgentHost, executor: ScriptedExecutor) -> str:
    """Start a task that holds WORKING until its executor's gate opens; its id."""
    answer = await host.send_message(request("hold", return_immediately=True), ALICE)
    await executor.gate.reached.wait()
    return answer.id  # type: ignore[union-attr]


async def test_a_task_whose_ending_cannot_be_stored_ends_failed_once_the_store_is_back(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with opened_store(database) as store:
        host = AgentHost(name="test", executor=executor, store=store, settings=HostSettings())
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            try:
                task_id = await held_task(host, executor)
                with outage(store):
                    # The execution completes, but neither its events nor the host's
                    # FAILED ending can be stored while the outage lasts.
                    executor.gate.release.set()
                    await trio.sleep(5)
                    stored = await store.get_task("test", task_id, owner=None)
                    assert stored is not None and stored.state is TaskState.WORKING
                # The host tries again until it can: the task does not stay WORKING.
                await trio.sleep(30)
                stored = await store.get_task("test", task_id, owner=None)
                assert stored is not None and stored.state is TaskState.FAILED
                message = stored.task.status.message
                assert message is not None and "server failed" in (message.parts[0].text or "")
            finally:
                await host.close()


async def test_a_host_that_stops_during_the_outage_leaves_the_ending_to_the_next_start(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with opened_store(database) as store:
        host = AgentHost(name="test", executor=executor, store=store, settings=HostSettings())
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            task_id = await held_task(host, executor)
            with outage(store):
                executor.gate.release.set()
                await trio.sleep(5)
                with trio.fail_after(60):  # the retries end with the host, not after it
                    await host.close()
        await store.aclose()
        # The next start's recovery ends it.
        await store.open()
        restarted = AgentHost(name="test", executor=ScriptedExecutor(), store=store)
        async with trio.open_nursery() as nursery:
            await nursery.start(restarted.run)
            stored = await store.get_task("test", task_id, owner=None)
            assert stored is not None and stored.state is TaskState.FAILED
            await restarted.close()


def test_every_logger_of_the_package_drops_the_retries_of_an_outage() -> None:
    # A filter of a logger sees only its own records: a logger missing from
    # RETRYING_LOGGERS would log a traceback per retry under bare hypercorn.
    package = Path(a2a_trio.__file__).parent
    named = set()
    for source in package.rglob("*.py"):
        text = source.read_text()
        named |= set(re.findall(r'getLogger\("(a2a_trio[\w.]*)"\)', text))
        if "getLogger(__name__)" in text:
            module = source.relative_to(package.parent).with_suffix("")
            named.add(".".join(module.parts))
    assert named and named <= set(RETRYING_LOGGERS), sorted(named - set(RETRYING_LOGGERS))

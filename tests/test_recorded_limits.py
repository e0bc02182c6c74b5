"""What an executor enqueues is held to the request limits; what is stored is read back.

An event that could not be stored, or would take its task over a limit, is
refused and logged before anything of it is written; the execution goes on.
A stored task that cannot be read (written by an older version) is shown as
a stand-in instead of breaking GetTask, every ListTasks page and start-up.
"""

from __future__ import annotations

import logging

import pytest
import trio

from a2a_trio import (
    AgentExecutor,
    EventQueue,
    HostSettings,
    Limits,
    Message,
    Part,
    RequestContext,
    Role,
    TaskState,
    TaskUpdater,
)
from a2a_trio.protocol import GetTaskRequest, InvalidAgentResponseError, ListTasksRequest
from a2a_trio.runtime import AgentHost
from a2a_trio.store.factory import store_at
from a2a_trio.store.records import UNREADABLE_SNAPSHOT

from .postgres import execute, opened_store
from .test_host import ALICE, request, sent_task, states_of


class _OverreachingExecutor(AgentExecutor):
    """Enqueues what the first word of the message names, then completes."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        command = context.user_text()
        if command == "reply-surrogate":
            await queue.enqueue_event(
                Message(message_id="r1", role=Role.AGENT, parts=[Part(text="bad \ud800")])
            )
            return
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        match command:
            case "surrogate":
                await updater.add_artifact("bad \udfff", name="bad")
                await updater.start_work("status \ud800 message")
            case "artifacts":
                for number in range(3):
                    await updater.add_artifact(f"artifact {number}")
            case "chunks":
                artifact_id = await updater.add_artifact([Part(text="a"), Part(text="b")])
                await updater.add_artifact([Part(text="c")], artifact_id=artifact_id, append=True)
            case "many-parts":
                await updater.send_message([Part(text="x")] * 3)
        await updater.add_artifact("fine", name="fine")
        await updater.complete()


LIMITS = Limits(parts=2, artifacts=2)


async def _run_host(database: str, task_status: trio.TaskStatus[AgentHost]) -> None:
    store = store_at(database)
    await store.open()
    host = AgentHost(
        name="test",
        executor=_OverreachingExecutor(),
        store=store,
        settings=HostSettings(limits=LIMITS),
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            task_status.started(host)
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("command", "refusal"),
    [
        ("surrogate", "cannot be stored"),
        ("artifacts", "would hold 3 artifacts; the limit is 2"),
        ("chunks", "has 3 parts; the limit is 2"),
        ("many-parts", "the message has 3 parts; the limit is 2"),
    ],
)
async def test_an_event_over_a_limit_is_refused_and_the_task_goes_on(
    database: str, caplog: pytest.LogCaptureFixture, command: str, refusal: str
) -> None:
    async with trio.open_nursery() as nursery:
        host: AgentHost = await nursery.start(_run_host, database)
        with caplog.at_level(logging.WARNING, logger="a2a_trio.runtime"):
            task = await sent_task(host, command)
        assert refusal in caplog.text
        assert task.status.state is TaskState.COMPLETED
        assert (await states_of(host, task.id))[-1] == "TASK_STATE_COMPLETED"
        # Everything stored reads back.
        stored = await host.get_task(GetTaskRequest(id=task.id), ALICE)
        assert stored.status.state is TaskState.COMPLETED
        assert len(stored.artifacts or []) <= LIMITS.artifacts
        assert all(len(a.parts) <= LIMITS.parts for a in stored.artifacts or [])
        await host.close()


async def test_a_direct_answer_that_cannot_be_rendered_is_refused(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with trio.open_nursery() as nursery:
        host: AgentHost = await nursery.start(_run_host, database)
        with (
            caplog.at_level(logging.WARNING, logger="a2a_trio.runtime"),
            pytest.raises(InvalidAgentResponseError),
        ):
            await host.send_message(request("reply-surrogate"), ALICE)
        assert "cannot be stored" in caplog.text
        task = await sent_task(host, "plain")
        assert task.status.state is TaskState.COMPLETED
        await host.close()


def _unreadable_snapshot(task_id: str, state: str) -> str:
    """A task as an older version could store it: valid JSON, nested past the reader."""
    metadata = '{"a":' * 250 + "1" + "}" * 250
    return (
        f'{{"id":"{task_id}","contextId":"ctx-old","status":{{"state":"{state}"}},'
        f'"metadata":{metadata}}}'
    )


async def _plant(database: str, task_id: str, state: str) -> None:
    """Write the task row as an older version could have (the tables made first)."""
    store = store_at(database)
    await store.open()
    await store.aclose()
    execute(
        database,
        "INSERT INTO tasks (agent, id, owner, context_id, state, updated_at, created_at,"
        " last_seq, snapshot) VALUES ('test', ?, 'alice', 'ctx-old', ?,"
        " '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', 0, ?)",
        task_id,
        state,
        _unreadable_snapshot(task_id, state),
    )


async def test_an_unreadable_stored_task_is_shown_as_a_stand_in(database: str) -> None:
    await _plant(database, "old-done", "TASK_STATE_COMPLETED")
    async with opened_store(database) as store:
        stored = await store.get_task("test", "old-done", owner="alice")
        assert stored is not None
        assert stored.task.id == "old-done" and stored.task.context_id == "ctx-old"
        assert stored.state is TaskState.COMPLETED
        assert stored.task.status.message is not None
        assert stored.task.status.message.parts[0].text == UNREADABLE_SNAPSHOT
        page = await store.list_tasks("test", "alice")
        assert [task.id for task in page.tasks] == ["old-done"]


async def test_recovery_ends_an_unreadable_running_task_failed_and_goes_on(
    database: str,
) -> None:
    await _plant(database, "old-running", "TASK_STATE_WORKING")
    async with trio.open_nursery() as nursery:
        host: AgentHost = await nursery.start(_run_host, database)
        ended = await host.get_task(GetTaskRequest(id="old-running"), ALICE)
        assert ended.status.state is TaskState.FAILED
        listed = await host.list_tasks(ListTasksRequest(), ALICE)
        assert [task.id for task in listed.tasks] == ["old-running"]
        task = await sent_task(host, "plain")
        assert task.status.state is TaskState.COMPLETED
        await host.close()

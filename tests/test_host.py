"""The host runtime on trio's autojump clock: executions, recorder, cancel, shutdown."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from a2a_trio import Principal, TaskState
from a2a_trio.protocol import (
    CancelTaskRequest,
    GetTaskRequest,
    InternalError,
    InvalidAgentResponseError,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_trio.runtime import (
    AgentExecutor,
    AgentHost,
    EventQueue,
    HostSettings,
    RequestContext,
    TaskUpdater,
)
from a2a_trio.store import StoredTask
from a2a_trio.store.factory import store_at

from .agents import ScriptedExecutor
from .postgres import broken, raising_trigger
from .writes import create

ALICE = Principal("alice", authenticated=True)
BOB = Principal("bob", authenticated=True)
#: The states an echoed task's event log records, in order.
COMPLETED_LOG = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
#: The status message of a task that shutdown ended.
SHUTDOWN_REASON = "The server shut down before the task finished."


def request(
    text: str, *, task_id: str | None = None, return_immediately: bool = False
) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.USER,
            parts=[Part(text=text)],
            task_id=task_id,
        ),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


@asynccontextmanager
async def running_host(
    database: str, executor: AgentExecutor | None = None, **settings: Any
) -> AsyncIterator[AgentHost]:
    """A host named ``test`` on ``database`` (the same one each time: restarts)."""
    store = store_at(database)
    await store.open()
    try:
        host = AgentHost(
            name="test",
            executor=executor or ScriptedExecutor(),
            store=store,
            settings=HostSettings(**settings),
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            try:
                yield host
            finally:
                await host.close()
    finally:
        await store.aclose()


async def sent_task(host: AgentHost, text: str, **kw: object) -> Task:
    answer = await host.send_message(request(text, **kw), ALICE)  # type: ignore[arg-type]
    assert isinstance(answer, Task)
    return answer


async def states_of(host: AgentHost, task_id: str) -> list[str]:
    """Every state the event log recorded for the task, in order."""
    import json

    states = []
    for event in await host.store.events_after(host.name, task_id, 0):
        document = json.loads(event.payload)
        if "task" in document:
            states.append(document["task"]["status"]["state"])
        elif "statusUpdate" in document:
            states.append(document["statusUpdate"]["status"]["state"])
    return states


async def test_blocking_send_returns_the_completed_task_with_its_artifact(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "echo hello")
        assert task.status.state is TaskState.COMPLETED
        assert task.artifacts and task.artifacts[0].parts[0].text == "hello"
        assert await states_of(host, task.id) == COMPLETED_LOG


async def test_return_immediately_answers_while_the_task_still_runs(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        task = await sent_task(host, "hold", return_immediately=True)
        assert not task.status.state.is_final
        await executor.gate.reached.wait()
        executor.gate.release.set()
        await trio.sleep(1)
        stored = await host.get_task(GetTaskRequest(id=task.id), ALICE)
        assert stored.status.state is TaskState.COMPLETED


async def test_a_message_answer_creates_no_task(database: str) -> None:
    async with running_host(database) as host:
        answer = await host.send_message(request("reply hi"), ALICE)
        assert isinstance(answer, Message)
        assert answer.parts[0].text == "you said: hi"
        assert answer.context_id
        assert (await host.store.list_tasks("test", "alice")).total_size == 0


async def test_an_executor_that_raises_ends_its_task_failed_with_the_reason(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "raise")
        assert task.status.state is TaskState.FAILED
        assert task.status.message is not None
        assert "the agent broke" in (task.status.message.parts[0].text or "")
        # The host survives: the next message is served normally.
        assert (await sent_task(host, "echo again")).status.state is TaskState.COMPLETED


async def test_an_executor_that_raises_before_any_event_still_yields_a_failed_task(
    database: str,
) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "raise-now")
        assert task.status.state is TaskState.FAILED
        assert await states_of(host, task.id) == ["TASK_STATE_SUBMITTED", "TASK_STATE_FAILED"]


async def test_an_executor_that_produces_nothing_is_an_invalid_agent_response(
    database: str,
) -> None:
    async with running_host(database) as host:
        with pytest.raises(InvalidAgentResponseError):
            await host.send_message(request("silent"), ALICE)


async def test_an_executor_that_returns_leaving_work_unfinished_ends_the_task_failed(
    database: str,
) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "forget")
        assert task.status.state is TaskState.FAILED


async def test_an_illegal_transition_is_refused_and_never_stored(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "illegal")
        assert task.status.state is TaskState.COMPLETED
        assert await states_of(host, task.id) == COMPLETED_LOG


async def test_rejection_from_submitted_is_final(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "reject")
        assert task.status.state is TaskState.REJECTED
        with pytest.raises(UnsupportedOperationError):
            await host.send_message(request("echo more", task_id=task.id), ALICE)


async def test_input_required_task_continues_on_a_message_with_its_task_id(database: str) -> None:
    async with running_host(database) as host:
        asked = await sent_task(host, "ask")
        assert asked.status.state is TaskState.INPUT_REQUIRED
        answered = await sent_task(host, "Ada", task_id=asked.id)
        assert answered.id == asked.id
        assert answered.status.state is TaskState.COMPLETED
        texts = [m.parts[0].text for m in answered.history or []]
        assert texts == ["ask", "What is your name?", "Ada", "done"]


async def test_message_for_a_final_task_is_unsupported(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "echo once")
        with pytest.raises(UnsupportedOperationError):
            await host.send_message(request("echo twice", task_id=task.id), ALICE)


async def test_message_for_an_unknown_task_is_task_not_found(database: str) -> None:
    async with running_host(database) as host:
        with pytest.raises(TaskNotFoundError):
            await host.send_message(request("echo", task_id="no-such-task"), ALICE)


async def test_another_callers_task_is_not_found(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "ask")
        with pytest.raises(TaskNotFoundError):
            await host.get_task(GetTaskRequest(id=task.id), BOB)
        with pytest.raises(TaskNotFoundError):
            await host.send_message(request("x", task_id=task.id), BOB)
        with pytest.raises(TaskNotFoundError):
            await host.cancel_task(CancelTaskRequest(id=task.id), BOB)


async def test_messages_to_one_task_run_one_after_another(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        first = await sent_task(host, "hold", return_immediately=True)
        await executor.gate.reached.wait()
        outcome: list[BaseException] = []

        async def follow_up() -> None:
            try:
                await sent_task(host, "more", task_id=first.id)
            except UnsupportedOperationError as error:
                outcome.append(error)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow_up)
            await trio.sleep(5)
            # The follow-up waits for the running execution instead of overlapping it.
            assert executor.executions == 1
            executor.gate.release.set()
        # The first execution completed the task, so the queued message finds it final.
        assert len(outcome) == 1
        assert executor.executions == 1


def counted_reads(host: AgentHost) -> list[str | None]:
    """The owner of every ``get_task`` of the host's store from now on (None: unscoped)."""
    owners: list[str | None] = []
    plain = host.store.get_task

    async def get_task(agent: str, task_id: str, *, owner: str | None) -> StoredTask | None:
        owners.append(owner)
        return await plain(agent, task_id, owner=owner)

    host.store.get_task = get_task  # type: ignore[method-assign]
    return owners


async def test_a_follow_up_turn_reads_its_task_once(database: str) -> None:
    async with running_host(database) as host:
        asked = await sent_task(host, "ask")
        reads = counted_reads(host)
        again = await sent_task(host, "ask again", task_id=asked.id)
        assert again.status.state is TaskState.INPUT_REQUIRED
        assert reads == ["alice"]  # the caller's read, scoped to its tasks; no second one


async def test_a_follow_up_whose_read_another_overtook_continues_from_that_ones_end(
    database: str,
) -> None:
    # The follow-up's read returns only after another follow-up ran to its
    # pause and let go of the task: what it read is stale, so it reads again.
    async with running_host(database) as host:
        asked = await sent_task(host, "ask")
        plain = host.store.get_task
        read, overtaken = trio.Event(), trio.Event()

        async def get_task(agent: str, task_id: str, *, owner: str | None) -> StoredTask | None:
            stored = await plain(agent, task_id, owner=owner)
            if owner is not None and not read.is_set():
                read.set()
                await overtaken.wait()
            return stored

        host.store.get_task = get_task  # type: ignore[method-assign]
        answers: list[Task] = []

        async def late() -> None:
            answers.append(await sent_task(host, "ask second", task_id=asked.id))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(late)
            await read.wait()
            first = await sent_task(host, "ask first", task_id=asked.id)
            assert first.status.state is TaskState.INPUT_REQUIRED
            for execution in list(host.executions.running):  # it lets go of the task when done
                await execution.done.wait()
            assert not host.state.live.tasks
            overtaken.set()
        [second] = answers
        assert second.status.state is TaskState.INPUT_REQUIRED
        texts = [m.parts[0].text for m in second.history or []]
        question = "What is your name?"
        assert texts == ["ask", question, "ask first", question, "ask second", question]


async def test_cancel_of_completed_task_is_not_cancelable(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "echo done")
        with pytest.raises(TaskNotCancelableError):
            await host.cancel_task(CancelTaskRequest(id=task.id), ALICE)


async def test_cancel_calls_the_executor_and_ends_the_task_canceled(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        task = await sent_task(host, "hold", return_immediately=True)
        await executor.gate.reached.wait()
        canceled = await host.cancel_task(CancelTaskRequest(id=task.id), ALICE)
        assert canceled.status.state is TaskState.CANCELED
        assert executor.cancel_calls == 1


async def test_cancel_of_an_input_required_task_ends_it_canceled(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "ask")
        canceled = await host.cancel_task(CancelTaskRequest(id=task.id), ALICE)
        assert canceled.status.state is TaskState.CANCELED


async def test_an_executor_ignoring_cancel_is_stopped_once_its_task_is_canceled(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor, cancel_grace=5.0) as host:
        task = await sent_task(host, "stubborn", return_immediately=True)
        await trio.sleep(1)
        canceled = await host.cancel_task(CancelTaskRequest(id=task.id), ALICE)
        assert canceled.status.state is TaskState.CANCELED
        # Stopped at once, not when the 5 s cancel grace runs out.
        await trio.sleep(0.01)
        assert not host.executions.running
        assert (await states_of(host, task.id))[-1] == "TASK_STATE_CANCELED"


async def test_an_executor_working_in_a_loop_stops_within_50_ms_of_the_cancel_answer(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor, cancel_grace=5.0) as host:
        task = await sent_task(host, "loop", return_immediately=True)
        await trio.sleep(1.05)
        canceled = await host.cancel_task(CancelTaskRequest(id=task.id), ALICE)
        answered = trio.current_time()
        assert canceled.status.state is TaskState.CANCELED
        await trio.sleep(1)
        assert executor.loop_stopped_at is not None
        assert executor.loop_stopped_at - answered <= 0.05
        assert all(when <= answered + 0.05 for when in executor.progress_times)
        assert (await states_of(host, task.id))[-1] == "TASK_STATE_CANCELED"


async def test_shutdown_waits_for_the_grace_period_then_fails_running_tasks(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor, shutdown_grace=10.0) as host:
        task = await sent_task(host, "stubborn", return_immediately=True)
        await trio.sleep(1)
        started = trio.current_time()
        await host.close()
        assert trio.current_time() - started == pytest.approx(10.0, abs=0.1)
        stored = await host.store.get_task("test", task.id, owner=None)
        assert stored is not None
        assert stored.state is TaskState.FAILED


async def test_a_host_cancelled_from_outside_fails_running_tasks_at_once_and_records_it(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    # A server that stops hard (its lifespan cut off) skips the grace, not the record.
    store = store_at(database)
    await store.open()
    try:
        host = AgentHost(name="test", executor=ScriptedExecutor(), store=store)
        async with trio.open_nursery() as nursery:
            await nursery.start(host.run)
            task = await sent_task(host, "stubborn", return_immediately=True)
            await trio.sleep(1)
            cancelled_at = trio.current_time()
            nursery.cancel_scope.cancel()
        assert trio.current_time() - cancelled_at < 0.1
        stored = await store.get_task("test", task.id, owner=None)
        assert stored is not None and stored.state is TaskState.FAILED
        assert stored.task.status.message is not None
        assert stored.task.status.message.parts[0].text == SHUTDOWN_REASON
    finally:
        await store.aclose()


async def test_begin_close_now_ends_a_grace_under_way(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_host(database, shutdown_grace=10.0) as host:
        task = await sent_task(host, "stubborn", return_immediately=True)
        host.begin_close()
        await trio.sleep(2)
        host.begin_close(now=True)
        await host.close()
        assert trio.current_time() == pytest.approx(2.0, abs=0.1)
        assert (
            await host.get_task(GetTaskRequest(id=task.id), ALICE)
        ).status.state is TaskState.FAILED


async def test_a_subscription_to_a_waiting_task_ends_when_the_host_closes(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "ask")
        stream = await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE)
        received: list[StreamResponse] = []
        ended = trio.Event()

        async def read() -> None:
            async for _, response in stream:
                received.append(response)
            ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.sleep(60)  # nothing happens to the task, the stream waits
            assert not ended.is_set()
            await host.close()
            with trio.fail_after(1):  # it would wait for the task forever
                await ended.wait()
        [snapshot] = received
        assert snapshot.task is not None
        assert snapshot.task.status.state is TaskState.INPUT_REQUIRED


async def test_tasks_left_running_by_a_crash_are_failed_at_start(database: str) -> None:
    store = store_at(database)
    running = Task.model_validate(
        {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}
    )
    waiting = Task.model_validate(
        {"id": "t2", "contextId": "c1", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}
    )
    await store.open()
    for task in (running, waiting):
        await create(store, task, agent="test", owner="alice")
    await store.aclose()
    async with running_host(database) as host:
        assert (
            await host.get_task(GetTaskRequest(id="t1"), ALICE)
        ).status.state is TaskState.FAILED
        # A task waiting for its client had no running executor: it survives a restart.
        assert (
            await host.get_task(GetTaskRequest(id="t2"), ALICE)
        ).status.state is TaskState.INPUT_REQUIRED


async def test_stream_starts_with_the_task_and_ends_after_the_final_event(database: str) -> None:
    async with running_host(database) as host:
        stream = await host.stream_message(request("echo streamed"), ALICE)
        kinds = []
        async for seq, response in stream:
            kinds.append((seq, next(name for name, value in response if value is not None)))
        assert kinds == [
            (1, "task"),
            (2, "status_update"),
            (3, "artifact_update"),
            (4, "status_update"),
        ]


async def test_a_continued_task_streams_from_its_current_snapshot(database: str) -> None:
    async with running_host(database) as host:
        asked = await sent_task(host, "ask")
        stream = await host.stream_message(request("Ada", task_id=asked.id), ALICE)
        events = [response async for _, response in stream]
        assert events[0].task is not None
        assert events[0].task.status.state is TaskState.INPUT_REQUIRED
        assert events[-1].status_update is not None
        assert events[-1].status_update.status.state is TaskState.COMPLETED


async def test_subscribers_see_the_snapshot_then_every_event_until_the_end(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        task = await sent_task(host, "hold", return_immediately=True)
        await executor.gate.reached.wait()
        first = await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE)
        second = await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE)
        executor.gate.release.set()
        seen_first = [response.to_json() async for _, response in first]
        seen_second = [response.to_json() async for _, response in second]
        assert seen_first == seen_second
        assert '"task"' in seen_first[0]
        assert "TASK_STATE_COMPLETED" in seen_first[-1]


async def test_subscribe_to_a_final_task_is_unsupported(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "echo")
        with pytest.raises(UnsupportedOperationError):
            await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE)


async def test_a_subscriber_resumes_after_its_last_event_id(database: str) -> None:
    async with running_host(database) as host:
        task = await sent_task(host, "echo resumed")
        stream = await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE, last_event_id=2)
        assert [seq async for seq, _ in stream] == [3, 4]


async def test_a_lagging_subscriber_catches_up_from_the_log(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    executor = ScriptedExecutor()
    async with running_host(database, executor, feed_window=1) as host:
        task = await sent_task(host, "hold", return_immediately=True)
        await executor.gate.reached.wait()
        stream = await host.subscribe(SubscribeToTaskRequest(id=task.id), ALICE)
        executor.gate.release.set()
        await trio.sleep(1)  # artifact and completion are both published before we read
        seqs = [seq async for seq, _ in stream]
        assert seqs == [2, 3, 4]


# --- the recorder: one transaction per round, one savepoint per task --------------------------


class _TogetherExecutor(AgentExecutor):
    """Waits for ``start``, then reports a whole echo task without yielding.

    Executions released by the same ``start.set()`` run in the same scheduling
    batch, so the recorder finds all their events in one round.
    """

    def __init__(self) -> None:
        self.start = trio.Event()

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        await self.start.wait()
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        await updater.add_artifact(context.user_text())
        await updater.complete()


async def _send_together(host: AgentHost, start: trio.Event, *texts: str) -> dict[str, Task]:
    answers: dict[str, Task] = {}

    async def send(text: str) -> None:
        answers[text] = await sent_task(host, text)

    async with trio.open_nursery() as nursery:
        for text in texts:
            nursery.start_soon(send, text)
        await trio.testing.wait_all_tasks_blocked()
        start.set()
    return answers


@asynccontextmanager
async def _faulty_host(
    database: str, *, sqlite: str, postgresql: tuple[list[str], list[str]]
) -> AsyncIterator[tuple[AgentHost, _TogetherExecutor]]:
    """A host on a database that carries a fault (real SQL), with gated executions."""
    executor = _TogetherExecutor()
    async with running_host(database, executor) as host:
        with broken(host.store, sqlite=sqlite, postgresql=postgresql):
            yield host, executor


async def test_a_task_whose_events_cannot_be_stored_costs_no_other_task_its_events(
    database: str,
) -> None:
    # A real database failure for one task's artifact only.
    async with _faulty_host(
        database,
        sqlite="CREATE TRIGGER poison BEFORE INSERT ON task_events"
        " WHEN NEW.kind = 'artifact' AND NEW.payload LIKE '%poison%'"
        " BEGIN SELECT RAISE(ABORT, 'poisoned artifact'); END;",
        postgresql=raising_trigger(
            "poison", "task_events", "NEW.kind = 'artifact' AND NEW.payload::text LIKE '%poison%'"
        ),
    ) as (host, executor):
        answers = await _send_together(host, executor.start, "clean one", "poison", "clean two")
        for text in ("clean one", "clean two"):
            task = answers[text]
            assert task.status.state is TaskState.COMPLETED
            assert await states_of(host, task.id) == COMPLETED_LOG
        poisoned = answers["poison"]
        assert poisoned.status.state is TaskState.FAILED
        assert poisoned.status.message is not None
        assert "server failed" in (poisoned.status.message.parts[0].text or "")
        # Nothing of the rolled-back events was stored: only the host's ending.
        assert await states_of(host, poisoned.id) == ["TASK_STATE_SUBMITTED", "TASK_STATE_FAILED"]
        assert not poisoned.artifacts


async def test_a_failed_commit_publishes_nothing_of_its_round_and_the_host_goes_on(
    database: str,
) -> None:
    # A deferred constraint broken by one task's artifact fails the COMMIT itself.
    async with _faulty_host(
        database,
        postgresql=raising_trigger(
            "doom",
            "task_events",
            "NEW.kind = 'artifact' AND NEW.payload::text LIKE '%doom%'",
            deferred=True,
        ),
        sqlite="PRAGMA foreign_keys = ON;"
        " CREATE TABLE doom_parent (id INTEGER PRIMARY KEY);"
        " CREATE TABLE doom_child (parent INTEGER"
        "  REFERENCES doom_parent (id) DEFERRABLE INITIALLY DEFERRED);"
        " CREATE TRIGGER doom AFTER INSERT ON task_events"
        " WHEN NEW.kind = 'artifact' AND NEW.payload LIKE '%doom%'"
        " BEGIN INSERT INTO doom_child VALUES (42); END;",
    ) as (host, executor):
        answers = await _send_together(host, executor.start, "doom", "bystander")
        for task in answers.values():
            assert task.status.state is TaskState.FAILED
            assert await states_of(host, task.id) == ["TASK_STATE_SUBMITTED", "TASK_STATE_FAILED"]
            assert not task.artifacts
        # The transaction did not stay open: the next task is stored as usual.
        executor.start.set()
        later = await sent_task(host, "later")
        assert later.status.state is TaskState.COMPLETED
        assert (await states_of(host, later.id))[-1] == "TASK_STATE_COMPLETED"


class _LeakyExecutor(AgentExecutor):
    """Completes its task, and keeps its queue for after it returned."""

    def __init__(self) -> None:
        self.queues: list[EventQueue] = []

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        self.queues.append(queue)
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        await updater.complete()


async def test_a_queue_used_after_its_execution_ended_is_closed(database: str) -> None:
    executor = _LeakyExecutor()
    async with running_host(database, executor) as host:
        task = await sent_task(host, "hello")
        late = TaskUpdater(executor.queues[0], task.id, task.context_id or "")
        with pytest.raises(trio.ClosedResourceError):
            await late.add_artifact("too late")
        with pytest.raises(trio.ClosedResourceError):
            executor.queues[0].enqueue_event_nowait(task)
        stored = await host.store.get_task(host.name, task.id, owner=None)
        assert stored is not None and stored.state is TaskState.COMPLETED
        assert await states_of(host, task.id) == COMPLETED_LOG


async def test_a_cancel_that_cannot_be_stored_answers_an_error_and_the_host_goes_on(
    database: str, autojump_clock: trio.testing.MockClock
) -> None:
    # A real database failure for every CANCELED status, the canceller's and the host's.
    executor = ScriptedExecutor()
    async with running_host(database, executor) as host:
        no_cancel = broken(
            host.store,
            sqlite="CREATE TRIGGER no_cancel BEFORE INSERT ON task_events"
            " WHEN NEW.payload LIKE '%TASK_STATE_CANCELED%'"
            " BEGIN SELECT RAISE(ABORT, 'no cancel'); END",
            postgresql=raising_trigger(
                "no_cancel", "task_events", "NEW.payload::text LIKE '%TASK_STATE_CANCELED%'"
            ),
        )
        with no_cancel:
            task = await sent_task(host, "hold", return_immediately=True)
            await executor.gate.reached.wait()
            with pytest.raises(InternalError):
                await host.cancel_task(CancelTaskRequest(id=task.id), ALICE)
            # Nothing claims the task was canceled, and the host serves the next message.
            assert "TASK_STATE_CANCELED" not in await states_of(host, task.id)
            later = await sent_task(host, "echo later")
            assert later.status.state is TaskState.COMPLETED

"""SQLite writes a large round on a worker thread; nobody sees it before its commit."""

from __future__ import annotations

from pathlib import Path

import trio

from a2a_trio.protocol import StreamResponse, Task, TaskState, TaskStatus
from a2a_trio.store import EventWrite, NewTask, Round, Share, SqliteStore

MIB = 1024 * 1024


def creation(task_id: str, text_size: int) -> Round:
    task = Task(
        id=task_id,
        context_id="ctx",
        status=TaskStatus(state=TaskState.SUBMITTED),
        metadata={"blob": "x" * text_size},
    )
    payload = StreamResponse(task=task).to_json()
    return Round(
        [Share("agent", task_id, NewTask("alice"), [EventWrite(1, "task", payload, task)])]
    )


async def test_a_large_round_lets_the_event_loop_run_and_is_seen_whole_or_not_at_all(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "big.db")
    await store.open()
    try:
        [created] = await store.record(creation("big", 10))
        assert created.error is None
        task = Task(
            id="big",
            context_id="ctx",
            status=TaskStatus(state=TaskState.WORKING),
            metadata={"blob": "x" * (32 * MIB)},
        )
        payload = StreamResponse(task=task).to_json()
        update = Round([Share("agent", "big", None, [EventWrite(2, "status", payload, task)])])
        views: list[tuple[list[int], int]] = []
        recording = False

        async def watch(written: trio.Event) -> None:
            while not written.is_set():
                await trio.lowlevel.checkpoint()
                # The log first, the task row second: a read that saw the event
                # but not the task it made would have seen the round half-written.
                events = await store.events_after("agent", "big", 1)
                stored = await store.get_task("agent", "big", owner=None)
                assert stored is not None
                if recording:
                    views.append(([event.seq for event in events], stored.last_seq))

        written = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, written)
            await trio.lowlevel.checkpoint()
            recording = True
            [outcome] = await store.record(update)
            written.set()
        assert outcome.error is None
        # The loop served reads while the round was written ...
        assert ([], 1) in views
        # ... and none saw a part of it without the rest.
        assert all(last_seq == 2 for seqs, last_seq in views if seqs)
        assert [event.seq for event in await store.events_after("agent", "big", 1)] == [2]
    finally:
        await store.aclose()


async def test_a_small_round_is_written_on_the_trio_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "small.db")
    await store.open()
    try:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await trio.lowlevel.checkpoint()
                ticks += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            await trio.lowlevel.checkpoint()
            before = ticks
            [outcome] = await store.record(creation("small", 100))
            during = ticks - before
            nursery.cancel_scope.cancel()
        assert outcome.error is None
        assert during == 0  # no scheduling pass: the commit never left the loop
    finally:
        await store.aclose()

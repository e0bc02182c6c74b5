"""WAL checkpoints run on a worker thread, not inside the event loop's commits."""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path

import trio

from a2a_trio.protocol import Task, TaskState, TaskStatus
from a2a_trio.store import SqliteStore, checkpoint_periodically

from .writes import create


async def _write_tasks(store: SqliteStore, count: int, *, first: int = 0) -> None:
    for number in range(first, first + count):
        task = Task(
            id=f"t{number}", context_id="c", status=TaskStatus(state=TaskState.WORKING)
        ).model_copy(update={"metadata": {"padding": "x" * 20_000}})
        await create(store, task, agent="a", owner="o")


def _wal_frames_left(path: Path) -> int:
    """Frames in the WAL not yet copied into the database (another connection asks)."""
    with sqlite3.connect(path) as conn:
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    # That call checkpointed too: what it found is what was left before it.
    return int(frames) - int(copied) if busy == 0 else -1


def _autocheckpoint(store: SqliteStore) -> int:
    return int(store.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0])


async def test_commits_leave_checkpoints_to_the_worker_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "wal.db")
    await store.open()
    async with trio.open_nursery() as nursery:
        await nursery.start(checkpoint_periodically, store, 0.2)
        assert _autocheckpoint(store) == 0
        await _write_tasks(store, 300)  # ~6 MB: past the 1,000 pages SQLite would checkpoint at
        # Nothing was copied by the commits themselves ...
        assert (tmp_path / "wal.db-wal").stat().st_size > 4_000_000
        assert not store.database.checkpointing
        # ... the checkpointer copies it on its thread within its interval.
        await trio.sleep(1.0)
        assert store.database.checkpointing
        assert _wal_frames_left(tmp_path / "wal.db") == 0
        nursery.cancel_scope.cancel()
    assert _autocheckpoint(store) == 1000
    await store.aclose()


async def test_under_steady_writes_the_wal_is_emptied_before_it_grows_past_its_bound(
    tmp_path: Path,
) -> None:
    # A passive checkpoint never catches up with steady writes, and SQLite
    # starts the WAL over only after one that did: without the bound the WAL
    # file only grows (a gigabyte a minute under a SendMessage load).
    store = SqliteStore(tmp_path / "wal.db")
    await store.open()
    wal = tmp_path / "wal.db-wal"
    bound = 1024 * 1024
    largest = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(checkpoint_periodically, store, 0.05, wal_bytes=bound))
        for batch in range(40):  # 40 batches of 20 tasks of ~20 kB: 16 MB, with hardly a pause
            await _write_tasks(store, 20, first=batch * 20)
            largest = max(largest, wal.stat().st_size)
            await trio.sleep(0.01)  # as a server's writes leave the loop to others
        nursery.cancel_scope.cancel()
    await store.aclose()
    # The bound, plus what the writes add within a checkpoint interval or two
    # (~1.6 MB of WAL a batch here, about 8 MB at most); without the bound
    # the WAL reaches 63 MB in this test.
    assert largest < 16 * bound, largest

"""WAL checkpoints on a worker thread instead of inside the event loop's commits."""

from __future__ import annotations

import logging

import trio

from .sqlite import SqliteStore

__all__ = ["checkpoint_periodically"]

log = logging.getLogger("a2a_trio.store")


async def checkpoint_periodically(
    store: SqliteStore,
    interval: float = 1.0,
    thread_bytes: int = 1024 * 1024,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Until cancelled: every ``interval`` seconds with commits, checkpoint the WAL.

    Commits then only append to the WAL. When the interval wrote
    ``thread_bytes`` or more, the copy into the database and its sync happen
    on a worker thread with a connection of its own, while the event loop
    goes on; a smaller WAL is checkpointed in place, as SQLite's automatic
    checkpoint would have (a thread hop costs more than a few pages, and
    keeps trio's autojump clock from jumping in tests). Checkpointing inside
    commits comes back when this returns. The WAL holds at most
    ``interval`` seconds of writes more than SQLite's default would let it.
    """
    store.defer_checkpoints(True)
    try:
        task_status.started()
        done, written = store.commits, store.written
        while True:
            await trio.sleep(interval)
            if store.commits == done:
                continue
            large = store.written - written >= thread_bytes
            done, written = store.commits, store.written
            try:
                if large:
                    # Not abandoned on cancel: the store must not close under it.
                    await trio.to_thread.run_sync(store.checkpoint)
                else:
                    store.checkpoint()
            except Exception:  # a failing checkpoint costs WAL size, not the server
                log.exception("WAL checkpoint of %s failed", store.path)
    finally:
        try:
            store.defer_checkpoints(False)
        except Exception:  # the store is closed or failing: nothing to restore
            log.debug("could not restore automatic checkpoints", exc_info=True)

"""WAL checkpoints on a worker thread instead of inside the event loop's commits."""

from __future__ import annotations

import logging

import trio

from .space import is_disk_full
from .sqlite import SqliteStore

__all__ = ["checkpoint_periodically"]

log = logging.getLogger("a2a_trio.store")


async def checkpoint_periodically(
    store: SqliteStore,
    interval: float = 1.0,
    thread_bytes: int = 1024 * 1024,
    wal_bytes: int = 64 * 1024 * 1024,
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
    commits comes back when this returns.

    Under steady writes a checkpoint never catches up with the WAL, which
    SQLite then never starts over: once it holds ``wal_bytes``, the next
    checkpoint empties it between two writes (:meth:`SqliteStore.empty_wal`),
    the writes waiting meanwhile. So the WAL stays near ``wal_bytes`` at most.
    """
    store.defer_checkpoints(True)
    try:
        task_status.started()
        done, written = store.commits, store.written
        full = False  # the last checkpoint found no space: said once, not at every try
        while True:
            await trio.sleep(interval)
            if store.commits == done:
                continue
            large = store.written - written >= thread_bytes
            done, written = store.commits, store.written
            try:
                if large:
                    # Not abandoned on cancel: the store must not close under it.
                    held_bytes = await trio.to_thread.run_sync(store.checkpoint)
                else:
                    held_bytes = store.checkpoint()
                if held_bytes >= wal_bytes:
                    began = trio.current_time()
                    left = await store.empty_wal()
                    log.info(
                        "emptied the WAL of %s (%d MB) in %.0f ms; %d bytes left",
                        store.path,
                        held_bytes // 2**20,
                        (trio.current_time() - began) * 1000,
                        left,
                    )
            except Exception as error:  # a failing checkpoint costs WAL size, not the server
                if not is_disk_full(error):
                    log.exception("WAL checkpoint of %s failed", store.path)
                elif not full:
                    log.warning("WAL checkpoint of %s: no space left on its disk", store.path)
                full = is_disk_full(error)
            else:
                full = False
    finally:
        try:
            store.defer_checkpoints(False)
        except Exception:  # the store is closed or failing: nothing to restore
            log.debug("could not restore automatic checkpoints", exc_info=True)

"""What the other processes of a deployment record, read back from the log into the feed.

On PostgreSQL several web processes and workers share one database, and
each one's recorder tells only its own hub what it committed. Every round
also sends a wake-up (agent, task, last sequence, sequence before the
round) that every process hears (:class:`~a2a_trio.runtime.cluster.Cluster`).
A :class:`ClusterFeed` is the hub's :class:`~a2a_trio.runtime.cluster.ClusterWatcher`:
for each task that moved past what the hub published, it reads the log
rows after that point (and the task, for its owner and state) and has the
hub publish them, in log order, once. The hub skips what it published
already, whoever got there first: this process's recorder or the read-back.

With nobody subscribed to the feed (for a minute: a client that dropped
may resume), a wake-up only moves the hub's mark for its task (a
dictionary write, no query): nothing is read for nobody.
When the wake-up connection was down, the tasks updated meanwhile are
looked up once it is back.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import trio

from ..store import Store
from .hub import FeedHub

__all__ = ["ClusterFeed"]

log = logging.getLogger("a2a_trio.console")

#: Log rows read per query.
_PAGE = 500
#: Tasks looked at after the wake-up connection was down (most recently updated first).
_MISSED_TASKS = 1_000


class ClusterFeed:
    """Reads back into ``hub`` the rounds other processes recorded (see the module docstring)."""

    def __init__(self, hub: FeedHub, store: Store) -> None:
        self._hub = hub
        self._store = store
        #: Tasks to read back, with the log sequence to read after.
        self._due: dict[tuple[str, str], int] = {}
        self._wanted = trio.Event()
        #: When the wake-ups were last known to be complete (set while some were missed).
        self._missed_since: str | None = None
        self._listening_since = _now()

    # --- told by the cluster ---------------------------------------------------------------

    def task_moved(self, agent: str, task_id: str, seq: int, base: int | None) -> None:
        hub = self._hub
        done = hub.logged(agent, task_id)
        if done is not None and seq <= done:
            return  # published already (this process recorded it, most likely)
        if not hub.watched:
            hub.skip_logged(agent, task_id, seq)
            return
        after = done if done is not None else (base if base is not None else seq - 1)
        key = (agent, task_id)
        self._due[key] = min(self._due.get(key, after), after)
        self._wanted.set()

    def wake_ups_missed(self) -> None:
        if self._missed_since is None:
            self._missed_since = self._listening_since
        self._listening_since = _now()
        self._wanted.set()

    # --- reading back -------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            if self._missed_since is not None:
                since, self._missed_since = self._missed_since, None
                await self._guarded(self._look_back, since)
            due, self._due = self._due, {}
            for (agent, task_id), after in due.items():
                await self._guarded(self._read_back, agent, task_id, after)

    async def _read_back(self, agent: str, task_id: str, after: int) -> None:
        if not self._hub.watched:
            return
        stored = await self._store.get_task(agent, task_id, owner=None)
        if stored is None:
            return
        while True:
            after = max(after, self._hub.logged(agent, task_id) or 0)
            entries = await self._store.timeline(agent, task_id, after=after, limit=_PAGE)
            entries = [entry for entry in entries if entry.seq <= stored.last_seq]
            if not entries:
                return
            self._hub.publish_logged(agent, task_id, stored.owner, entries, stored.state.value)
            after = entries[-1].seq

    async def _look_back(self, since: str) -> None:
        """Queue the tasks updated since ``since`` (the wake-ups of that time were lost)."""
        if not self._hub.watched:
            return
        token: str | None = None
        seen = 0
        while seen < _MISSED_TASKS:
            page = await self._store.browse_tasks(page_size=100, page_token=token)
            for task in page.tasks:
                if task.updated_at < since:
                    self._wanted.set()
                    return
                done = self._hub.logged(task.agent, task.id)
                # A task that was never seen here: only what it did since then.
                after = done if done is not None else (0 if task.created_at >= since else -1)
                if after >= 0:
                    self._due.setdefault((task.agent, task.id), after)
                seen += 1
            token = page.next_page_token
            if not token:
                break
        self._wanted.set()

    @staticmethod
    async def _guarded(work: Callable[..., Awaitable[None]], *args: object) -> None:
        try:
            await work(*args)
        except Exception as error:  # the store is away: the next wake-up reads it all
            log.warning("console feed: could not read other processes' events: %s", error)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")

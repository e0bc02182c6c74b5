"""Follow-ups refused for lack of space after their message was stored: the pause said again.

A follow-up to a paused task whose message was stored, and whose agent's
first event then found the disk full, is answered STORAGE_FULL ("nothing
was stored, try again") and its task stays paused for the retry (see
``Executions._untouched``). Its log still ends with the user's message,
which is what a follow-up under way at a crash leaves too
(:func:`a2a_trio.store.queries.continued`): a restart, or another process
starting on the same database, would end the task FAILED, and the retry
would find it closed. So once the store takes writes again the task's
status is recorded again, unchanged, after the message: the log then says
the turn is over, and the history shows the status message once (an equal
copy, see ``HistoryWindow``). Nothing is written when the task moved
meanwhile (the retry came, a cancel ended it).

Tried with a growing pause, and once more when the host stops. A process
killed before the store took it leaves the task as a crash would.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .cluster import new_token
from .endings import until_stored

if TYPE_CHECKING:
    from .recorder import Recorder
    from .state import HostState

__all__ = ["PendingWithdrawals"]

log = logging.getLogger("a2a_trio.runtime")


class PendingWithdrawals:
    """The refused follow-ups whose task's pause waits to be said again, one retrying task each."""

    def __init__(self, state: HostState, recorder: Recorder) -> None:
        self.name = state.name
        self._state = state
        self._recorder = recorder
        #: The task ids waiting, each with the sequence of its refused follow-up's message.
        self._waiting: dict[str, int] = {}

    @property
    def waiting(self) -> int:
        """How many tasks wait here for their pause to be said again."""
        return len(self._waiting)

    def add(self, task_id: str, seq: int) -> None:
        """Say the task's pause again once the store takes it, if its log still ends at ``seq``."""
        if task_id in self._waiting:
            self._waiting[task_id] = seq
            return
        self._waiting[task_id] = seq
        self._state.finishing().start_soon(self._retry, task_id)

    async def _retry(self, task_id: str) -> None:
        def failed(error: Exception) -> None:
            log.warning(
                "agent %s: the pause of task %s cannot be stored yet: %s",
                self.name,
                task_id,
                error,
            )

        try:
            await until_stored(
                self._state, lambda: self._restate(task_id, self._waiting[task_id]), failed
            )
        finally:
            del self._waiting[task_id]

    async def _restate(self, task_id: str, seq: int) -> bool:
        """Record the task's status again if its log still ends at ``seq``; whether settled.

        False when another process holds the task now: tried again later.
        """
        store, cluster, tasks = self._state.store, self._state.cluster, self._state.live
        stored = await store.get_task(self.name, task_id, owner=None)
        if stored is None or stored.last_seq != seq or not stored.state.is_interrupted:
            return True
        live = tasks.acquire(task_id, stored)
        try:
            async with live.lock:  # no follow-up of this process runs meanwhile
                token = None
                if cluster is not None:  # nor one of another process
                    token = new_token()
                    claim = await cluster.coordination.acquire(
                        self.name, task_id, token, queue=False
                    )
                    if not claim.acquired:
                        return False
                try:
                    stored = await store.get_task(self.name, task_id, owner=None)
                    if stored is None or stored.last_seq != seq or not stored.state.is_interrupted:
                        return True
                    live.feed.reset(stored.task, stored.last_seq)
                    await self._recorder.restate(live)
                    await self._recorder.publish(live)
                    return True
                finally:
                    if token is not None and cluster is not None:
                        cluster.release(token)
        finally:
            tasks.release(live)

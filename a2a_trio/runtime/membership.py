"""One agent host as a member of its cluster: what other processes' work means here.

The :class:`~a2a_trio.runtime.cluster.Cluster` hands each host's
:class:`Membership` the wake-ups of its agent: tasks another process moved
(readers here read them back from the log), cancels for tasks this process
runs, queued executions done or waiting, and the tasks of dead processes to
adopt. CancelTask for a task another process holds is asked of its holder
from here too.
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio

from ..protocol import A2AError, InternalError, Message, StreamResponse, Task, TaskState
from ..store import LoggedEvent, StoredTask
from ..store.coordination import CarriedRound, QueuedOutcome
from ..store.history import messages_in
from .backoff import retrying
from .batches import Batch
from .cluster import Cluster, new_token
from .executions import Executions
from .executor import Principal
from .feed import ReadBack
from .state import ABANDONED, HostState, LiveTask, not_cancelable

__all__ = ["Membership", "QueueWaiters"]

log = logging.getLogger("a2a_trio.runtime")


class QueueWaiters(Protocol):
    """What a membership tells the host's queued executions (see ``runtime.queued``)."""

    def settle(self, live: LiveTask) -> None:
        """The task moved: answer the waiters whose execution has begun writing it."""

    def check_all(self) -> None:
        """Wake-ups may have been lost: look at every execution still waited for."""

    def work_arrived(self) -> None:
        """A queued execution waits for a worker."""

    def done_elsewhere(self, task_id: str, row: int, outcome: QueuedOutcome | None) -> None:
        """A worker finished the queued execution of ``row``, of task ``task_id``
        (``outcome``: if its wake-up carried it)."""


class Membership:
    """The cluster side of one host (a :class:`~a2a_trio.runtime.cluster.ClusterMember`)."""

    def __init__(
        self,
        state: HostState,
        cluster: Cluster,
        *,
        executions: Executions,
        queued: QueueWaiters,
    ) -> None:
        self._state = state
        self._cluster = cluster
        self._executions = executions
        self._queued = queued
        self.name = state.name
        #: Tasks woken in one scheduling pass (a worker's round moves several)
        #: are read back together: one round trip for all.
        self._reading: Batch[LiveTask] = Batch(self._read_back_all)

    # --- adoption ---------------------------------------------------------------------

    async def adopt_orphans(self) -> None:
        """End the unfinished tasks of this agent that no live process holds (at start-up)."""
        for orphan in await self._cluster.coordination.orphans([self.name], unleased=True):
            try:
                await self.adopt(orphan.task_id)
            except Exception:  # one task that cannot be ended must not stop the agent
                log.exception("agent %s: could not end task %s", self.name, orphan.task_id)

    async def adopt(self, task_id: str) -> None:
        """End FAILED a task its process left running, if its lease can be taken."""
        token = new_token()
        claim = await self._cluster.coordination.acquire(self.name, task_id, token, queue=False)
        if not claim.acquired:
            return  # a live process holds it now
        try:
            if await self._executions.end_stored(task_id, ABANDONED):
                log.warning(
                    "task %s of agent %s was running on a process that stopped; ended FAILED",
                    task_id,
                    self.name,
                )
        finally:
            self._cluster.release(token)

    def leases_lost(self) -> None:
        """Found dead by the others, who end its tasks: stop running them here."""
        for execution in list(self._executions.running):
            execution.cancel_scope.cancel()

    # --- reading back what other processes record --------------------------------------

    def task_moved(self, task_id: str, seq: int, carried: CarriedRound | None = None) -> None:
        """Another process recorded events of the task: readers here catch up from the log,
        or from the wake-up when it ``carried`` every event the feed lacks."""
        live = self._state.live.tasks.get(task_id)
        if live is None or seq <= live.feed.current_seq:
            return
        if carried is not None and live.execution is None and carried.base <= live.feed.last_seq:
            try:
                rows = [_read_back(LoggedEvent(*event)) for event in carried.events]
                snapshot = Task.model_validate_json(carried.snapshot)
            except ValueError:  # not as this version writes it: read it back
                log.warning("agent %s: a wake-up of task %s carried no round", self.name, task_id)
            else:
                live.feed.catch_up(rows, snapshot, seq)
                self._queued.settle(live)
                live.feed.notify()
                return
        self.catch_up_soon(live)

    def catch_up_all(self) -> None:
        for live in list(self._state.live.tasks.values()):
            self.catch_up_soon(live)
        self._queued.check_all()

    def catch_up_soon(self, live: LiveTask) -> None:
        nursery = self._state.nursery
        if live.execution is not None or nursery is None:
            return  # this process writes it (or has stopped): nothing to read back
        if live.catching_up:
            live.catch_up_again = True
            return
        live.catching_up = True
        live.users += 1
        nursery.start_soon(self._catch_up, live)

    async def read_back(self, live: LiveTask) -> None:
        """Publish what the log holds of the task beyond its feed (another process wrote it).

        The task is read first, then its events up to it: what is published
        is consistent with the snapshot it comes with (events committed in
        between are read in the next pass).
        """
        store = self._state.store
        while True:
            stored, events = await store.task_since(self.name, live.task_id, live.feed.last_seq)
            if stored is None or self._publish(live, stored, events):
                return

    def _publish(self, live: LiveTask, stored: StoredTask, events: list[LoggedEvent]) -> bool:
        """Publish what was read back of the task; whether it was all of it."""
        rows = [_read_back(e) for e in events if e.seq <= stored.last_seq]
        live.feed.catch_up(rows, stored.task, stored.last_seq)
        self._queued.settle(live)
        return len(rows) == len(events)

    async def _read_back_all(self, lives: list[LiveTask]) -> None:
        """:meth:`read_back` of the tasks woken in one scheduling pass, in one read."""
        tasks = list(dict.fromkeys(lives))
        cursors = [(live.task_id, live.feed.last_seq) for live in tasks]
        read = await self._state.store.tasks_since(self.name, cursors)
        for live in tasks:
            stored, events = read.get(live.task_id, (None, []))
            if stored is not None and not self._publish(live, stored, events):
                live.catch_up_again = True  # the rest in the next pass

    async def _catch_up(self, live: LiveTask) -> None:
        async def read(_: bool) -> None:
            while True:  # and again while other processes move it meanwhile
                live.catch_up_again = False
                await self._reading.add(live)
                if not live.catch_up_again:
                    return

        def refused(error: Exception, pause: float) -> None:
            # No next wake-up may come (its last round, too long to carry):
            # read again while anyone else attends the task.
            if live.users <= 1:
                raise error
            log.warning(
                "agent %s: could not read task %s back (trying again in %.1f s): %s",
                self.name,
                live.task_id,
                pause,
                error,
            )

        try:
            await retrying(read, refused)
        except Exception:  # nobody attends it now: the next reader reads it
            log.exception("agent %s: could not read task %s back", self.name, live.task_id)
        finally:
            live.catching_up = False
            live.feed.notify()  # a waiter for it may read back itself now
            self._state.live.release(live)

    # --- queued executions --------------------------------------------------------------

    def work_arrived(self) -> None:
        """A queued execution waits for a worker (this process may be one)."""
        self._queued.work_arrived()

    def done_elsewhere(self, task_id: str, row: int, outcome: QueuedOutcome | None) -> None:
        """A worker finished a queued execution (maybe one this process waits for)."""
        self._queued.done_elsewhere(task_id, row, outcome)

    # --- cancel ---------------------------------------------------------------------------

    async def cancel(
        self, live: LiveTask, stored: StoredTask, caller: Principal, metadata: dict[str, object]
    ) -> Task:
        """Cancel here if no other live process holds the task, else ask its holder.

        Asked again every quarter lease until the task ends: a holder that
        let go meanwhile, or died, leaves the lease to this process.
        """
        cluster = self._cluster
        token = new_token()
        patience = self._state.settings.cancel_grace + 2 * cluster.lease_seconds + 5
        with trio.move_on_after(patience):
            while True:
                claim = await cluster.coordination.acquire(
                    self.name, live.task_id, token, queue=False
                )
                if claim.acquired:
                    # The holder may have ended it before letting go (this cancel,
                    # asked of it): what it recorded comes first.
                    try:
                        await self.read_back(live)
                    except BaseException:
                        cluster.release(token)
                        raise
                    snapshot = live.feed.snapshot
                    if snapshot is not None and snapshot.status.state.is_final:
                        cluster.release(token)
                        if snapshot.status.state is TaskState.CANCELED:
                            return snapshot
                        raise not_cancelable(live.task_id, snapshot.status.state)
                    return await self._executions.cancel(live, stored, caller, metadata, token)
                await cluster.request_cancel(
                    self.name, live.task_id, claim.holder or "", caller.identifier
                )
                with trio.move_on_after(cluster.lease_seconds / 4):
                    while True:
                        wakeup = live.feed.wakeup
                        snapshot = live.feed.snapshot
                        if snapshot is not None and snapshot.status.state.is_final:
                            if snapshot.status.state is TaskState.CANCELED:
                                return snapshot
                            raise not_cancelable(live.task_id, snapshot.status.state)
                        await wakeup.wait()
        raise InternalError(f"The process running task {live.task_id} did not end it in time")

    def cancel_here(self, task_id: str, owner: str) -> None:
        """Another process asks for a cancel of a task this one runs."""
        nursery = self._state.nursery
        if nursery is not None:
            nursery.start_soon(self._cancel_for, task_id, owner)

    async def _cancel_for(self, task_id: str, owner: str) -> None:
        try:
            stored = await self._state.store.get_task(self.name, task_id, owner=None)
            if stored is None or stored.state.is_final:
                return
            token = new_token()
            claim = await self._cluster.coordination.acquire(self.name, task_id, token, queue=False)
            if not claim.acquired:
                return  # another process holds it now: the canceller asks it
            live = self._state.live.acquire(task_id, stored)
            try:
                await self._executions.cancel(live, stored, Principal(identifier=owner), {}, token)
            finally:
                self._state.live.release(live)
        except A2AError:
            pass  # final meanwhile: the canceller sees it in the log
        except Exception:
            log.exception("agent %s: could not cancel task %s", self.name, task_id)


def _read_back(event: LoggedEvent) -> ReadBack:
    """A row read back from the log as the feed publishes it, with the messages it adds."""
    if event.kind == "message":  # a history row only (a continuation's message, say)
        return event.seq, None, None, [Message.model_validate_json(event.payload)]
    response = StreamResponse.model_validate_json(event.payload)
    return event.seq, response, event.payload, messages_in(response)

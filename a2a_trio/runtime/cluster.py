"""This process as one member of several serving one database (PostgreSQL).

A :class:`Cluster` is the process's side of
:class:`~a2a_trio.store.coordination.Coordination`: it joins, keeps the
membership alive by heartbeat, listens for the members' wake-ups on one
connection and hands them to the hosts, lets leases go in batches, and
adopts the tasks of members that died. The hosts ask it for task leases
(:meth:`hold`, waiting while another member holds one) and to forward a
cancel to the member running a task.

Idle, a member commits one transaction per heartbeat (a quarter lease), on
its listening connection: the heartbeat also says whether a member died
(then this one adopts what it left), whether queued work or webhooks wait.

The log and the lease table are the truth; a wake-up only says where to
look. So a dropped listening connection costs latency: once it is back,
every host catches its live tasks up from the log and every lease waiter
tries again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from ..store.coordination import (
    CANCELS,
    DONE,
    EVENTS,
    LEASES,
    QUEUE,
    WEB_CHANNELS,
    WORKER_CHANNELS,
    CarriedRound,
    Claim,
    Coordination,
    QueuedOutcome,
    Signal,
    carried_round,
    done_outcome,
)

__all__ = ["Cluster", "ClusterMember", "ClusterWatcher", "new_token"]

log = logging.getLogger("a2a_trio.cluster")

#: How long the rows of queued executions heard here wait to be deleted with
#: the next ones (a lease to let go takes them along at once).
HEARD_ROWS_WAIT = 0.05


def new_token() -> str:
    """A lease token: one per execution or cancel that holds a task."""
    return uuid.uuid4().hex


class ClusterMember(Protocol):
    """What a host does for the cluster (see :class:`~a2a_trio.runtime.host.AgentHost`)."""

    name: str

    def task_moved(self, task_id: str, seq: int, carried: CarriedRound | None = None) -> None:
        """Another member recorded events of the task, up to ``seq`` (``carried``: what
        its wake-up carried of them, if it did)."""

    def catch_up_all(self) -> None:
        """Wake-ups may have been missed: bring every live task up to its log."""

    def cancel_here(self, task_id: str, owner: str) -> None:
        """Another member asks this one to cancel a task it runs."""

    def leases_lost(self) -> None:
        """This member was found dead: stop what it runs (others ended those tasks)."""

    def work_arrived(self) -> None:
        """A queued execution of the agent waits for a worker."""

    def done_elsewhere(self, task_id: str, row: int, outcome: QueuedOutcome | None) -> None:
        """A queued execution of the agent is done (``outcome``: as its wake-up said, if so)."""

    async def adopt(self, task_id: str) -> None:
        """End (or finish) a task whose holder died, if this member can take its lease."""


class ClusterWatcher(Protocol):
    """Told of every task any member moved, whatever its agent (the console's feed).

    :meth:`run` lives in the cluster's nursery, as long as the membership.
    """

    def task_moved(self, agent: str, task_id: str, seq: int, base: int | None) -> None:
        """A member recorded events of the task after ``base`` (None: not said), up to ``seq``.

        Called for this process's own rounds too. Must not block.
        """

    def wake_ups_missed(self) -> None:
        """The wake-up connection was down: tasks may have moved unannounced."""

    async def run(self) -> None:
        """Whatever the watcher does in the background (until cancelled)."""


class Cluster:
    """This process's membership: heartbeat, wake-ups, batched releases, adoption."""

    def __init__(self, coordination: Coordination) -> None:
        self.coordination = coordination
        self.member = coordination.member
        self.lease_seconds = coordination.lease_seconds
        self._members: dict[str, ClusterMember] = {}
        self._watchers: list[ClusterWatcher] = []
        #: The queued agents this process works for (a2a-trio worker).
        self._working_for: set[str] = set()
        #: Told when a heartbeat finds webhook notifications pending.
        self.push_pending: Callable[[], None] | None = None
        self._adoption_wanted = trio.Event()
        self._lease_waiters: dict[tuple[str, str], trio.Event] = {}
        self._to_release: list[str] = []
        #: Queued executions whose outcome this process heard, to delete.
        self._heard: list[int] = []
        self._release_wanted = trio.Event()
        #: Set with each lease to let go (a queued row heard alone may wait).
        self._lease_wanted = trio.Event()
        self._released = trio.Event()
        #: Whether the wake-up connection is listening (readiness).
        self.listening = False
        #: What this member reports of itself with each heartbeat (the console's
        #: members view): ``web`` or ``worker``, its agents, and its counters.
        self.role = "web"
        self.agents: list[str] = []
        self.stats: Callable[[], dict[str, float]] = dict
        self._stopping = False
        self._nursery: trio.Nursery | None = None

    def add(self, member: ClusterMember) -> None:
        """Serve ``member``'s agent: its wake-ups, cancels and orphans come to it."""
        self._members[member.name] = member

    def watch(self, watcher: ClusterWatcher) -> None:
        """Tell ``watcher`` of every task moved from now on, and run it with the membership."""
        self._watchers.append(watcher)
        if self._nursery is not None:
            self._nursery.start_soon(watcher.run)

    def work_for(self, agent: str) -> None:
        """This process runs ``agent``'s queued executions: heartbeats look for them."""
        self._working_for.add(agent)

    # --- lifetime -------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Join, then heartbeat, listen, release and adopt until :meth:`stop`.

        Started once the first LISTEN runs, so that no wake-up sent after
        start-up is missed.
        """
        await self.coordination.join()
        await self._report()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self._listen)
                nursery.start_soon(self._heartbeats)
                nursery.start_soon(self._adoptions)
                nursery.start_soon(self._releases)
                for watcher in self._watchers:
                    nursery.start_soon(watcher.run)
                task_status.started()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True), trio.move_on_after(self.lease_seconds):
                await self._flush_releases()
                try:
                    await self.coordination.leave()
                except Exception as error:  # its membership runs out on its own
                    log.warning("could not leave the cluster cleanly: %s", error)

    def stop(self) -> None:
        """Leave: what is still to release is released, then the membership ends."""
        self._stopping = True
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    # --- leases -----------------------------------------------------------------------

    async def hold(self, agent: str, task_id: str, token: str) -> Claim:
        """Take the task's lease for ``token``, waiting while another live member holds it."""
        claim = await self.coordination.acquire(agent, task_id, token)
        while not claim.acquired:
            freed = self._lease_waiters.setdefault((agent, task_id), trio.Event())
            # Asked again now that a release wakes us: one in between is not missed.
            claim = await self.coordination.acquire(agent, task_id, token)
            if claim.acquired:
                break
            # A holder that dies wakes nobody: look again after a quarter lease.
            with trio.move_on_after(self.lease_seconds / 4):
                await freed.wait()
        return claim

    def release(self, token: str) -> None:
        """Let a lease go soon (batched with the others let go meanwhile)."""
        self._to_release.append(token)
        self._release_wanted.set()
        self._lease_wanted.set()

    def heard(self, execution_id: int) -> None:
        """This process has the outcome of the queued execution: its row may go
        (soon, batched with the leases let go meanwhile)."""
        self._heard.append(execution_id)
        self._release_wanted.set()

    def withdraw_release(self, token: str) -> bool:
        """Take back a lease given to :meth:`release` and not yet let go: the caller lets
        it go itself (in a transaction it writes anyway). Whether it was still waiting."""
        try:
            self._to_release.remove(token)
        except ValueError:
            return False
        return True

    async def _releases(self) -> None:
        while True:
            await self._release_wanted.wait()
            # Taken back meanwhile (withdraw_release), there may be none left.
            self._release_wanted = trio.Event()
            if not self._to_release:
                # Only queued rows heard: nobody waits for them to go, so they
                # go together, a transaction for many SendMessages (a web
                # process hears one at each answer) unless a lease comes first.
                with trio.move_on_after(HEARD_ROWS_WAIT):
                    await self._lease_wanted.wait()
            self._lease_wanted = trio.Event()
            # The executions ending in this scheduling pass join the batch.
            await trio.lowlevel.checkpoint()
            await self._flush_releases()

    async def _flush_releases(self) -> None:
        while self._to_release or self._heard:
            self._release_wanted = trio.Event()
            tokens, self._to_release = self._to_release, []
            heard, self._heard = self._heard, []
            try:
                await self.coordination.release(tokens, heard=heard)
            except Exception as error:
                log.warning("could not release %d task leases (will retry): %s", len(tokens), error)
                self._to_release[:0] = tokens
                self._heard[:0] = heard
                await trio.sleep(min(1.0, self.lease_seconds / 4))

    async def request_cancel(self, agent: str, task_id: str, holder: str, owner: str) -> None:
        await self.coordination.request_cancel(agent, task_id, holder, owner)

    # --- wake-ups --------------------------------------------------------------------

    async def _listen(self, *, task_status: trio.TaskStatus[None]) -> None:
        pause, started = 0.1, False
        while True:
            try:
                # A process hears only what it acts on: a worker, no round
                # recorded; a web process, no work queued.
                channels = WORKER_CHANNELS if self.role == "worker" else WEB_CHANNELS
                async with self.coordination.wake_ups(channels) as wake_ups:
                    self.listening = True
                    if started:
                        # Reconnected: whatever was sent meanwhile is in the tables.
                        self._wake_everyone()
                    else:
                        started = True
                        task_status.started()
                    pause = 0.1
                    while True:
                        self._dispatch(await wake_ups.receive())
            except Exception as error:
                if not started:
                    raise
                log.warning("the cluster's wake-up connection failed (reconnecting): %s", error)
            finally:
                self.listening = False
            await trio.sleep(pause)
            pause = min(pause * 2, 5.0)

    def _dispatch(self, signal: Signal) -> None:
        fields = signal.fields
        if not fields:
            self._wake_everyone()
            return
        if signal.channel == EVENTS and len(fields) >= 3 and isinstance(fields[2], int):
            base = fields[3] if len(fields) > 3 and isinstance(fields[3], int) else None
            for watcher in self._watchers:
                watcher.task_moved(str(fields[0]), str(fields[1]), fields[2], base)
        member = self._members.get(str(fields[0]))
        if signal.channel == LEASES and len(fields) == 2:
            event = self._lease_waiters.pop((str(fields[0]), str(fields[1])), None)
            if event is not None:
                event.set()
        elif member is None:
            return
        elif signal.channel == EVENTS and len(fields) >= 3 and isinstance(fields[2], int):
            member.task_moved(str(fields[1]), fields[2], carried_round(fields))
        elif signal.channel == CANCELS and len(fields) == 4 and fields[2] == self.member:
            member.cancel_here(str(fields[1]), str(fields[3]))
        elif signal.channel == QUEUE:
            member.work_arrived()
        elif signal.channel == DONE and len(fields) in (3, 6) and isinstance(fields[2], int):
            member.done_elsewhere(str(fields[1]), fields[2], done_outcome(fields))

    def _wake_everyone(self) -> None:
        waiters, self._lease_waiters = self._lease_waiters, {}
        for event in waiters.values():
            event.set()
        for member in self._members.values():
            member.catch_up_all()
            member.work_arrived()
        for watcher in self._watchers:
            watcher.wake_ups_missed()

    # --- heartbeat and adoption -----------------------------------------------------------

    async def _heartbeats(self) -> None:
        # Apart from adoption, which may take a while: a late heartbeat costs
        # the membership, and everything this process runs.
        period = self.lease_seconds / 4
        while True:
            await trio.sleep(period)
            try:
                beat = await self.coordination.heartbeat(
                    sorted(self._working_for), (self.role, self.agents, self.stats())
                )
            except Exception as error:
                log.warning("cluster heartbeat failed: %s", error)
                continue
            if beat.someone_dead:
                self._adoption_wanted.set()
            if beat.work_waiting:
                for agent in self._working_for:
                    member = self._members.get(agent)
                    if member is not None:
                        member.work_arrived()
            if beat.push_pending and self.push_pending is not None:
                self.push_pending()
            if not beat.alive:
                log.error(
                    "member %s had no heartbeat for %ss and was found dead: what it ran is"
                    " stopped (others end those tasks)",
                    self.member,
                    self.lease_seconds,
                )
                for member in self._members.values():
                    member.leases_lost()

    async def _report(self) -> None:
        try:
            await self.coordination.report(self.role, self.agents, self.stats())
        except NotImplementedError:
            pass
        except Exception as error:  # only the console's view is late
            log.debug("could not report this member's counters: %s", error)

    async def _adoptions(self) -> None:
        while True:
            await self._adoption_wanted.wait()
            self._adoption_wanted = trio.Event()
            await self._guarded(self.adopt_orphans)

    async def adopt_orphans(self) -> None:
        """End the tasks whose leases dead members hold (a heartbeat found one dead)."""
        if self._stopping or not self._members:
            return
        for orphan in await self.coordination.orphans(sorted(self._members)):
            member = self._members.get(orphan.agent)
            if member is not None and not self._stopping:
                await self._guarded(member.adopt, orphan.task_id)

    @staticmethod
    async def _guarded(work: Callable[..., Awaitable[None]], *args: object) -> None:
        try:
            await work(*args)
        except Exception:
            log.exception("cluster work %s failed", getattr(work, "__name__", work))

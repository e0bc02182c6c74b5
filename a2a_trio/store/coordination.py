"""What several processes serving one database agree on: members, task leases, wake-ups.

Only a database that several processes can share implements it (PostgreSQL:
:class:`~a2a_trio.store.postgres.cluster.PostgresCoordination`); a SQLite file
is served by one process and has none (``Store.coordination`` is None).

- **Members.** Each serving process joins under an id of its own and renews
  its membership by heartbeat. A member whose heartbeat is older than its
  ``lease_seconds`` is dead: what it held may be taken over.
- **Task leases.** At most one execution per task anywhere: an execution
  holds its task's lease, identified by a token of its own, from before its
  first write until after its last. A new task's lease is written with the
  task (``NewTask.lease``); a continuation or a cancel acquires it. A
  member's leases live as long as its membership.
- **Webhook lanes.** One member at a time delivers a lane (a task's
  webhook config), so its notifications go out in order; a dead member's
  lanes are claimed by the next member that finds them pending.
- **Queued executions.** A queued agent's executions are rows that web
  processes add and worker processes claim (``FOR UPDATE SKIP LOCKED``),
  run under the task's lease and mark done. One a dead worker claimed but
  had not started is queued again; one it was running ends with an error.
- **Wake-ups.** Every recorded round says which tasks moved (``events``),
  every release which leases were let go (``leases``), and a cancel for a
  task another member runs is a request to that member (``cancels``). They
  are only wake-ups: the log and the lease table are the truth, so a lost
  one costs latency, never an event.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from .fleet import FleetView

__all__ = [
    "CANCELS",
    "CHANNELS",
    "DONE",
    "EVENTS",
    "LEASES",
    "QUEUE",
    "WEB_CHANNELS",
    "WORKER_CHANNELS",
    "Beat",
    "CarriedRound",
    "Claim",
    "Coordination",
    "Orphan",
    "QueuedExecution",
    "QueuedFinish",
    "QueuedOutcome",
    "Report",
    "Signal",
    "WakeUps",
    "carried_round",
    "done_outcome",
    "done_payload",
    "events_payload",
    "signal_payload",
]

#: A round was recorded: [agent, task, last sequence, sequence before the round],
#: and for a round that carries them [the task's snapshot, [[seq, kind, payload],
#: ...]] of what it wrote when that is short enough (see :func:`events_payload`).
EVENTS = "a2a_events"
#: Leases were let go: [agent, task].
LEASES = "a2a_leases"
#: A cancel for a task another member runs: [agent, task, holder, owner].
CANCELS = "a2a_cancels"
#: An execution of a queued agent waits for a worker: [agent].
QUEUE = "a2a_queue"
#: A queued execution is done: [agent, task, id, its task's last sequence, answer,
#: error] (its outcome, see :func:`done_payload`), or [agent, task, id] when that
#: would be too long (the waiter reads the row).
DONE = "a2a_done"
CHANNELS = (EVENTS, LEASES, CANCELS, QUEUE, DONE)
#: What a web process listens to: every channel but the queue's (it claims no work).
WEB_CHANNELS = (EVENTS, LEASES, CANCELS, DONE)
#: What a queue worker listens to: work arriving, cancels and leases. Every round
#: recorded (EVENTS) and every queued execution done (DONE) are for the web
#: processes: the worker wrote them, and serves no reader of a task.
WORKER_CHANNELS = (LEASES, CANCELS, QUEUE)

#: PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more; a longer one
#: (ids of a thousand escaped control characters) becomes "[]": wake everyone.
_PAYLOAD_LIMIT = 7900


def signal_payload(*fields: object) -> str:
    """The payload of a wake-up: a JSON array, or ``[]`` when it would be too long."""
    text = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return text if len(text.encode()) < _PAYLOAD_LIMIT else "[]"


@dataclass(frozen=True, slots=True)
class Signal:
    """One wake-up: its channel and fields (empty: it names nothing, wake everyone)."""

    channel: str
    fields: tuple[object, ...]

    @classmethod
    def parse(cls, channel: str, payload: str) -> Signal:
        try:
            fields = json.loads(payload)
        except ValueError:
            fields = []
        return cls(channel, tuple(fields) if isinstance(fields, list) else ())


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of :meth:`Coordination.acquire`.

    ``acquired``: the lease is now the caller's. ``took_over``: from a dead
    member (its task may have been left running: end it first). Otherwise
    ``holder`` is the live member that holds it.
    """

    acquired: bool
    took_over: bool = False
    holder: str | None = None


@dataclass(frozen=True, slots=True)
class Beat:
    """What one heartbeat found (its one transaction is all an idle member commits).

    ``alive``: False when others had already found this member dead.
    ``someone_dead``: a member is dead and may have left work to adopt.
    ``work_waiting``: queued executions of the agents asked about wait.
    ``push_pending``: webhook notifications are pending (a lane to claim, maybe).
    """

    alive: bool
    someone_dead: bool = False
    work_waiting: bool = False
    push_pending: bool = False


@dataclass(frozen=True, slots=True)
class Orphan:
    """An unfinished task with no live holder, or a lease a dead member left."""

    agent: str
    task_id: str


@dataclass(frozen=True, slots=True)
class QueuedExecution:
    """An execution of a queued agent, as a worker claimed it (``request``: JSON)."""

    id: int
    agent: str
    task_id: str
    request: str


@dataclass(frozen=True, slots=True)
class QueuedOutcome:
    """How a queued execution ended: its direct answer (a Message, JSON), or an error.

    ``error`` is ``{"code": ..., "message": ..., "reason": ...}`` of the protocol error its
    client gets; both None when it made a task (the log has the rest).
    """

    done: bool
    answer: str | None = None
    error: dict[str, object] | None = None
    #: The task's last event when the execution ended, when known (0: it wrote none).
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class QueuedFinish:
    """A worker's execution as it ended: its direct answer or error, its task's last event."""

    execution: QueuedExecution
    answer: str | None = None
    error: dict[str, object] | None = None
    seq: int = 0


def done_payload(finish: QueuedFinish) -> str:
    """The DONE wake-up of ``finish``: with its outcome, unless that is too long."""
    work = finish.execution
    whole = signal_payload(
        work.agent, work.task_id, work.id, finish.seq, finish.answer, finish.error
    )
    return whole if whole != "[]" else signal_payload(work.agent, work.task_id, work.id)


def done_outcome(fields: tuple[object, ...]) -> QueuedOutcome | None:
    """The outcome a DONE wake-up's fields carry (see :func:`done_payload`), if any."""
    if len(fields) != 6:
        return None
    seq, answer, error = fields[3:]
    if not isinstance(seq, int) or not (answer is None or isinstance(answer, str)):
        return None
    if error is not None and not isinstance(error, dict):
        return None
    return QueuedOutcome(True, answer, error, seq)


@dataclass(frozen=True, slots=True)
class CarriedRound:
    """What an EVENTS wake-up carried of its round: the task's snapshot (JSON) after it,
    and its events that a read-back reads (``records.READ_BACK_KINDS``), in order."""

    base: int
    snapshot: str
    events: list[tuple[int, str, str]]


def events_payload(
    agent: str, task_id: str, seq: int, base: int, carried: CarriedRound | None = None
) -> str:
    """The EVENTS wake-up of a round: with what it wrote (``carried``) if short enough."""
    if carried is not None:
        rows = [list(event) for event in carried.events]
        whole = signal_payload(agent, task_id, seq, base, [carried.snapshot, rows])
        if whole != "[]":
            return whole
    return signal_payload(agent, task_id, seq, base)


def carried_round(fields: tuple[object, ...]) -> CarriedRound | None:
    """What an EVENTS wake-up's fields carry of its round (see :func:`events_payload`)."""
    if len(fields) != 5 or not isinstance(fields[3], int) or not isinstance(fields[4], list):
        return None
    base, carried = fields[3], fields[4]
    if len(carried) != 2 or not isinstance(carried[0], str) or not isinstance(carried[1], list):
        return None
    events: list[tuple[int, str, str]] = []
    for row in carried[1]:
        if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], int)):
            return None
        seq, kind, payload = row
        if not (isinstance(kind, str) and isinstance(payload, str)):
            return None
        events.append((seq, kind, payload))
    return CarriedRound(base, carried[0], events)


#: What a member tells the others of itself: role (``web`` or ``worker``), the
#: agents it serves, its counters (see :meth:`Coordination.report`).
Report = tuple[str, list[str], dict[str, float]]


class WakeUps(ABC):
    """A dedicated connection that receives the members' wake-ups."""

    @abstractmethod
    async def receive(self) -> Signal:
        """The next wake-up; raises ConnectionLost when the connection drops."""


class Coordination(ABC):
    """Membership, task leases and wake-ups of the processes serving one database."""

    #: This member's id (host, pid and a random part: readable in logs and tables).
    member: str
    #: How long a member lives without a heartbeat.
    lease_seconds: float

    @abstractmethod
    async def join(self) -> None:
        """Become a member (before holding anything)."""

    @abstractmethod
    async def heartbeat(self, queued_agents: list[str], report: Report | None = None) -> Beat:
        """Renew the membership, and look whether anything waits for the members.

        In one transaction, on the listening connection once it is open: an
        idle member commits nothing else. A member found dead has lost its
        leases: whatever it still runs must stop. It is a member again after
        this call, with a fresh heartbeat. ``queued_agents``: the agents this
        member works for (Beat.work_waiting); ``report``: what :meth:`report`
        would write, written in the same transaction.
        """

    @abstractmethod
    async def leave(self) -> None:
        """Stop being a member: let go of every lease still held, with their wake-ups."""

    @abstractmethod
    async def acquire(self, agent: str, task_id: str, token: str, *, queue: bool = True) -> Claim:
        """Take the task's lease for ``token`` unless a live member other than this one holds it.

        A lease this member holds is taken over (its executions run one at a
        time: the holder is finished with it). Members take turns: one that
        finds the lease held asks for the next turn, and until it had it the
        holder does not take the lease again. ``queue=False`` (a cancel)
        neither asks for a turn nor waits for one.
        """

    @abstractmethod
    async def release(self, tokens: list[str], *, heard: Sequence[int] = ()) -> None:
        """Let the leases of these tokens go (those still held), waking their waiters;
        and forget the queued executions ``heard``: done, their outcome heard by the
        web process that queued them, so that the queue keeps no row for good."""

    @abstractmethod
    async def holder(self, agent: str, task_id: str) -> str | None:
        """The live member holding the task's lease, if any."""

    @abstractmethod
    async def request_cancel(self, agent: str, task_id: str, holder: str, owner: str) -> None:
        """Ask ``holder`` to cancel the task it runs (on behalf of ``owner``)."""

    @abstractmethod
    async def orphans(self, agents: list[str], *, unleased: bool = False) -> list[Orphan]:
        """The leases of these agents that dead members hold, and (``unleased``, at
        start-up) their unfinished tasks that no lease covers nor queued execution waits for.

        Reads the members and the dead ones' leases only (what a vacuum backlog
        of finished work cannot grow), unless ``unleased``.
        """

    @abstractmethod
    async def claim_lane(self, agent: str, task_id: str, config_id: str) -> bool:
        """Whether this member may deliver the webhook lane now (no other live member does)."""

    @abstractmethod
    async def release_lane(self, agent: str, task_id: str, config_id: str) -> None:
        """Stop delivering the lane: another member may claim it."""

    @abstractmethod
    async def enqueue(self, agent: str, executions: Sequence[tuple[str, str]]) -> list[int]:
        """Queue executions of a queued agent, each ``(task_id, request)``, in one
        transaction that wakes the workers once; their ids, in the same order."""

    @abstractmethod
    async def claim_queued(self, agents: list[str], limit: int) -> list[QueuedExecution]:
        """Take up to ``limit`` queued executions of these agents, oldest first."""

    @abstractmethod
    async def mark_running(self, execution_ids: Sequence[int]) -> None:
        """The claimed executions start: from now on a dead worker's are not run again."""

    @abstractmethod
    async def finish_queued(
        self, finishes: Sequence[QueuedFinish], *, release: Sequence[str] = ()
    ) -> None:
        """Mark the executions done, waking the web processes that wait for them.

        Each wake-up carries its outcome (:func:`done_payload`). The leases of
        ``release`` (tokens) are let go in the same transaction.
        """

    @abstractmethod
    async def requeue(self, execution: QueuedExecution, *, restart: bool) -> None:
        """Queue a claimed execution again (waking the workers): it did not run here,
        or (``restart``) it ran and is to run again from the start, its task as left."""

    @abstractmethod
    async def queued_outcome(self, execution_id: int) -> QueuedOutcome:
        """Whether the execution is done, and its answer or error."""

    async def report(self, role: str, agents: list[str], stats: dict[str, float]) -> None:
        """Tell the others what this member is (``web`` or ``worker``), serves and counts."""
        raise NotImplementedError

    async def fleet(self) -> FleetView:
        """The live members with what each holds and reported, and the queued work."""
        raise NotImplementedError

    async def shared_setting(self, key: str, proposed: str) -> tuple[str, bool]:
        """The deployment's value of ``key``: ``proposed`` if it had none (then True)."""
        raise NotImplementedError

    async def claim_duty(self, duty: str) -> bool:
        """Whether this member does ``duty``: the first live member to ask, until it dies."""
        raise NotImplementedError

    @abstractmethod
    def wake_ups(self, channels: Sequence[str] = CHANNELS) -> AbstractAsyncContextManager[WakeUps]:
        """A connection receiving ``channels`` (async context manager)."""

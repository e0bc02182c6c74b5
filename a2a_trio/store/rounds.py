"""A round of writes, worked out as plain data before any of it is stored.

The recorder checks each executor event against the state machine and the
limits, gives it its sequence number and the task it produces, and collects
the result here: one :class:`Share` per task. A store applies a whole
:class:`Round` in one transaction (:meth:`a2a_trio.store.Store.record`),
each share all or nothing, so nothing in this module does I/O and every
backend stores exactly the same thing.

Its records are plain slotted dataclasses, not frozen ones: several are made
for each SendMessage, and a frozen dataclass's ``__init__`` (one
``object.__setattr__`` call a field) costs two and a half times as much.
Nothing changes a record once made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..protocol import PROTOCOL_VERSION, Message, Task, TaskPushNotificationConfig
from ..protocol.compat_v0_3 import task_to_v0_3
from ..protocol.limits import Limits
from .coordination import QueuedFinish
from .records import EventKind

__all__ = [
    "EventWrite",
    "LeaseHeld",
    "NewTask",
    "ReceiptWrite",
    "Round",
    "Share",
    "ShareOutcome",
    "StaleTask",
]


class StaleTask(Exception):
    """A share that does not follow the stored task: its first sequence is taken.

    The recorder numbers events from the task it holds; a store that finds
    the task moved on (or gone) refuses the share rather than fork the log.
    """


class LeaseHeld(Exception):
    """A share that was to take its task's lease found one held: nothing of it is stored.

    The execution then waits for the lease the usual way (see
    :meth:`~a2a_trio.runtime.cluster.Cluster.hold`) and writes again.
    """


@dataclass(slots=True)
class NewTask:
    """The share creates its task: who owns it, and a webhook config sent with the message."""

    owner: str
    push_config: TaskPushNotificationConfig | None = None
    #: The protocol version the config came in (its webhooks carry that version's body).
    push_protocol: str = PROTOCOL_VERSION
    #: The lease of the execution creating it, as (member, token), when several
    #: processes share the database (see :mod:`a2a_trio.store.coordination`).
    lease: tuple[str, str] | None = None


@dataclass(slots=True)
class EventWrite:
    """One event for the log, and the task as it stands after it."""

    seq: int
    kind: EventKind
    payload: str
    snapshot: Task


@dataclass(slots=True)
class ReceiptWrite:
    """What a SendMessage started, kept for a retry whose answer was lost (spec 3.3.1)."""

    owner: str
    message_id: str
    digest: str
    task_id: str | None = None
    seq: int = 0
    answer: str | None = None


@dataclass(slots=True)
class Share:
    """One task's writes in a round: stored together or not at all."""

    agent: str
    task_id: str
    #: Set when the share creates the task; its first event then has sequence 1.
    new: NewTask | None = None
    events: list[EventWrite] = field(default_factory=list)
    receipts: list[ReceiptWrite] = field(default_factory=list)
    #: Several processes: take the task's lease, as (member, token), with the
    #: share's events (a continuation's message), refused (:class:`LeaseHeld`)
    #: if a lease is held. Only for an existing task (a new one: ``new.lease``).
    lease: tuple[str, str] | None = None
    #: Several processes: the token of the lease let go with the share's events
    #: (the last round of an execution). Only for an existing task.
    release: str | None = None
    #: Several processes (PostgreSQL): the queued execution that ends with the
    #: share's events (a worker's last round), its row marked done and its web
    #: process woken in the same transaction (see Coordination.finish_queued).
    ends: QueuedFinish | None = None
    #: Several processes (PostgreSQL): the round's wake-up carries what the share
    #: wrote, when short enough, so that a process waiting for it needs no read
    #: of the log (a queued execution's web process; see Coordination's EVENTS).
    carry: bool = False

    @property
    def snapshot(self) -> Task | None:
        """The task as the share leaves it (None: the share holds no event)."""
        return self.events[-1].snapshot if self.events else None

    @property
    def base_seq(self) -> int:
        """The stored task's last sequence that the share's first event follows."""
        return self.events[0].seq - 1 if self.events else 0


@dataclass(slots=True)
class Round:
    """Every share the recorder took from its inbox at once: one transaction."""

    shares: list[Share] = field(default_factory=list)
    #: Queue each streamed event for every webhook config of its task.
    push: bool = False
    #: The history window of the recording agent: a webhook body that carries
    #: the task (0.3's) carries this window of its history, read from the log.
    limits: Limits = field(default_factory=Limits)


@dataclass(slots=True)
class ShareOutcome:
    """What became of one share: notifications queued, or why it was rolled back."""

    queued: int = 0
    error: Exception | None = None


def v0_3_webhook_body(snapshot: Task, history: list[Message]) -> str:
    """What a webhook config created over 0.3 receives: the task after the event.

    That is what the 0.3 SDKs' servers POST and their receivers read; the
    ``history`` is the task's window up to the event, read from the log.
    """
    task = snapshot.model_copy(update={"history": history or None})
    return json.dumps(task_to_v0_3(task), ensure_ascii=False, separators=(",", ":"))

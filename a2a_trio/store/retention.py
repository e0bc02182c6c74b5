"""Retention: finished work removed in bounded batches, one process at a time.

A backend's :class:`Retention` deletes what a retention run removes, one
short transaction per batch (:meth:`Retention.prune_batch`), and keeps the
runs' records, which are also their lease (:meth:`Retention.begin_run`): a
run holds the lease while its record is open and renewed, so two processes
serving one database never prune at the same time, and a holder that died
lets go when its lease runs out. ``a2a-trio prune`` and the scheduled pruner
(:mod:`a2a_trio.runtime.retention`) both delete through
:func:`prune_in_batches`.

What goes: tasks in a final state (COMPLETED, FAILED, CANCELED, REJECTED)
last updated before the cutoff, with their events, push configs, outbox rows
(delivered or not: a notification queued so long ago was delivered or given
up) and delivery attempts; and message receipts stored before the cutoff,
whatever became of their task. Interrupted tasks (INPUT_REQUIRED,
AUTH_REQUIRED) stay, whatever their age: a client may still continue them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import astuple, dataclass, fields
from datetime import datetime
from typing import Literal

from .queries import FINAL_STATES

__all__ = [
    "PRUNED_KINDS",
    "RUN_COUNTS",
    "Pruned",
    "Retention",
    "RunRecord",
    "doomed_tasks",
    "prune_in_batches",
    "read_run",
]

#: The batch of ``a2a-trio prune`` (and the default of ``[retention] batch``).
DEFAULT_BATCH = 100


@dataclass(frozen=True, slots=True)
class Pruned:
    """How many rows of each kind went (or would go)."""

    tasks: int = 0
    events: int = 0
    push_configs: int = 0
    notifications: int = 0
    attempts: int = 0
    receipts: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def __bool__(self) -> bool:
        return any(astuple(self))

    def as_dict(self) -> dict[str, int]:
        """The counts by kind, as ``Store.prune`` returns them."""
        return {name: int(value) for name, value in zip(PRUNED_KINDS, astuple(self), strict=True)}


#: The kinds of rows a prune counts, in :class:`Pruned`'s order.
PRUNED_KINDS = tuple(field.name for field in fields(Pruned))
#: A run record's count columns, as renew_run and end_run write them.
RUN_COUNTS = ("batches", "largest_batch", *PRUNED_KINDS)

#: How a run ended: all done; stopped (its process shut down, or it lost its
#: lease); abandoned (its process died: closed by the next run).
RunOutcome = Literal["done", "stopped", "abandoned"]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One retention run, as recorded (times as stored: text in time order).

    ``finished_at`` and ``outcome`` are None while it runs. ``batches`` is how
    many transactions deleted something, ``largest_batch`` the most tasks
    one of them deleted.
    """

    id: int
    holder: str
    started_at: str
    finished_at: str | None
    outcome: str | None
    batches: int
    largest_batch: int
    pruned: Pruned


class Retention(ABC):
    """A backend's retention statements (``Store.retention``)."""

    @abstractmethod
    async def prune_batch(self, older_than: datetime, limit: int) -> Pruned:
        """In one transaction: up to ``limit`` finished tasks last updated before
        ``older_than`` with everything of theirs, and up to ``limit`` receipts
        stored before it. Nothing pruned: nothing of that age is left."""

    @abstractmethod
    async def begin_run(self, holder: str, lease_seconds: float) -> int | None:
        """Take the lease and open a run's record (its id), unless a live run holds it.

        A run whose lease ran out (its process died) is closed ``abandoned``
        first.
        """

    @abstractmethod
    async def renew_run(
        self, run: int, pruned: Pruned, batches: int, largest: int, lease_seconds: float
    ) -> bool:
        """Extend the run's lease by ``lease_seconds`` and record its counts so far.

        False when the run holds the lease no longer (it ran out, and another
        run closed it): it must stop.
        """

    @abstractmethod
    async def end_run(
        self,
        run: int,
        pruned: Pruned,
        batches: int,
        largest: int,
        outcome: RunOutcome,
        forget_before: datetime,
    ) -> None:
        """Close the run's record and let the lease go; forget runs finished
        before ``forget_before`` (the records are pruned too)."""

    @abstractmethod
    async def runs(self, limit: int = 100) -> list[RunRecord]:
        """The most recent runs, newest first."""


def read_run(row: tuple[object, ...]) -> RunRecord:
    """A run's record from its columns (id, holder, the times, outcome, batches, counts)."""
    return RunRecord(
        id=int(str(row[0])),
        holder=str(row[1]),
        started_at=str(row[2]),
        finished_at=None if row[3] is None else str(row[3]),
        outcome=None if row[4] is None else str(row[4]),
        batches=int(str(row[5])),
        largest_batch=int(str(row[6])),
        pruned=Pruned(*(int(str(value)) for value in row[7:13])),
    )


async def prune_in_batches(
    retention: Retention,
    older_than: datetime,
    batch: int = DEFAULT_BATCH,
    *,
    between: Callable[[Pruned], Awaitable[bool]] | None = None,
) -> Pruned:
    """Prune everything older than ``older_than``, ``batch`` tasks per transaction.

    ``between`` is awaited after each batch that pruned something (the
    scheduled pruner pauses there and renews its lease); it returns False to
    stop early.
    """
    total = Pruned()
    while True:
        pruned = await retention.prune_batch(older_than, batch)
        total += pruned
        if not pruned or (between is not None and not await between(pruned)):
            return total


def doomed_tasks(cutoff: str, limit: str) -> str:
    """The keys of up to ``limit`` finished tasks updated before ``cutoff``.

    ``cutoff`` and ``limit`` are the backend's named parameters. One index
    range per final state (``tasks_by_state``), oldest first, so a batch
    stops reading after ``limit`` rows instead of sorting every old task.
    """
    ranges = " UNION ALL ".join(
        f"SELECT * FROM (SELECT agent, id FROM tasks WHERE state = '{state}'"
        f" AND updated_at < {cutoff} ORDER BY updated_at LIMIT {limit}) AS {state.lower()}"
        for state in FINAL_STATES
    )
    return f"SELECT agent, id FROM ({ranges}) AS finished LIMIT {limit}"

"""The pruner: finished work older than ``max_age`` removed on a schedule.

Every ``interval`` (the first time within a minute of its start) the pruner
of each serving process asks for the retention lease
(:meth:`~a2a_trio.store.retention.Retention.begin_run`); the one that gets
it prunes in batches of ``batch`` tasks, each batch its own short
transaction, and pauses between them (``pause``, and long enough that the
batches take at most ``share`` of the time: four times as long as the
batch, by default), so that the deployment's writes get the database most
of the time. The others find the lease
held and try again at their next interval. Each run writes one INFO line:
what it removed and how long it took.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import trio

from ..protocol import utcnow
from ..store import Pruning
from ..store.retention import DEFAULT_BATCH, Pruned, RunOutcome, prune_in_batches

__all__ = ["Pruner", "RetentionSettings", "RetentionStats", "duration_seconds"]

log = logging.getLogger("a2a_trio.retention")

#: Seconds after its start within which a process makes its first run.
FIRST_RUN_WITHIN = 60.0

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*")


def duration_seconds(value: object) -> object:
    """``"30d"``, ``"12h"``, ``"15m"``, ``"90s"``, ``"250ms"`` or a number of seconds, in seconds.

    Anything else is handed back as it is, for the caller's validation to refuse.
    """
    if isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match is None:
            raise ValueError(
                f"not a duration: {value!r} (a number of seconds, or e.g. '30d', '1h')"
            )
        return float(match.group(1)) * _UNITS[match.group(2) or "s"]
    return value


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """When and how the pruner runs (``[retention]`` in a2a.toml); all times in seconds."""

    #: Finished tasks (and receipts) older than this go; None: no pruner (the default).
    max_age: float | None = None
    #: Between the end of a run and the next attempt.
    interval: float = 3600.0
    #: Tasks per transaction (each with its events, configs and outbox rows).
    batch: int = DEFAULT_BATCH
    #: Least pause between batches.
    pause: float = 0.05
    #: The most of the time a run spends in batches: each pause is at least
    #: ``(1 - share) / share`` times as long as the batch before it (0.2: four
    #: times). On SQLite a batch holds the serving process's event loop:
    #: measured under load (bench/retention.py), batches of 200 half the time
    #: cost requests 2.4 times their p99, a quarter 1.9. A batch on PostgreSQL
    #: waits on its own connection, and half the time cost nothing measurable.
    share: float = 0.2
    #: How long a run's lease lasts without renewal (renewed after every batch).
    lease: float = 60.0

    @property
    def enabled(self) -> bool:
        return self.max_age is not None


@dataclass(slots=True)
class RetentionStats:
    """What this process's pruner did (the metrics read it)."""

    pruned: Pruned = field(default_factory=Pruned)
    batches: int = 0
    runs: int = 0
    #: Times this process found another's run holding the lease.
    busy: int = 0
    #: Wall-clock end of the last run this process made (0: none yet), and its length.
    last_run_at: float = 0.0
    last_run_seconds: float = 0.0


def holder_id() -> str:
    """host:pid:random, as the cluster's members are named."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Pruner:
    """Prunes ``store`` by ``settings`` until :meth:`stop`; one process at a time."""

    def __init__(
        self,
        store: Pruning,
        settings: RetentionSettings,
        holder: str | None = None,
        stats: RetentionStats | None = None,
    ) -> None:
        if settings.max_age is None:
            raise ValueError("the pruner needs a max_age")
        self.store = store
        self.settings = settings
        self.max_age = settings.max_age
        #: Who this pruner is in the runs' records (the cluster member's id, if any).
        self.holder = holder or holder_id()
        #: Added to as batches commit (an app keeps one across its pruners).
        self.stats = stats if stats is not None else RetentionStats()
        self._scope = trio.CancelScope()
        self._stopped = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run every ``interval`` until :meth:`stop` (a run under way records its ending).

        The first run comes an ``interval`` after the start, or a minute if
        that is sooner: a process restarted more often than ``interval``
        still prunes, and not while it is starting up.
        """
        try:
            with self._scope:
                task_status.started()
                await trio.sleep(min(self.settings.interval, FIRST_RUN_WITHIN))
                while True:
                    try:
                        await self.run_once()
                    except Exception as error:  # the next interval tries again
                        log.warning("retention: the run failed: %s", error)
                    await trio.sleep(self.settings.interval)
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        """Stop the schedule (a batch under way is rolled back) and wait for it."""
        self._scope.cancel()
        if not self._stopped.is_set():
            await self._stopped.wait()

    async def run_once(self) -> bool:
        """One run, if this process gets the lease; whether it did."""
        settings, retention = self.settings, self.store.retention
        run_id = await retention.begin_run(self.holder, settings.lease)
        if run_id is None:
            log.debug("retention: another process is pruning")
            self.stats.busy += 1
            return False
        run = _Run(run_id, cutoff=utcnow() - timedelta(seconds=self.max_age))

        async def between(pruned: Pruned) -> bool:
            took = time.monotonic() - run.batch_started
            run.add(pruned)
            self.stats.pruned += pruned
            self.stats.batches += 1
            if not await retention.renew_run(
                run.id, run.pruned, run.batches, run.largest, settings.lease
            ):
                log.warning("retention: the run's lease ran out; stopping (another may run)")
                return False
            await trio.sleep(max(settings.pause, took * (1 - settings.share) / settings.share))
            run.batch_started = time.monotonic()
            return True

        try:
            await prune_in_batches(retention, run.cutoff, settings.batch, between=between)
            run.outcome = "done"
        finally:
            with trio.move_on_after(settings.lease) as cleanup:
                cleanup.shield = True  # the record is closed even when the run is cancelled
                await retention.end_run(
                    run.id, run.pruned, run.batches, run.largest, run.outcome, run.cutoff
                )
            self._ended(run)
        return True

    def _ended(self, run: _Run) -> None:
        seconds = time.monotonic() - run.started
        self.stats.runs += 1
        self.stats.last_run_at, self.stats.last_run_seconds = time.time(), seconds
        counts = ", ".join(f"{value} {name}" for name, value in run.pruned.as_dict().items())
        log.info(
            "retention: removed %s older than %s in %d batches (largest %d tasks), %.2f s%s",
            counts,
            _age(self.max_age),
            run.batches,
            run.largest,
            seconds,
            "" if run.outcome == "done" else " (stopped before the end)",
        )


@dataclass(slots=True)
class _Run:
    """A run under way: its record, what it pruned so far, and when its batch began."""

    id: int
    cutoff: datetime
    pruned: Pruned = field(default_factory=Pruned)
    batches: int = 0
    #: The most tasks one batch deleted.
    largest: int = 0
    outcome: RunOutcome = "stopped"
    started: float = field(default_factory=time.monotonic)
    batch_started: float = field(default_factory=time.monotonic)

    def add(self, pruned: Pruned) -> None:
        self.pruned += pruned
        self.batches += 1
        self.largest = max(self.largest, pruned.tasks)


def _age(seconds: float) -> str:
    for unit in ("w", "d", "h", "m", "s"):
        count = seconds / _UNITS[unit]
        if count >= 1 and math.isclose(count, round(count)):
            return f"{round(count)}{unit}"
    return f"{seconds:g}s"

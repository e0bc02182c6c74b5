"""The recorder: each executor event checked, written, then published.

Every event an execution enqueues reaches the recorder through the host's
inbox. The recorder checks it against the state machine and the limits,
writes it to the store with the task it produces, and publishes it to the
task's feed once its transaction has committed (in direct push mode, once
its webhooks had it).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from .. import telemetry
from .._locks import held
from ..protocol import IllegalTransition, StorageFullError, TaskState
from ..store import LeaseHeld, ReceiptWrite, Round, Share, ShareOutcome, StaleTask
from ..store.coordination import QueuedFinish
from .executor import AgentEvent
from .retries import Retries
from .state import Entry, Execution, HostState, LiveTask, TurnMessage
from .writes import EventRefused, TaskWrites

__all__ = ["Recorder"]

log = logging.getLogger("a2a_trio.runtime")

T = TypeVar("T")

#: One entry of a round, by task: an execution's event, or a continuation's message.
_Item = tuple[Execution, AgentEvent | TurnMessage]

#: The outcome of a share that wrote nothing.
_NOTHING = ShareOutcome()


class Recorder:
    """Reads what the executions enqueue; writes each event, then publishes it.

    Rounds, savepoints and the direct push hand-off live here; the host
    starts :meth:`run` in its recording nursery and ends host-imposed task
    states (:meth:`end`, :meth:`end_if_open`) through it.
    """

    def __init__(
        self,
        state: HostState,
        *,
        retries: Retries,
        inbox: trio.MemoryReceiveChannel[Entry],
    ) -> None:
        self.state = state
        self.name = state.name
        self.store = state.store
        self.settings = state.settings
        self.push = state.push
        self.push_notifications = state.push_notifications
        self._live = state.live
        self._retries = retries
        self._inbox = inbox
        #: One write at a time (rounds, endings, receipts): each is worked out
        #: from the tasks as the write before it left them.
        self._writing = trio.Lock()
        #: What each event writes (checked first), and whom the write settles.
        self._writes = TaskWrites(state, retries=retries)

    async def run(self) -> None:
        """The recorder: what every execution enqueues, committed, then published.

        Each round takes every event waiting in the inbox (up to ``queue_size``)
        and commits them in one transaction: under load, the events of many
        tasks share a commit, and nothing is published before it. Each task's
        share stands alone, so a task whose events cannot be stored costs no
        other task its events.
        """
        while True:
            entries = [await self._inbox.receive()]
            # Let the executions already running in this scheduling pass add
            # their events first: bigger rounds, fewer commits, one pass later.
            await trio.lowlevel.checkpoint()
            while len(entries) < self.settings.queue_size:
                try:
                    entries.append(self._inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            await self._locked(self._record_round, entries)

    async def _locked(self, write: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run a write alone: each is worked out from the tasks as the one before left them."""
        async with held(self._writing):
            return await write(*args)

    async def _record_round(self, entries: list[Entry]) -> None:
        by_task: dict[LiveTask, list[_Item]] = {}
        ended: list[tuple[LiveTask, Execution]] = []
        turns: list[TurnMessage] = []
        for live, execution, event in entries:
            if event is None:
                ended.append((live, execution))
            else:
                by_task.setdefault(live, []).append((execution, event))
        shares: list[tuple[LiveTask, Share, list[_Item], list[Execution]]] = []
        for live, items in by_task.items():
            share = Share(self.name, live.task_id)
            live.feed.hold()
            for execution, event in items:
                if isinstance(event, TurnMessage):
                    turns.append(event)
                    if execution.recording_error is None:
                        self._writes.turn(live, execution, event, share)
                    continue
                if execution.recording_error is not None:
                    continue
                try:
                    self._writes.event(live, execution, event, share)
                except (EventRefused, IllegalTransition) as refusal:
                    log.warning(
                        "agent %s: event for task %s refused: %s", self.name, live.task_id, refusal
                    )
            # A worker's round: its web process publishes it from the wake-up.
            share.carry = any(execution.queued is not None for execution, _ in items)
            settling = self._writes.take_settling()
            shares.append((live, share, items, settling))
        releasing = self._releasing(ended, {live: share for live, share, _, _ in shares})
        written = [share for _, share, _, _ in shares if share.events or share.receipts]
        outcomes: dict[int, ShareOutcome] = {}
        took = 0.0
        if written:  # a round of end markers or refusals only writes nothing
            began = time.perf_counter()
            try:
                round = Round(written, push=self.push_notifications, limits=self.settings.limits)
                with telemetry.store_round(self.name, round, entries):
                    stored = await self.store.record(round)
                took = time.perf_counter() - began
            except Exception as error:  # the transaction failed: nothing of this round is stored
                if not isinstance(error, StorageFullError):  # that one the store logs once
                    log.exception("agent %s could not commit recorded events", self.name)
                failed = ShareOutcome(error=error)
                stored = [failed] * len(written)
            outcomes = {id(share): outcome for share, outcome in zip(written, stored, strict=True)}
        for live, share, items, settling in shares:
            outcome = outcomes.get(id(share), _NOTHING)
            if outcome.error is None:
                if share.events:
                    owner = items[0][0].context.caller.identifier if items else None
                    self.state.observer.committed(self.name, share, owner, took)
                self._committed(live, outcome.queued, settling)
                continue
            # A continuation that was to take its task's lease with its message
            # found it held, or the task moved: it waits for the lease (not an error).
            expected = share.lease is not None and isinstance(outcome.error, LeaseHeld | StaleTask)
            log.log(
                logging.DEBUG
                if expected or isinstance(outcome.error, StorageFullError)
                else logging.ERROR,
                "agent %s could not record events of task %s: %s",
                self.name,
                live.task_id,
                outcome.error,
            )
            live.feed.discard()  # rolled back: no one may see these events
            for execution, event in items:
                if isinstance(event, TurnMessage):
                    event.error = outcome.error  # its execution has not started yet
                    if not event.awaited:  # it has: it stops, nothing of it stored
                        self._recording_failed(execution, outcome.error)
                else:
                    self._recording_failed(execution, outcome.error)
        for execution, share in releasing:
            execution.lease_released = outcomes.get(id(share), _NOTHING).error is None
            execution.queued_ended = execution.lease_released and share.ends is not None
        for _, execution in ended:
            execution.recorded.set()
        for turn in turns:
            turn.written.set()

    def _releasing(
        self, ended: list[tuple[LiveTask, Execution]], shares: dict[LiveTask, Share]
    ) -> list[tuple[Execution, Share]]:
        """Let the leases of the executions ending here go with their task's share.

        Several processes: an execution whose executor returned, leaving its
        task paused or final, writes nothing more; its lease goes in the same
        transaction as its last events, not in a round trip of its own. A new
        task's lease is then not taken at all. A worker's queued execution
        that made a task ends its row there too (its web process hears it
        with the events' wake-up): no transaction of its own either.
        """
        releasing: list[tuple[Execution, Share]] = []
        for live, execution in ended:
            share = shares.get(live)
            token = execution.lease_token
            snapshot = live.feed.current
            if (
                share is None
                or not share.events
                or token is None
                or not execution.may_release
                or execution.recording_error is not None
                or execution.cancel_requested
                or snapshot is None
                or not (snapshot.status.state.is_final or snapshot.status.state.is_interrupted)
            ):
                continue
            new = share.new
            if new is not None:
                if new.lease is None or new.lease[1] != token:
                    continue
                share.new = dataclasses.replace(new, lease=None)
            elif share.release is None:
                share.release = token
            else:
                continue
            queued = execution.queued
            if queued is not None and execution.answer is None and execution.error is None:
                share.ends = QueuedFinish(queued, seq=share.events[-1].seq)
            releasing.append((execution, share))
        return releasing

    @staticmethod
    def _recording_failed(execution: Execution, error: Exception) -> None:
        """The execution's events cannot be stored: stop it; its run reports the error."""
        if execution.recording_error is None:
            execution.recording_error = error
        execution.cancel_scope.cancel()

    def _committed(self, live: LiveTask, notifications: int, settling: list[Execution]) -> None:
        """The task's share is stored: settle its waiters, then publish what it held."""
        self._live.written(live.task_id)  # a read of it under way is stale now
        for execution in settling:
            execution.settle_first()
        if notifications and self.push is not None:
            if self.push.settings.queue:
                self.push.notify()
            else:
                # Direct push mode: an event bound for webhooks is seen by no
                # one before the webhooks had it (see _publish_held).
                live.undelivered = True
        self._publish_held(live)

    def _publish_held(self, live: LiveTask) -> None:
        """Publish the held (committed) events; in direct push mode, after their webhooks."""
        if live.flushing:
            return  # the running delivery publishes these too
        if live.undelivered and self.push is not None:
            live.flushing = True
            live.users += 1  # held until the delivery has published
            # Finishes what is under way (the direct push hand-off), even while
            # the host shuts down.
            self.state.finishing().start_soon(self._deliver_then_publish, live)
        else:
            live.feed.release()

    async def _deliver_then_publish(self, live: LiveTask) -> None:
        assert self.push is not None
        try:
            while live.undelivered:
                live.undelivered = False
                await self.push.flush(self.name, live.task_id)
        except StorageFullError:
            pass  # logged once, by the store; the rows stay pending for the worker
        except Exception:  # the store is failing: the rows stay pending, the host goes on
            log.exception(
                "agent %s could not deliver the webhooks of task %s", self.name, live.task_id
            )
        finally:
            live.flushing = False
            live.feed.release()
            live.feed.notify()
            self._live.release(live)

    async def publish(self, live: LiveTask) -> None:
        """Publish what is held; returns once it is (direct mode: once delivered)."""
        self._publish_held(live)
        while live.flushing:
            await live.feed.wakeup.wait()

    async def write(self, live: LiveTask, build: Callable[[Share], None]) -> None:
        """Store one task's share outside the rounds (host-imposed endings).

        ``build`` adds the writes (through :class:`TaskWrites`); they are published
        once stored. Raises what kept them from being stored (nothing is).
        """
        await self._locked(self._write, live, build)

    async def _write(self, live: LiveTask, build: Callable[[Share], None]) -> None:
        share = Share(self.name, live.task_id)
        live.feed.hold()
        try:
            build(share)
            settling = self._writes.take_settling()
            outcome = _NOTHING
            began = time.perf_counter()
            if share.events or share.receipts:
                round = Round([share], push=self.push_notifications, limits=self.settings.limits)
                with telemetry.store_round(self.name, round):
                    [outcome] = await self.store.record(round)
            if outcome.error is not None:
                raise outcome.error
        except BaseException:
            self._writes.take_settling()
            live.feed.discard()
            raise
        if share.events:
            execution = live.execution
            owner = execution.context.caller.identifier if execution else None
            self.state.observer.committed(self.name, share, owner, time.perf_counter() - began)
        self._committed(live, outcome.queued, settling)

    async def keep_receipt(self, task_id: str, receipt: ReceiptWrite) -> None:
        """Store a receipt on its own (its request went away after the task was stored)."""
        share = Share(self.name, task_id, receipts=[receipt])
        await self._locked(self.store.record, Round([share]))

    async def drop_receipt(self, receipt: ReceiptWrite) -> None:
        """Drop a stored receipt, after any write under way (the one storing it, say)."""
        await self._locked(
            self.store.forget_message, self.name, receipt.owner, receipt.message_id, receipt.digest
        )

    async def end(self, live: LiveTask, state: TaskState, reason: str) -> None:
        """Host-imposed ending (CANCELED or FAILED) with the reason as status message."""
        await self.write(live, lambda share: self._writes.ending(live, share, state, reason))

    async def restate(self, live: LiveTask) -> None:
        """Record the task's status again, unchanged (see :meth:`TaskWrites.restated`)."""
        await self.write(live, lambda share: self._writes.restated(live, share))

    async def end_if_open(self, live: LiveTask, state: TaskState, reason: str) -> None:
        """:meth:`end` the task unless it is final (creating it first, if need be)."""
        await self.write(
            live, lambda share: self._writes.ending_if_open(live, share, state, reason)
        )

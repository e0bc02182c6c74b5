"""Queued agents: web processes queue each execution, worker processes run them.

An agent mounted with ``execution="queued"`` on a database several
processes share does not run its executor where a message arrives. The web
process writes the execution as a row (:meth:`QueuedExecutions.enqueue`) and
waits for it as for one of its own: its task's events come through the
wake-ups and the log, and the row says when it is done, with the direct
answer or the error. ``a2a-trio worker`` processes claim the rows
(:meth:`QueuedExecutions.serve`) and run them under the task's lease, as a
web process runs an inline agent's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .. import telemetry
from ..protocol import (
    PROTOCOL_VERSION,
    A2AError,
    InternalError,
    Message,
    SendMessageConfiguration,
    StorageFullError,
    StorageUnavailableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    error_from_code,
)
from ..store import StoredTask
from ..store.coordination import QueuedExecution, QueuedFinish, QueuedOutcome
from .backoff import retrying
from .batches import Batch
from .executions import Executions, unanswered
from .executor import Principal, RequestContext
from .state import Execution, HostState, LiveTask

if TYPE_CHECKING:
    from .membership import Membership

__all__ = ["QueuedExecutions"]

T = TypeVar("T")

log = logging.getLogger("a2a_trio.runtime")


class QueuedExecutions:
    """One queued agent's executions: waited for (web processes) or run (workers)."""

    def __init__(self, state: HostState, *, executions: Executions) -> None:
        self._state = state
        self._executions = executions
        #: This process's membership (see :meth:`attach`).
        self._membership: Membership | None = None
        #: Executions this process queued, by row id, until they are done.
        self._waiting: dict[int, tuple[LiveTask, Execution]] = {}
        #: Tasks whose executions are being queued here, and the DONE wake-ups
        #: heard of them meanwhile: a worker may finish an execution before the
        #: batch that queued it returns its row (see :meth:`enqueue`).
        self._queueing_for: dict[str, _Early] = {}
        #: How many times wake-ups may have been lost (see :meth:`check_all`).
        self._wake_ups_missed = 0
        self._work_arrived = trio.Event()
        #: Web processes: the executions queued in one scheduling pass share a
        #: statement (and the workers' wake-up). Shielded: a request cancelled
        #: while it writes the batch does not fail the others' messages.
        self._queueing: Batch[_Queued] = Batch(self._enqueue_all, shield=True)
        #: Workers: the executions running here, by row id.
        self._running: dict[int, Execution] = {}
        #: Workers: executions that start, and that end, in one scheduling pass
        #: are marked so in one transaction (each end with its lease let go).
        self._starting: Batch[int] = Batch(self._mark_running)
        self._ending: Batch[tuple[QueuedFinish, str | None]] = Batch(self._mark_done)

    async def _enqueue_all(self, batch: list[_Queued]) -> None:
        assert self._state.cluster is not None
        coordination = self._state.cluster.coordination
        rows = await coordination.enqueue(
            self._state.name, [(queued.task_id, queued.request) for queued in batch]
        )
        for queued, row in zip(batch, rows, strict=True):
            queued.row = row

    def attach(self, membership: Membership) -> None:
        """Wait for and run executions as ``membership``'s host (several processes)."""
        self._membership = membership

    # --- web processes -------------------------------------------------------------

    async def enqueue(
        self, live: LiveTask, execution: Execution, stored: StoredTask | None
    ) -> None:
        """Queue the execution; it settles as the worker's events come back."""
        host = self._state
        assert host.cluster is not None
        context = execution.context
        assert context.message is not None
        caller = context.caller
        request = {
            "message": context.message.to_json(),
            "configuration": context.configuration.to_json() if context.configuration else None,
            "metadata": dict(context.metadata),
            "caller": {
                "identifier": caller.identifier,
                "scopes": sorted(caller.scopes),
                "authenticated": caller.authenticated,
                "claims": dict(caller.claims),
            },
            "extensions": sorted(context.requested_extensions),
            "protocol": execution.protocol,
            "continuing": stored is not None,
        }
        telemetry.carry(request)  # the worker's execution continues this trace
        if stored is not None:
            execution.start_seq = stored.last_seq
            execution.start_snapshot = stored.task
        queued = _Queued(live.task_id, json.dumps(request, ensure_ascii=False))
        # Its row is committed before this learns its id, at times a whole
        # batch later: the worker's DONE can come first. Heard meanwhile, it
        # is kept for the task until the row is known here.
        early = self._queueing_for.get(live.task_id)
        if early is None:
            early = self._queueing_for[live.task_id] = _Early()
        early.count += 1
        missed = self._wake_ups_missed
        try:
            await self._queueing.add(queued)
        finally:
            early.count -= 1
            if early.count == 0:
                del self._queueing_for[live.task_id]
        row = queued.row
        assert row is not None
        live.users += 1  # held until the row is done
        self._waiting[row] = (live, execution)
        if row in early.done:
            self.done_elsewhere(live.task_id, row, early.done[row])
        elif self._wake_ups_missed != missed:  # its DONE among them, maybe
            self.done_elsewhere(live.task_id, row)
        self.settle(live)

    def settle(self, live: LiveTask) -> None:
        """The task moved: answer the waiters whose execution has begun writing it."""
        for row_live, execution in self._waiting.values():
            if row_live is live and not execution.first.is_set():
                feed = live.feed
                begun = execution.continuing and feed.last_seq > execution.start_seq
                if begun or (not execution.continuing and feed.snapshot is not None):
                    execution.settle_first()

    def done_elsewhere(self, task_id: str, row: int, outcome: QueuedOutcome | None = None) -> None:
        """The execution of ``row`` is done (``outcome``: as its wake-up told, if it did)."""
        nursery = self._state.nursery
        if row in self._waiting:
            if nursery is not None:
                nursery.start_soon(self._finish, row, outcome)
        elif (early := self._queueing_for.get(task_id)) is not None:
            early.done[row] = outcome  # queued here, its row not known yet

    def check_all(self) -> None:
        """Wake-ups may have been lost: look at every row still waited for."""
        self._wake_ups_missed += 1
        for row, (live, _) in list(self._waiting.items()):
            self.done_elsewhere(live.task_id, row)

    async def _finish(self, row: int, told: QueuedOutcome | None) -> None:
        host = self._state
        assert host.cluster is not None
        entry = self._waiting.get(row)
        if entry is None:
            return
        live, execution = entry
        coordination = host.cluster.coordination
        try:
            outcome = told or await self._tried(
                "read",
                row,
                lambda _: coordination.queued_outcome(row),
                wanted=lambda: row in self._waiting,
            )
            if outcome is None or not outcome.done:
                return
            if row not in self._waiting:
                return  # another wake-up finished it meanwhile
            del self._waiting[row]
            host.cluster.heard(row)  # nothing here reads the row again
            # Its last events before its end: a stream must relay them first.
            await self._read_through(live, row, outcome.seq)
            error = outcome.error
            # Refused for lack of space after its message was stored, the
            # follow-up leaves its task paused for the retry (no ending comes)
            # and its clients hear the error, its stream too once it began.
            refused = error is not None and error.get("reason") == StorageFullError.spec.reason
            if error is not None and not refused and _cut_off(live, execution):
                # Its worker died within the follow-up, before the agent recorded
                # anything: the process that takes the task's lease ends it (FAILED);
                # the waiters and streams hear that ending, not the old pause.
                while live.feed.settled_seq <= execution.start_seq:
                    await live.feed.wakeup.wait()
            if outcome.answer is not None:
                execution.answer = Message.model_validate_json(outcome.answer)
            elif error is not None and (refused or not execution.first.is_set()):
                code, reason = error.get("code"), error.get("reason")
                execution.error = error_from_code(
                    code if isinstance(code, int) else None,
                    str(error.get("message") or ""),
                    reason=reason if isinstance(reason, str) else None,
                )
        except Exception:  # its events could not be read back, say
            log.exception("agent %s: could not read queued execution %d", host.name, row)
            execution.error = execution.error or InternalError()
        execution.settle_first()
        execution.done.set()
        live.feed.notify()
        host.live.release(live)

    async def _read_through(self, live: LiveTask, row: int, seq: int | None) -> None:
        """Publish the task's events up to ``seq`` (None: all the log holds).

        Usually the wake-up of the execution's last round has had them read
        back already, or is reading them (then this waits for that read).
        A read of its own is tried again (see :meth:`_tried`) while anyone
        but ``row`` attends the task: its execution ended as the row says,
        whatever becomes of this read.
        """
        membership = self._membership
        assert membership is not None
        feed = live.feed
        while seq is None or feed.current_seq < seq:
            wakeup = feed.wakeup
            if seq is None or not live.catching_up:
                await self._tried(
                    "read the task of",
                    row,
                    lambda _: membership.read_back(live),
                    wanted=lambda: live.users > 1,  # anyone besides the row
                )
                return
            await wakeup.wait()

    # --- worker processes ----------------------------------------------------------

    def work_arrived(self) -> None:
        self._work_arrived.set()

    def hand_back_running(self) -> None:
        """The worker stops before they end: its executions go back to the queue.

        For an agent that declared them safe to restart (``restartable``):
        each is stopped without ending its task, and another worker runs it
        again from the start on the task as it was left.
        """
        for execution in self._running.values():
            execution.handed_back = True

    async def serve(
        self, concurrency: int, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Claim and run queued executions, at most ``concurrency`` at once, until closing."""
        host = self._state
        assert host.cluster is not None
        coordination = host.cluster.coordination
        host.cluster.work_for(host.name)
        running = 0
        freed = trio.Event()

        def one_done() -> None:
            nonlocal running, freed
            running -= 1
            freed.set()
            freed = trio.Event()

        task_status.started()
        while host.running:
            self._work_arrived = trio.Event()
            claimed: list[QueuedExecution] = []
            wanted = concurrency - running
            if wanted > 0:
                try:
                    claimed = await coordination.claim_queued([host.name], wanted)
                except Exception as error:  # the database is away: look again later
                    log.warning("agent %s: could not claim queued work: %s", host.name, error)
            for work in claimed:
                running += 1
                host.finishing().start_soon(self._run, work, one_done)
            # No claim again at once: fewer than asked for means none waited
            # past them (rows another worker locked are that worker's), and one
            # queued since sets the event taken before the claim. No poll
            # either: a wake-up says at once that work waits, and every
            # heartbeat whether any does (a wake-up lost, say; runtime.cluster).
            if running < concurrency:
                await self._work_arrived.wait()
            else:
                await freed.wait()

    async def _mark_running(self, rows: list[int]) -> None:
        assert self._state.cluster is not None
        await self._state.cluster.coordination.mark_running(rows)

    async def _mark_done(self, ended: list[tuple[QueuedFinish, str | None]]) -> None:
        cluster = self._state.cluster
        assert cluster is not None
        leases = [lease for _, lease in ended if lease is not None]
        try:
            await cluster.coordination.finish_queued([f for f, _ in ended], release=leases)
        except BaseException:
            for lease in leases:  # let go on their own, at least
                cluster.release(lease)
            raise

    async def _run(self, work: QueuedExecution, done: Callable[[], None]) -> None:
        host = self._state
        assert host.cluster is not None
        coordination = host.cluster.coordination
        answer: str | None = None
        error: dict[str, object] | None = None
        again = False  # back to the queue: not run here, or handed back
        started = False
        seq = 0  # the task's last event when the execution ended
        lease: str | None = None  # its lease, if let go with its end
        ended = False  # its row ended with its last round
        try:
            request = json.loads(work.request)
            telemetry.adopt(request)
            stored = None
            restart = bool(request.get("restart"))
            if request["continuing"] or restart:
                stored = await host.store.get_task(host.name, work.task_id, owner=None)
                if stored is None and request["continuing"]:
                    raise TaskNotFoundError(f"Task {work.task_id} not found")
            execution = Execution(
                _context(work.task_id, request, stored),
                continuing=stored is not None,
                protocol=request.get("protocol") or PROTOCOL_VERSION,
                restart=restart and stored is not None,
                queued=work,
            )
            if not host.running:  # claimed as the worker began to stop: nothing ran
                again = True
                return
            await self._starting.add(work.id)
            live = host.live.acquire(work.task_id, stored)
            try:
                self._executions.start(live, execution)
                started = True
                self._running[work.id] = execution
                await execution.done.wait()
                ended = execution.queued_ended  # with its last events (see Recorder)
                seq = live.feed.last_seq
                token = execution.lease_token
                if token is not None and host.cluster.withdraw_release(token):
                    lease = token
                # Handed back, unless it ended meanwhile (or answered with a Message).
                again = execution.handed_back and execution.answer is None and not ended
                again = again and (live.feed.snapshot is None or live.left_running)
            except UnsupportedOperationError:  # began to stop meanwhile: nothing ran
                again = True
                return
            finally:
                self._running.pop(work.id, None)
                host.live.release(live)
            if again:
                log.warning(
                    "agent %s: task %s handed back to the queue (the worker stopped before it"
                    " finished; the agent is restartable)",
                    host.name,
                    work.task_id,
                )
            elif execution.answer is not None:
                answer = execution.answer.to_json()
            elif execution.error is not None:
                error = _recorded(execution.error)
        except Exception as failure:  # its reason too: a database away is worth a retry
            failed = failure if isinstance(failure, A2AError) else unanswered(failure)
            if not isinstance(failed, TaskNotFoundError | StorageUnavailableError):
                log.exception("agent %s: queued execution %d failed", host.name, work.id)
            error = _recorded(failed)
        finally:
            try:
                if again:
                    if lease is not None:
                        host.cluster.release(lease)
                    await self._tried(
                        "hand back",
                        work.id,
                        lambda _: coordination.requeue(work, restart=started),
                        shield=True,
                    )
                elif not ended:
                    finish = QueuedFinish(work, answer=answer, error=error, seq=seq)
                    # Its lease goes with the first try (a failed one let it go alone).
                    await self._tried(
                        "finish",
                        work.id,
                        lambda first: self._ending.add((finish, lease if first else None)),
                        shield=True,
                    )
            finally:
                done()

    async def _tried(
        self,
        what: str,
        row: int,
        attempt: Callable[[bool], Awaitable[T]],
        *,
        shield: bool = False,
        wanted: Callable[[], bool] | None = None,
    ) -> T | None:
        """``attempt`` (told whether it is the first) until the database takes it:
        a client waits for it, and nothing else would do it.

        Tried again after 0.1 s, then twice as long each time up to 5 s, each
        refusal logged (see :func:`~a2a_trio.runtime.backoff.retrying`).
        ``shield`` shields each try, not the pauses: a worker stopped at once
        leaves its row to the process that finds it gone, which tells the
        client. None once ``wanted`` says it is needed no more.
        """

        def refused(error: Exception, pause: float) -> None:
            log.warning(
                "agent %s: could not %s queued execution %d (its client waits;"
                " trying again in %.1f s): %s",
                self._state.name,
                what,
                row,
                pause,
                error,
            )

        return await retrying(attempt, refused, shield=shield, wanted=wanted)


class _Queued:
    """An execution to queue: its task and request; its row once queued."""

    __slots__ = ("request", "row", "task_id")

    def __init__(self, task_id: str, request: str) -> None:
        self.task_id = task_id
        self.request = request
        self.row: int | None = None


class _Early:
    """A task's executions being queued (``count``), and the DONE wake-ups heard of
    its rows meanwhile (row: the outcome the wake-up carried, if it did)."""

    __slots__ = ("count", "done")

    def __init__(self) -> None:
        self.count = 0
        self.done: dict[int, QueuedOutcome | None] = {}


def _recorded(error: A2AError) -> dict[str, object]:
    """``error`` as a queued outcome carries it to the web process (see ``_finish``)."""
    return {"code": error.code, "message": error.message, "reason": error.spec.reason}


def _cut_off(live: LiveTask, execution: Execution) -> bool:
    """Whether the follow-up is in the task's log while the task shows it nothing since.

    Its message was written when its execution started, and the task is
    still as the message found it (paused): the execution stopped before
    the agent's first status.
    """
    feed = live.feed
    begun = execution.continuing and feed.last_seq > execution.start_seq
    return begun and feed.settled_seq <= execution.start_seq


def _context(task_id: str, request: dict[str, Any], stored: StoredTask | None) -> RequestContext:
    """The execution's request context, as the web process that queued it built it."""
    message = Message.model_validate_json(request["message"])
    configuration = request.get("configuration")
    caller = request["caller"]
    return RequestContext(
        task_id=task_id,
        context_id=message.context_id or "",
        message=message,
        current_task=stored.task if stored else None,
        caller=Principal(
            identifier=caller["identifier"],
            scopes=frozenset(caller["scopes"]),
            authenticated=bool(caller["authenticated"]),
            claims=caller.get("claims") or {},
        ),
        configuration=(
            SendMessageConfiguration.model_validate_json(configuration) if configuration else None
        ),
        metadata=request.get("metadata") or {},
        requested_extensions=frozenset(request.get("extensions") or ()),
    )

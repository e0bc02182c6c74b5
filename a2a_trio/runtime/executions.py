"""Executions: runs of an agent's executor (and of its cancel) in the host nursery.

Each execution (or cancel) runs under its own cancel scope in the host's
nursery, holding its task (see ``state.LiveTasks``) until it is done; what
it enqueues goes to the recorder through its queue.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Awaitable, Callable

import trio

from .. import telemetry
from .._locks import held
from ..protocol import (
    InternalError,
    InvalidAgentResponseError,
    Message,
    StorageFullError,
    StorageUnavailableError,
    Task,
    TaskState,
    UnsupportedOperationError,
)
from ..store import LeaseHeld, StaleTask, StoredTask
from ..store.outage import unreachable
from .cluster import new_token
from .endings import CANCELED_BY_CLIENT, STORE_FAILED, Ending, PendingEndings, ending_of
from .executor import AgentExecutor, Principal, RequestContext
from .recorder import Recorder
from .retries import Retries
from .state import ABANDONED, Entry, Execution, ExecutionQueue, HostState, LiveTask, TurnMessage
from .withdrawals import PendingWithdrawals

__all__ = ["Executions"]

log = logging.getLogger("a2a_trio.runtime")


class Executions:
    """Runs the host's executions and cancels, each under its own cancel scope.

    Each holds its task (a lease in :class:`LiveTasks`) until it is done, and
    returns only once the recorder has dealt with every event it enqueued.
    """

    def __init__(
        self,
        state: HostState,
        *,
        executor: AgentExecutor,
        recorder: Recorder,
        retries: Retries,
        inbox: trio.MemorySendChannel[Entry],
    ) -> None:
        self.state = state
        self.name = state.name
        self.store = state.store
        self.settings = state.settings
        self.executor = executor
        self._live = state.live
        self._recorder = recorder
        self._retries = retries
        self._inbox = inbox
        #: The executions running now (cancels excepted).
        self.running: set[Execution] = set()
        #: Tasks whose ending could not be stored yet (the store failed, its disk was full).
        self._pending = PendingEndings(
            state,
            end_now=recorder.end_if_open,
            end=self._end_pending,
            release=self._release,
        )
        #: Refused follow-ups whose task's pause waits to be stored again.
        self._withdrawals = PendingWithdrawals(state, recorder)

    def start(self, live: LiveTask, execution: Execution) -> None:
        """Run ``execute`` in the host nursery; the execution holds its task until done.

        Raises ``UnsupportedOperationError`` (nothing started) while the host shuts down.
        """
        self.state.accepting().start_soon(self._run, live, execution)
        live.users += 1  # held by the execution until it is done
        self.running.add(execution)
        self._retries.started(live, execution)

    async def cancel(
        self,
        live: LiveTask,
        stored: StoredTask,
        caller: Principal,
        metadata: dict[str, object],
        lease: str | None = None,
    ) -> Task:
        """Cancel in this process (holding the task's ``lease``, let go when done).

        The executor's ``cancel`` runs in the host nursery (see :meth:`_cancel`);
        this returns the task once its ending is published.
        """
        snapshot = live.feed.current or stored.task
        canceller = Execution(
            RequestContext(
                task_id=snapshot.id,
                context_id=snapshot.context_id or "",
                current_task=snapshot,
                caller=caller,
                metadata=metadata,
            ),
            purpose="cancel",
            lease_token=lease,
        )
        try:
            self.state.accepting().start_soon(self._cancel, live, canceller)
        except BaseException:
            self._release(lease)
            raise
        await canceller.first.wait()
        if canceller.error is not None:
            raise canceller.error
        published = live.feed.snapshot
        assert published is not None
        return published

    @property
    def endings_waiting(self) -> int:
        """How many tasks wait for their ending to be stored (see PendingEndings)."""
        return self._pending.waiting

    async def _run(self, live: LiveTask, execution: Execution) -> None:
        lease = execution.lease_token  # taken with the request's read, if it was
        if lease is None and self.state.cluster is not None:
            lease = execution.lease_token = new_token()
        owner = execution.context.caller.identifier
        began = False
        try:
            if lease is not None and execution.continuing and not execution.claimed:
                await self._live.claim(live.task_id)  # before the lock: see LiveTasks.claim
                execution.claimed = True
            async with held(live.lock):  # waits while an earlier message to the task runs
                if execution.continuing and not await self._resume(live, execution):
                    return
                live.execution = execution
                began = True
                self.state.observer.execution_started(self.name, live.task_id, owner)
                await self._execute(live, execution)
        except Exception as failure:
            full = failure if isinstance(failure, StorageFullError) else None
            if full is None:  # a full disk is logged once, by the store
                log.exception("host failure while running task %s", live.task_id)
            if began and not (full is not None and self._untouched(live, execution)):
                # The task moved under this execution: it ends (created first if
                # need be: the client then gets it), CANCELED if asked.
                ending = ending_of(cancel_requested=execution.cancel_requested)
                if not await self._pending.end_now(live, ending, lease):
                    lease = None  # held until the ending is stored
            elif began:
                # A continuation's message was stored, nothing after it: the
                # task stays paused, as the client told STORAGE_FULL expects,
                # and says so in its log once it can (see withdrawals).
                self._withdrawals.add(live.task_id, execution.start_seq)
            # Else nothing of this execution was stored: the task stays as it was.
            if full is not None:
                execution.error = full  # retryable: the client tries again
            elif not execution.first.is_set():
                execution.error = unanswered(failure)
        finally:
            if lease is not None and not execution.lease_released:
                self._release(lease)
            if execution.claimed:
                self._live.unclaim(live.task_id)
            self._retries.finished(execution)
            if live.execution is execution:
                live.execution = None
            if not execution.first.is_set():
                execution.error = execution.error or InvalidAgentResponseError(
                    "The agent finished without answering"
                )
                execution.settle_first()
            execution.done.set()
            self.running.discard(execution)
            if began:
                error = execution.error.message if execution.error else None
                self.state.observer.execution_ended(self.name, live.task_id, owner, error)
            live.feed.notify()
            self._live.release(live)

    @staticmethod
    def _untouched(live: LiveTask, execution: Execution) -> bool:
        """Whether a continuation stored its message and nothing after it, uncanceled.

        Its client is answered STORAGE_FULL ("nothing was stored, try again"):
        ending the paused task FAILED would turn that retry away. The message
        stays in the log, its pause said again after it once the store takes
        it (:mod:`.withdrawals`); the retry's equal copy is shown once (HistoryWindow).
        A cancel asked meanwhile still ends the task CANCELED.
        """
        return (
            execution.continuing
            and not execution.cancel_requested
            # Below: its message was not stored either (written with its events).
            and live.feed.current_seq <= execution.start_seq
        )

    async def _lease(self, live: LiveTask, execution: Execution) -> None:
        """Several processes: wait for the task's lease (one execution at a time, anywhere).

        A lease taken over from a process that died comes with its task left
        as that process left it: a task it was running ends FAILED first, so
        the message finds it final.
        """
        if self.state.cluster is None:
            return
        assert execution.lease_token is not None
        claim = await self.state.cluster.hold(self.name, live.task_id, execution.lease_token)
        if claim.took_over:
            await self.end_stored(live.task_id, ABANDONED, live=live)

    def _release(self, lease: str | None) -> None:
        if lease is not None and self.state.cluster is not None:
            self.state.cluster.release(lease)

    async def _end_pending(self, task_id: str, ending: Ending) -> None:
        """Store an ending that had to wait for the store (see PendingEndings)."""
        await self.end_stored(task_id, ending[1], state=ending[0])
        live = self._live.tasks.get(task_id)
        if live is not None and live.left_running and self._live.attended is not None:
            # Ended by another process meanwhile (this one was found dead, say):
            # its streams read that ending back from the log.
            self._live.attended(live)

    async def end_stored(
        self,
        task_id: str,
        reason: str = STORE_FAILED,
        *,
        state: TaskState = TaskState.FAILED,
        live: LiveTask | None = None,
    ) -> bool:
        """End the stored task (``state``, ``reason``) if it is still open; whether it was.

        Without ``live`` (the caller holds its lock) the task is taken and
        locked here, so that no continuation runs on it meanwhile.
        """
        if live is not None:
            return await self._end_running(live, state, reason)
        stored = await self.store.get_task(self.name, task_id, owner=None)
        if stored is None or stored.state.is_final:
            return False
        live = self._live.acquire(task_id, stored)
        try:
            async with live.lock:
                return await self._end_running(live, state, reason)
        finally:
            self._live.release(live)

    async def _end_running(self, live: LiveTask, state: TaskState, reason: str) -> bool:
        stored = await self.store.get_task(self.name, live.task_id, owner=None)
        if stored is None or stored.state.is_final:
            return False
        if reason == ABANDONED and stored.state.is_interrupted:
            # Paused as its execution left it (a message may continue it),
            # unless a follow-up's execution had started: its message is in
            # the log, unanswered, and nothing runs it any more.
            started = await self.store.unfinished_tasks(self.name, task_id=live.task_id)
            if not started:
                return False
        live.feed.reset(stored.task, stored.last_seq)
        await self._recorder.end(live, state, reason)
        await self._recorder.publish(live)
        log.warning("agent %s: task %s ended %s: %s", self.name, live.task_id, state.value, reason)
        return True

    async def _resume(self, live: LiveTask, execution: Execution) -> bool:
        """Start a continuation: re-check the task and add the message to its history.

        The task is read again only if its request's read may be stale: this
        process wrote it since (its live task's feed moved). One process
        (SQLite, held exclusively): nothing else writes the task, and its live
        task's lock keeps this process's other writers out, so the executor
        starts at once and the message goes with its first events (one round,
        not two) -- unless the request streams (``execution.await_message``):
        a stream begins once the message is stored.

        Several processes: the message is written by the recorder's next
        round and stored before the executor starts, its write refused if the
        task moved meanwhile (another process wrote it); the task's lease (one
        execution at a time, anywhere) is taken in the same write, unless
        somebody holds it or the task moved; then it is waited for
        (:meth:`_lease`), the task read under it and the message written
        again. A lease taken with the request's read (``execution.lease_held``)
        makes the task this execution's: its message cannot be refused as
        stale, so it goes with the executor's first events as on one process.
        """
        stored = execution.read
        if stored is not None and live.feed.current_seq != stored.last_seq:
            stored = None
        cluster = self.state.cluster
        held = execution.lease_held
        with_write = cluster is not None and stored is not None and not (execution.restart or held)
        if cluster is not None and not with_write and not held:
            await self._lease(live, execution)
        sent = False
        while True:
            if stored is None:
                stored = await self.store.get_task(self.name, live.task_id, owner=None)
            assert stored is not None
            if stored.state.is_final:
                execution.error = UnsupportedOperationError(
                    f"Task {live.task_id} is {stored.state.value} and accepts no more messages",
                    metadata={"taskId": live.task_id, "state": stored.state.value},
                )
                execution.settle_first()
                return False
            live.feed.reset(stored.task, stored.last_seq)
            if execution.restart:  # a restart's message is in the log already
                break
            lease = None
            if with_write:
                assert cluster is not None and execution.lease_token is not None
                lease = (cluster.member, execution.lease_token)
            if (held or cluster is None) and not execution.await_message:
                await self._send_turn(live, execution)
                sent = True
                break
            error = await self._write_turn(live, execution, lease)
            if error is None:
                break
            if not with_write or not isinstance(error, LeaseHeld | StaleTask):
                raise error
            with_write, stored = False, None  # held or moved: wait for it, read it again
            await self._lease(live, execution)
        if not sent:  # else the message's seq, set when it was sent
            execution.start_seq = live.feed.last_seq
        execution.start_snapshot = live.feed.current
        execution.may_resume = stored.state.is_interrupted
        execution.context = dataclasses.replace(execution.context, current_task=live.feed.current)
        execution.settle_first()
        return True

    async def _send_turn(self, live: LiveTask, execution: Execution) -> None:
        """Queue the message, not waited for: the executor's first event, sent before the
        recorder wakes (no checkpoint here), joins it in its round. Its seq is the next
        (this execution holds the task), set again once taken (TaskWrites.turn)."""
        message = execution.context.message
        assert message is not None
        execution.start_seq = live.feed.current_seq + 1
        entry: Entry = (live, execution, TurnMessage(message, message.to_json(), awaited=False))
        try:
            self._inbox.send_nowait(entry)
        except trio.WouldBlock:  # the recorder is behind: wait for room
            await self._inbox.send(entry)

    async def _write_turn(
        self, live: LiveTask, execution: Execution, lease: tuple[str, str] | None
    ) -> Exception | None:
        """Write the continuation's message (taking ``lease`` with it); why not, if not."""
        message = execution.context.message
        assert message is not None
        turn = TurnMessage(message, message.to_json(), lease)
        await self._inbox.send((live, execution, turn))
        await turn.written.wait()
        return turn.error

    def history_reader(self, task_id: str) -> Callable[[int | None], Awaitable[list[Message]]]:
        """What a :class:`RequestContext` of ``task_id`` reads its task's history with."""
        return functools.partial(self._history, task_id)

    def _handed(self, context: RequestContext) -> RequestContext:
        """The context as the executor gets it: able to read its task's history."""
        if context.history_reader is not None:  # built with it (Messages): no copy
            return context
        return dataclasses.replace(context, history_reader=self.history_reader(context.task_id))

    async def _history(self, task_id: str, length: int | None) -> list[Message]:
        return await self.store.history(
            self.name, task_id, limits=self.settings.limits, length=length
        )

    async def _execute(self, live: LiveTask, execution: Execution) -> None:
        queue = ExecutionQueue(self._inbox, live, execution)
        failure: BaseException | None = None
        with execution.cancel_scope:
            try:
                with telemetry.execution(execution, self.name):
                    await self.executor.execute(self._handed(execution.context), queue)
            except Exception as exc:  # an agent bug must not harm the server
                failure = exc
                log.exception("executor of agent %s raised on task %s", self.name, live.task_id)
        # Returned, not stopped: if its task is left paused or final (nothing
        # more to write), its lease may go with its last events (see Recorder).
        execution.may_release = failure is None and not execution.cancel_scope.cancelled_caught
        await queue.end()
        if execution.recording_error is not None:
            raise execution.recording_error
        if failure is not None:
            await self._recorder.end_if_open(
                live, TaskState.FAILED, f"The agent failed: {_describe(failure)}"
            )
        elif execution.cancel_scope.cancelled_caught:
            if execution.cancel_requested:
                await self._recorder.end_if_open(live, TaskState.CANCELED, CANCELED_BY_CLIENT)
            elif not execution.handed_back:
                await self._recorder.end_if_open(
                    live, TaskState.FAILED, "The server shut down before the task finished."
                )
        elif execution.answer is None:
            snapshot = live.feed.current
            if snapshot is not None and snapshot.status.state in (
                TaskState.SUBMITTED,
                TaskState.WORKING,
            ):
                log.warning(
                    "executor of agent %s returned leaving task %s %s",
                    self.name,
                    live.task_id,
                    snapshot.status.state.value,
                )
                await self._recorder.end_if_open(
                    live, TaskState.FAILED, "The agent stopped without finishing the task."
                )
        await self._recorder.publish(live)

    async def _cancel(self, live: LiveTask, canceller: Execution) -> None:
        """Run the executor's ``cancel``, end the task CANCELED, then stop its execution.

        The executor's ``cancel`` gets ``cancel_grace`` to do its own clean-up.
        The client is answered (``canceller.first``) once the ending is
        published, or with an error if it could not be stored; the running
        execution's cancel scope is cancelled right after the answer.
        """
        live.users += 1
        running = live.execution
        try:
            if running is not None:
                running.cancel_requested = True
            queue = ExecutionQueue(self._inbox, live, canceller)
            with trio.move_on_after(self.settings.cancel_grace):
                try:
                    with telemetry.execution(canceller, self.name):
                        await self.executor.cancel(self._handed(canceller.context), queue)
                except Exception:
                    log.exception("cancel of agent %s raised on task %s", self.name, live.task_id)
            await queue.end()
            unstored = canceller.recording_error
            if unstored is not None and not isinstance(unstored, StorageFullError):
                log.error(
                    "agent %s: the cancel events for task %s were not stored (%s);"
                    " ending it CANCELED",
                    self.name,
                    live.task_id,
                    unstored,
                )
            await self._recorder.end_if_open(live, TaskState.CANCELED, CANCELED_BY_CLIENT)
            await self._recorder.publish(live)
            canceller.settle_first()
            if running is not None:
                # The task is CANCELED for good: whatever the execution does now
                # nobody will see, so it stops at once (its finally blocks and
                # shielded clean-up still run). The grace was the cancel hook's.
                running.cancel_scope.cancel()
        except StorageFullError as full:
            # The cancel stands though its ending cannot be stored yet: the
            # execution stops now, and the task ends CANCELED once it can be.
            # The client hears why its answer waits (retryable).
            if running is not None:
                running.cancel_scope.cancel()
            else:
                self._pending.add(live.task_id, (TaskState.CANCELED, CANCELED_BY_CLIENT))
            if not canceller.first.is_set():
                canceller.error = full
        except Exception as failure:
            # The store is failing: the client hears of it, the host goes on.
            log.exception("agent %s could not cancel task %s", self.name, live.task_id)
            if running is not None:
                running.cancel_requested = False
            if not canceller.first.is_set():
                canceller.error = unanswered(failure)
        finally:
            canceller.settle_first()
            if canceller.lease_token is not None and self.state.cluster is not None:
                self.state.cluster.release(canceller.lease_token)
            self._live.release(live)


def unanswered(failure: Exception) -> InternalError | StorageUnavailableError:
    """What a client not answered yet hears of a failure of the host's: to try
    again later when the database was out of reach (the retry's messageId finds
    what was stored), else the server's fault."""
    return StorageUnavailableError() if unreachable(failure) else InternalError()


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    name = type(error).__name__
    return f"{name}: {text}"[:500] if text else name

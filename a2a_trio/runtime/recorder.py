"""The recorder: each executor event checked, written, then published.

Every event an execution enqueues reaches the recorder through the host's
inbox. The recorder checks it against the state machine and the limits,
writes it to the store with the task it produces, and publishes it to the
task's feed once its transaction has committed (in direct push mode, once
its webhooks had it).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar

import trio
from pydantic_core import PydanticSerializationError

from .. import telemetry
from .._locks import held
from ..protocol import (
    IllegalTransition,
    Message,
    Part,
    Role,
    StorageFullError,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    check_executor_move,
    check_host_ending,
    utcnow,
)
from ..protocol.tasks import apply_artifact, apply_status, kept_history
from ..push import PushDispatcher
from ..store import EventWrite, NewTask, ReceiptWrite, Round, Share, ShareOutcome, Store
from ..store.observer import NO_OBSERVER, Observer
from .executions import Entry, Execution, LiveTask, LiveTasks
from .executor import AgentEvent, new_agent_message
from .retries import Retries
from .settings import HostSettings

__all__ = ["Recorder"]

log = logging.getLogger("a2a_trio.runtime")

T = TypeVar("T")

#: The outcome of a share that wrote nothing.
_NOTHING = ShareOutcome()


class _EventRefused(Exception):
    """An executor event that cannot be recorded; logged and dropped."""


class Recorder:
    """Reads what the executions enqueue; writes each event, then publishes it.

    Rounds, savepoints and the direct push hand-off live here; the host
    starts :meth:`run` in its recording nursery and ends host-imposed task
    states (:meth:`end`, :meth:`end_if_open`) through it.
    """

    def __init__(
        self,
        *,
        name: str,
        store: Store,
        settings: HostSettings,
        push: PushDispatcher | None,
        push_notifications: bool,
        live: LiveTasks,
        retries: Retries,
        inbox: trio.MemoryReceiveChannel[Entry],
        spawn: Callable[..., None],
    ) -> None:
        self.name = name
        self.store = store
        self.settings = settings
        self.push = push
        self.push_notifications = push_notifications
        self._live = live
        self._retries = retries
        self._inbox = inbox
        #: Starts host work that finishes what is under way (the direct push
        #: hand-off), even while the host shuts down.
        self._spawn = spawn
        #: One write at a time (rounds, endings, receipts): each is worked out
        #: from the tasks as the write before it left them.
        self._writing = trio.Lock()
        #: Executions whose first answer waits for the write under way to be stored.
        self._settling: list[Execution] = []
        #: This process's member id when several serve the database: a task is
        #: created with its execution's lease.
        self.member: str | None = None
        #: Told of every share once it is committed (the console, the metrics).
        self.observer: Observer = NO_OBSERVER

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
        by_task: dict[LiveTask, list[tuple[Execution, AgentEvent]]] = {}
        ended: list[Execution] = []
        for live, execution, event in entries:
            if event is None:
                ended.append(execution)
            else:
                by_task.setdefault(live, []).append((execution, event))
        shares: list[
            tuple[LiveTask, Share, list[tuple[Execution, AgentEvent]], list[Execution]]
        ] = []
        for live, items in by_task.items():
            share = Share(self.name, live.task_id)
            live.feed.hold()
            for execution, event in items:
                if execution.recording_error is not None:
                    continue
                try:
                    self._record(live, execution, event, share)
                except (_EventRefused, IllegalTransition) as refusal:
                    log.warning(
                        "agent %s: event for task %s refused: %s", self.name, live.task_id, refusal
                    )
            settling, self._settling = self._settling, []
            shares.append((live, share, items, settling))
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
                    self.observer.committed(self.name, share, owner, took)
                self._committed(live, outcome.queued, settling)
                continue
            log.log(
                logging.DEBUG if isinstance(outcome.error, StorageFullError) else logging.ERROR,
                "agent %s could not record events of task %s: %s",
                self.name,
                live.task_id,
                outcome.error,
            )
            live.feed.discard()  # rolled back: no one may see these events
            for execution, _ in items:
                self._recording_failed(execution, outcome.error)
        for execution in ended:
            execution.recorded.set()

    @staticmethod
    def _recording_failed(execution: Execution, error: Exception) -> None:
        """The execution's events cannot be stored: stop it; its run reports the error."""
        if execution.recording_error is None:
            execution.recording_error = error
        execution.cancel_scope.cancel()

    def _record(
        self, live: LiveTask, execution: Execution, event: AgentEvent, share: Share
    ) -> None:
        """Check one executor event and write it; its round commits, then publishes it.

        An event that cannot be stored (a string that is not valid Unicode,
        say) is refused before anything of it is written.
        """
        try:
            self._record_checked(live, execution, event, share)
        except PydanticSerializationError as error:
            raise _EventRefused(f"the event cannot be stored: {error}") from None

    def _record_checked(
        self, live: LiveTask, execution: Execution, event: AgentEvent, share: Share
    ) -> None:
        context = execution.context
        if execution.answer is not None:
            raise _EventRefused(
                "the agent already answered with a message; a message answer is final"
            )
        if isinstance(event, Message):
            self._record_message(live, execution, event, share)
            return
        named = event_task_id(event)
        if named != context.task_id:
            raise _EventRefused(
                f"event names task {named!r}, the execution serves {context.task_id!r}"
            )
        event_context = event.context_id
        if event_context and event_context != context.context_id:
            raise _EventRefused(
                f"event names context {event_context!r}, the task is in {context.context_id!r}"
            )
        if isinstance(event, Task):
            self._record_task(live, execution, event, share)
        elif isinstance(event, TaskStatusUpdateEvent):
            self._ensure_created(live, execution, share)
            self._record_status(live, execution, event, share)
        else:
            self._ensure_created(live, execution, share)
            self._record_artifact(live, event, share)

    def _record_message(
        self, live: LiveTask, execution: Execution, message: Message, share: Share
    ) -> None:
        context = execution.context
        if message.role is not Role.AGENT:
            raise _EventRefused("an agent may only enqueue messages with role ROLE_AGENT")
        self._check_parts(message.parts, "the message")
        if live.feed.current is None:
            # Nothing was created: this message is the whole answer (spec 3.1.1),
            # rendered later; one that cannot be rendered is refused here.
            answer = message.model_copy(
                update={"context_id": message.context_id or context.context_id}
            )
            rendered = answer.to_json()
            self.remember(share, execution, answer=rendered)
            execution.answer = answer
            self._settling.append(execution)
            return
        snapshot = live.feed.current
        if snapshot.status.state.is_final:
            raise _EventRefused("the task is in a final state")
        message = message.model_copy(
            update={"task_id": snapshot.id, "context_id": message.context_id or snapshot.context_id}
        )
        # The message joins the history in the log; the task itself is as it was.
        self.append(live, share, snapshot, "message", message.to_json(), None, [message])

    def _record_task(self, live: LiveTask, execution: Execution, task: Task, share: Share) -> None:
        snapshot = live.feed.current
        if snapshot is None:
            check_executor_move(None, task.status.state, may_resume=False)
            self._check_artifacts(task)
            for message in [task.status.message, *(task.history or [])]:
                if message is not None:
                    self._check_parts(message.parts, "a message of the task")
            self._create(live, execution, task, share)
            return
        if task.status.state == snapshot.status.state:
            return  # re-announcing the current task changes nothing
        self._record_status(
            live,
            execution,
            TaskStatusUpdateEvent(
                task_id=task.id, context_id=snapshot.context_id or "", status=task.status
            ),
            share,
        )

    def _ensure_created(self, live: LiveTask, execution: Execution, share: Share) -> None:
        if live.feed.current is None:
            context = execution.context
            self._create(
                live,
                execution,
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utcnow()),
                ),
                share,
            )

    def _create(self, live: LiveTask, execution: Execution, task: Task, share: Share) -> None:
        context = execution.context
        status = task.status
        if status.timestamp is None:
            status = status.model_copy(update={"timestamp": utcnow()})
        history = [context.message] if context.message else []
        history += [m for m in task.history or [] if m not in history]
        history = kept_history(history, self.settings.limits)
        task = task.model_copy(
            update={"context_id": context.context_id, "status": status, "history": None}
        )
        # The first event carries the opening history; the task as stored
        # does not (its history is read from the log, see store.history).
        response = StreamResponse(task=task.model_copy(update={"history": history or None}))
        payload = response.to_json()
        configuration = context.configuration
        config = configuration.task_push_notification_config if configuration else None
        if config is not None:
            config = _bound_config(config, task.id)
        lease = None
        if self.member is not None and execution.lease_token is not None:
            lease = (self.member, execution.lease_token)
        share.new = NewTask(context.caller.identifier, config, execution.protocol, lease)
        share.events.append(EventWrite(1, "task", payload, task))
        self.remember(share, execution, task_id=task.id)
        live.feed.record(1, task, response, payload, history)
        self._settling.append(execution)

    def _record_status(
        self, live: LiveTask, execution: Execution, event: TaskStatusUpdateEvent, share: Share
    ) -> None:
        snapshot = live.feed.current
        assert snapshot is not None
        current, requested = snapshot.status.state, event.status.state
        if event.status.message is not None:
            self._check_parts(event.status.message.parts, "the status message")
        if execution.purpose == "cancel" and requested is TaskState.CANCELED:
            check_host_ending(current, requested)
        else:
            check_executor_move(current, requested, may_resume=execution.may_resume)
        update: dict[str, object] = _context_update(event.context_id, snapshot)
        if event.status.timestamp is None:
            update["status"] = event.status.model_copy(update={"timestamp": utcnow()})
        if update:
            event = event.model_copy(update=update)
        response = StreamResponse(status_update=event)
        updated = apply_status(snapshot, event)
        self.append(live, share, updated, "status", response.to_json(), response, _said(event))
        if requested.is_interrupted:
            execution.may_resume = False

    def _record_artifact(
        self, live: LiveTask, event: TaskArtifactUpdateEvent, share: Share
    ) -> None:
        snapshot = live.feed.current
        assert snapshot is not None
        if snapshot.status.state.is_final:
            raise _EventRefused("artifacts cannot be added to a task in a final state")
        update = _context_update(event.context_id, snapshot)
        if update:
            event = event.model_copy(update=update)
        updated = apply_artifact(snapshot, event)
        self._check_artifacts(updated, event.artifact.artifact_id)
        response = StreamResponse(artifact_update=event)
        self.append(live, share, updated, "artifact", response.to_json(), response)

    def _check_parts(self, parts: list[Part], what: str) -> None:
        limit = self.settings.limits.parts
        if len(parts) > limit:
            raise _EventRefused(f"{what} has {len(parts)} parts; the limit is {limit}")

    def _check_artifacts(self, task: Task, changed: str | None = None) -> None:
        """Refuse a task over the artifact limits (only ``changed`` is counted, if named)."""
        artifacts = task.artifacts or []
        limit = self.settings.limits.artifacts
        if len(artifacts) > limit:
            raise _EventRefused(
                f"the task would hold {len(artifacts)} artifacts; the limit is {limit}"
            )
        for artifact in artifacts:
            if changed is None or artifact.artifact_id == changed:
                self._check_parts(artifact.parts, f"artifact {artifact.artifact_id!r}")

    def append(
        self,
        live: LiveTask,
        share: Share,
        snapshot: Task,
        kind: Literal["status", "artifact", "message"],
        payload: str,
        response: StreamResponse | None,
        messages: Sequence[Message] = (),
    ) -> None:
        """Add one event, with the task it makes, to the task's share of the write.

        ``messages``: what the event adds to the task's history (its log keeps them).
        """
        seq = live.feed.current_seq + 1
        share.events.append(EventWrite(seq, kind, payload, snapshot))
        live.feed.record(seq, snapshot, response, payload, messages)

    def remember(self, share: Share, execution: Execution, **receipt: Any) -> None:
        """Note what the execution's message started; store its receipt with the share if due.

        See :meth:`Retries.remember`: the receipt is stored only once the
        message's request went away without its answer.
        """
        due = self._retries.remember(execution, **receipt)
        if due is not None:
            share.receipts.append(due)

    def _committed(self, live: LiveTask, notifications: int, settling: list[Execution]) -> None:
        """The task's share is stored: settle its waiters, then publish what it held."""
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
            self._spawn(self._deliver_then_publish, live)
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
        """Store one task's share outside the rounds (host endings, a continuation's message).

        ``build`` adds the writes (through :meth:`append`); they are published
        once stored. Raises what kept them from being stored (nothing is).
        """
        await self._locked(self._write, live, build)

    async def _write(self, live: LiveTask, build: Callable[[Share], None]) -> None:
        share = Share(self.name, live.task_id)
        live.feed.hold()
        try:
            build(share)
            settling, self._settling = self._settling, []
            outcome = _NOTHING
            began = time.perf_counter()
            if share.events or share.receipts:
                round = Round([share], push=self.push_notifications, limits=self.settings.limits)
                with telemetry.store_round(self.name, round):
                    [outcome] = await self.store.record(round)
            if outcome.error is not None:
                raise outcome.error
        except BaseException:
            self._settling.clear()
            live.feed.discard()
            raise
        if share.events:
            execution = live.execution
            owner = execution.context.caller.identifier if execution else None
            self.observer.committed(self.name, share, owner, time.perf_counter() - began)
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
        await self.write(live, lambda share: self._end(live, share, state, reason))

    async def end_if_open(self, live: LiveTask, state: TaskState, reason: str) -> None:
        """:meth:`end` the task unless it is final (creating it first, if need be)."""
        await self.write(live, lambda share: self._end_if_open(live, share, state, reason))

    def _end(self, live: LiveTask, share: Share, state: TaskState, reason: str) -> None:
        snapshot = live.feed.current
        assert snapshot is not None
        check_host_ending(snapshot.status.state, state)
        event = TaskStatusUpdateEvent(
            task_id=snapshot.id,
            context_id=snapshot.context_id or "",
            status=TaskStatus(
                state=state,
                message=new_agent_message(
                    reason, context_id=snapshot.context_id, task_id=snapshot.id
                ),
                timestamp=utcnow(),
            ),
        )
        response = StreamResponse(status_update=event)
        updated = apply_status(snapshot, event)
        self.append(live, share, updated, "status", response.to_json(), response, _said(event))

    def _end_if_open(self, live: LiveTask, share: Share, state: TaskState, reason: str) -> None:
        snapshot = live.feed.current
        if snapshot is None:
            execution = live.execution
            if execution is None or execution.answer is not None:
                return
            self._ensure_created(live, execution, share)
            snapshot = live.feed.current
            assert snapshot is not None
        if not snapshot.status.state.is_final:
            self._end(live, share, state, reason)


def _context_update(context_id: str, snapshot: Task) -> dict[str, object]:
    """The update that gives an event its task's context id, when it lacks it."""
    wanted = snapshot.context_id or context_id
    return {} if wanted == context_id else {"context_id": wanted}


def _said(event: TaskStatusUpdateEvent) -> list[Message]:
    """What a status update adds to the history: its message, if it has one."""
    message = event.status.message
    return [message] if message is not None else []


def event_task_id(event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> str:
    return event.id if isinstance(event, Task) else event.task_id


def _bound_config(config: TaskPushNotificationConfig, task_id: str) -> TaskPushNotificationConfig:
    """The config as stored: bound to its task, with an id (the client's, or a new one)."""
    return config.model_copy(
        update={"task_id": task_id, "id": config.id or str(uuid.uuid4()), "tenant": None}
    )

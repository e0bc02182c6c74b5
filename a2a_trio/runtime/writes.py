"""What each event writes: checked against the state machine and the limits, then added.

An executor's event (or a host-imposed ending) becomes writes in its task's
:class:`~a2a_trio.store.Share` and records in its feed, held there until the
recorder's transaction commits (see ``recorder``). Nothing here waits.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal

from pydantic_core import PydanticSerializationError

from ..protocol import (
    Message,
    Part,
    Role,
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
from ..store import EventWrite, NewTask, Share
from .executor import AgentEvent, new_agent_message
from .retries import Retries
from .state import Execution, HostState, LiveTask, TurnMessage

__all__ = ["EventRefused", "TaskWrites", "bound_config", "event_task_id"]


class EventRefused(Exception):
    """An executor event that cannot be recorded; logged and dropped."""


class TaskWrites:
    """Turns events into the writes of their task's share, each checked first."""

    def __init__(self, state: HostState, *, retries: Retries) -> None:
        self.state = state
        self.settings = state.settings
        self._retries = retries
        #: Executions whose first answer waits for the write under way to be stored.
        self.settling: list[Execution] = []

    def take_settling(self) -> list[Execution]:
        """The executions settled by the write being built now (and no more after)."""
        settling, self.settling = self.settling, []
        return settling

    def event(self, live: LiveTask, execution: Execution, event: AgentEvent, share: Share) -> None:
        """Check one executor event and write it; its round commits, then publishes it.

        An event that cannot be stored (a string that is not valid Unicode,
        say) is refused before anything of it is written.
        """
        try:
            self._record_checked(live, execution, event, share)
        except PydanticSerializationError as error:
            raise EventRefused(f"the event cannot be stored: {error}") from None

    def _record_checked(
        self, live: LiveTask, execution: Execution, event: AgentEvent, share: Share
    ) -> None:
        context = execution.context
        if execution.answer is not None:
            raise EventRefused(
                "the agent already answered with a message; a message answer is final"
            )
        if isinstance(event, Message):
            self._record_message(live, execution, event, share)
            return
        named = event_task_id(event)
        if named != context.task_id:
            raise EventRefused(
                f"event names task {named!r}, the execution serves {context.task_id!r}"
            )
        event_context = event.context_id
        if event_context and event_context != context.context_id:
            raise EventRefused(
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
            raise EventRefused("an agent may only enqueue messages with role ROLE_AGENT")
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
            self.settling.append(execution)
            return
        snapshot = live.feed.current
        if snapshot.status.state.is_final:
            raise EventRefused("the task is in a final state")
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
        # The first event carries the opening history; the task as stored
        # does not (its history is read from the log, see store.history).
        # The task _ensure_created makes is as stored already: not copied.
        if (
            task.context_id != context.context_id
            or task.status is not status
            or task.history is not None
        ):
            task = task.model_copy(
                update={"context_id": context.context_id, "status": status, "history": None}
            )
        response = StreamResponse(task=task.model_copy(update={"history": history or None}))
        payload = response.to_json()
        configuration = context.configuration
        config = configuration.task_push_notification_config if configuration else None
        if config is not None:
            config = bound_config(config, task.id)
        lease = None
        cluster = self.state.cluster
        if cluster is not None and execution.lease_token is not None:
            lease = (cluster.member, execution.lease_token)
        share.new = NewTask(context.caller.identifier, config, execution.protocol, lease)
        share.events.append(EventWrite(1, "task", payload, task))
        self.remember(share, execution, task_id=task.id)
        live.feed.record(1, task, response, payload, history)
        self.settling.append(execution)

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
            raise EventRefused("artifacts cannot be added to a task in a final state")
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
            raise EventRefused(f"{what} has {len(parts)} parts; the limit is {limit}")

    def _check_artifacts(self, task: Task, changed: str | None = None) -> None:
        """Refuse a task over the artifact limits (only ``changed`` is counted, if named)."""
        artifacts = task.artifacts or []
        limit = self.settings.limits.artifacts
        if len(artifacts) > limit:
            raise EventRefused(
                f"the task would hold {len(artifacts)} artifacts; the limit is {limit}"
            )
        for artifact in artifacts:
            if changed is None or artifact.artifact_id == changed:
                self._check_parts(artifact.parts, f"artifact {artifact.artifact_id!r}")

    def turn(self, live: LiveTask, execution: Execution, turn: TurnMessage, share: Share) -> None:
        """A continuation's message joins the history in the log; the task is as it was."""
        snapshot = live.feed.current
        assert snapshot is not None
        self.append(live, share, snapshot, "message", turn.payload, None, [turn.message])
        share.lease = turn.lease
        if not turn.awaited:  # its execution runs already: its events follow the message
            execution.start_seq = live.feed.current_seq
        self.remember(share, execution, task_id=live.task_id, seq=live.feed.current_seq)

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

    def ending(self, live: LiveTask, share: Share, state: TaskState, reason: str) -> None:
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

    def restated(self, live: LiveTask, share: Share) -> None:
        """The task's status again, unchanged: the turn a stored message began is over.

        Its message, if it has one, is the one the history shows already: an
        equal copy shows once (``HistoryWindow``).
        """
        snapshot = live.feed.current
        assert snapshot is not None
        event = TaskStatusUpdateEvent(
            task_id=snapshot.id, context_id=snapshot.context_id or "", status=snapshot.status
        )
        response = StreamResponse(status_update=event)
        self.append(live, share, snapshot, "status", response.to_json(), response, _said(event))

    def ending_if_open(self, live: LiveTask, share: Share, state: TaskState, reason: str) -> None:
        snapshot = live.feed.current
        if snapshot is None:
            execution = live.execution
            if execution is None or execution.answer is not None:
                return
            self._ensure_created(live, execution, share)
            snapshot = live.feed.current
            assert snapshot is not None
        if not snapshot.status.state.is_final:
            self.ending(live, share, state, reason)


def _context_update(context_id: str, snapshot: Task) -> dict[str, object]:
    """The update that gives an event its task's context id, when it lacks it."""
    wanted = snapshot.context_id or context_id
    return {} if wanted == context_id else {"context_id": wanted}


def _said(event: TaskStatusUpdateEvent) -> list[Message]:
    """What a status update adds to the history: its message, if it has one."""
    message = event.status.message
    return [message] if message is not None else []


def event_task_id(event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> str:
    """The id of the task an executor event names."""
    return event.id if isinstance(event, Task) else event.task_id


def bound_config(config: TaskPushNotificationConfig, task_id: str) -> TaskPushNotificationConfig:
    """The config as stored: bound to its task, with an id (the client's, or a new one)."""
    return config.model_copy(
        update={"task_id": task_id, "id": config.id or str(uuid.uuid4()), "tenant": None}
    )

"""Rounds of writes as the recorder builds them, for tests that fill a store directly."""

from __future__ import annotations

from collections.abc import Sequence

from a2a_trio.protocol import PROTOCOL_VERSION, TaskPushNotificationConfig
from a2a_trio.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)
from a2a_trio.store import EventWrite, NewTask, ReceiptWrite, Round, Share, ShareOutcome, Store

AGENT = "agent"
ALICE = "alice"


def row(task: Task) -> Task:
    """``task`` as its row holds it: without its history, which the log keeps."""
    return task.model_copy(update={"history": None})


def task_event(seq: int, task: Task) -> EventWrite:
    """The ``task`` event that creates ``task`` (sequence 1 in its log, usually).

    The event carries the opening history; the snapshot, as the recorder's, does not.
    """
    return EventWrite(seq, "task", StreamResponse(task=task).to_json(), row(task))


def status_event(seq: int, task: Task) -> EventWrite:
    """A status update to ``task``'s status, leaving ``task`` as the snapshot."""
    event = TaskStatusUpdateEvent(
        task_id=task.id, context_id=task.context_id or "", status=task.status
    )
    return EventWrite(seq, "status", StreamResponse(status_update=event).to_json(), row(task))


def artifact_event(seq: int, task: Task, text: str = "out") -> EventWrite:
    event = TaskArtifactUpdateEvent(
        task_id=task.id,
        context_id=task.context_id or "",
        artifact=Artifact(artifact_id="a-1", parts=[Part(text=text)]),
    )
    payload = StreamResponse(artifact_update=event).to_json()
    return EventWrite(seq, "artifact", payload, row(task))


def message_event(seq: int, task: Task) -> EventWrite:
    return EventWrite(seq, "message", note(task.id, seq).to_json(), row(task))


def note(task_id: str, seq: int) -> Message:
    """The agent message :func:`message_event` logs."""
    return Message(message_id=f"{task_id}-{seq}", role=Role.AGENT, parts=[Part(text="note")])


def creating(
    task: Task,
    *more: EventWrite,
    owner: str = ALICE,
    agent: str = AGENT,
    push_config: TaskPushNotificationConfig | None = None,
    push_protocol: str = PROTOCOL_VERSION,
    receipts: Sequence[ReceiptWrite] = (),
) -> Share:
    """The share that creates ``task``: its first event (seq 1), then ``more``."""
    return Share(
        agent,
        task.id,
        new=NewTask(owner, push_config, push_protocol),
        events=[task_event(1, task), *more],
        receipts=list(receipts),
    )


def following(task_id: str, *events: EventWrite, agent: str = AGENT) -> Share:
    """A share of events for a stored task."""
    return Share(agent, task_id, events=list(events))


async def record(store: Store, *shares: Share, push: bool = False) -> list[ShareOutcome]:
    """Store the shares as one round; their outcomes, in order."""
    return await store.record(Round(list(shares), push=push))


async def create(
    store: Store,
    task: Task,
    *,
    owner: str = ALICE,
    agent: str = AGENT,
    push_config: TaskPushNotificationConfig | None = None,
    push: bool = False,
) -> None:
    """Store ``task`` as new, as the recorder would; the share must succeed."""
    share = creating(task, owner=owner, agent=agent, push_config=push_config)
    [outcome] = await record(store, share, push=push)
    assert outcome.error is None, outcome.error

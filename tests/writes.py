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


def task_event(seq: int, task: Task) -> EventWrite:
    """The ``task`` event that creates ``task`` (sequence 1 in its log, usually)."""
    return EventWrite(seq, "task", StreamResponse(task=task).to_json(), task)


def status_event(seq: int, task: Task) -> EventWrite:
    """A status update to ``task``'s status, leaving ``task`` as the snapshot."""
    event = TaskStatusUpdateEvent(
        task_id=task.id, context_id=task.context_id or "", status=task.status
    )
    return EventWrite(seq, "status", StreamResponse(status_update=event).to_json(), task)


def artifact_event(seq: int, task: Task, text: str = "out") -> EventWrite:
    event = TaskArtifactUpdateEvent(
        task_id=task.id,
        context_id=task.context_id or "",
        artifact=Artifact(artifact_id="a-1", parts=[Part(text=text)]),
    )
    return EventWrite(seq, "artifact", StreamResponse(artifact_update=event).to_json(), task)


def message_event(seq: int, task: Task) -> EventWrite:
    note = Message(message_id=f"{task.id}-{seq}", role=Role.AGENT, parts=[Part(text="note")])
    return EventWrite(seq, "message", note.to_json(), task)


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

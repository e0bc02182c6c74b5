"""Rounds of writes as the recorder builds them, for tests that fill a store directly."""

from __future__ import annotations

from collections.abc import Iterable

from a2a_trio.protocol import (
    PROTOCOL_VERSION,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskStatusUpdateEvent,
)
from a2a_trio.store import (
    EventWrite,
    NewTask,
    ReceiptWrite,
    Round,
    Share,
    ShareOutcome,
    Store,
)


def task_event(task: Task, seq: int = 1) -> EventWrite:
    """The ``task`` event that creates ``task`` (sequence 1 in its log)."""
    return EventWrite(seq, "task", StreamResponse(task=task).to_json(), task)


def status_event(task: Task, seq: int) -> EventWrite:
    """A status update to ``task``'s status, leaving ``task`` as the snapshot."""
    event = TaskStatusUpdateEvent(
        task_id=task.id, context_id=task.context_id or "", status=task.status
    )
    return EventWrite(seq, "status", StreamResponse(status_update=event).to_json(), task)


def new_task(
    agent: str,
    owner: str,
    task: Task,
    *,
    push_config: TaskPushNotificationConfig | None = None,
    push_protocol: str = PROTOCOL_VERSION,
    receipts: Iterable[ReceiptWrite] = (),
) -> Share:
    """The share that creates ``task`` with its first event, as the recorder writes it."""
    return Share(
        agent,
        task.id,
        new=NewTask(owner, push_config, push_protocol),
        events=[task_event(task)],
        receipts=list(receipts),
    )


async def record(store: Store, *shares: Share, push: bool = False) -> list[ShareOutcome]:
    """Store the shares as one round; their outcomes, in order."""
    return await store.record(Round(list(shares), push=push))


async def record_ok(store: Store, *shares: Share, push: bool = False) -> list[ShareOutcome]:
    """Like :func:`record`, raising the first share's error, if any."""
    outcomes = await record(store, *shares, push=push)
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error
    return outcomes


async def create_task(store: Store, agent: str, owner: str, task: Task) -> None:
    """Store ``task`` as new, as the recorder would have stored it."""
    await record_ok(store, new_task(agent, owner, task))

"""How events change a task, and how a task is trimmed for a response. Pure."""

from __future__ import annotations

from .limits import Limits
from .models import (
    Artifact,
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)

__all__ = ["add_to_history", "apply_artifact", "apply_status", "kept_history", "view_task"]


def add_to_history(task: Task, message: Message, limits: Limits | None = None) -> Task:
    """The task with ``message`` appended to its history (kept within ``limits``).

    Clients may reuse a messageId for different messages, so only a message
    equal in every field to one already there is left out.
    """
    history = list(task.history or [])
    if message in history:
        return task
    history.append(message)
    if limits is not None:
        history = kept_history(history, limits)
    return task.model_copy(update={"history": history})


def kept_history(history: list[Message], limits: Limits) -> list[Message]:
    """The most recent messages of ``history`` within the limits' message and byte counts.

    The spec lets the agent decide which messages a task's history persists
    (3.7, "Messages and Artifacts"); the newest is always kept.
    """
    size = 0
    kept = 0
    for message in reversed(history):
        if kept == limits.history_messages:
            break
        size += len(message.to_json())
        if kept and size > limits.history_bytes:
            break
        kept += 1
    return history[len(history) - kept :]


def apply_status(task: Task, event: TaskStatusUpdateEvent, limits: Limits | None = None) -> Task:
    """The task after a status update; a status message joins the history too."""
    updated = task.model_copy(update={"status": event.status})
    if event.status.message is not None:
        updated = add_to_history(updated, event.status.message, limits)
    return updated


def apply_artifact(task: Task, event: TaskArtifactUpdateEvent) -> Task:
    """The task after an artifact update.

    ``append`` extends the parts of the artifact with the same id (creating it
    when it is new); otherwise the artifact replaces any with the same id.
    """
    artifacts = list(task.artifacts or [])
    incoming = event.artifact
    for index, existing in enumerate(artifacts):
        if existing.artifact_id != incoming.artifact_id:
            continue
        if event.append:
            artifacts[index] = _appended(existing, incoming)
        else:
            artifacts[index] = incoming
        break
    else:
        artifacts.append(incoming)
    return task.model_copy(update={"artifacts": artifacts})


def _appended(existing: Artifact, chunk: Artifact) -> Artifact:
    metadata = {**(existing.metadata or {}), **(chunk.metadata or {})} or None
    return existing.model_copy(
        update={
            "parts": [*existing.parts, *chunk.parts],
            "name": chunk.name or existing.name,
            "description": chunk.description or existing.description,
            "metadata": metadata,
        }
    )


def view_task(
    task: Task, *, history_length: int | None = None, include_artifacts: bool = True
) -> Task:
    """The task as a response shows it (spec 3.2.4 and 3.1.4).

    ``history_length`` unset keeps the whole history, 0 omits it, N keeps the
    N most recent messages. ``include_artifacts=False`` omits the field.
    """
    update: dict[str, object] = {}
    if history_length is not None:
        if history_length == 0 or not task.history:
            update["history"] = None
        else:
            update["history"] = task.history[-history_length:]
    if not include_artifacts:
        update["artifacts"] = None
    return task.model_copy(update=update) if update else task

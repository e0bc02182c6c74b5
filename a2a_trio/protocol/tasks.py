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

__all__ = ["HistoryWindow", "apply_artifact", "apply_status", "kept_history", "view_task"]


def kept_history(history: list[Message], limits: Limits) -> list[Message]:
    """The most recent messages of ``history`` within the limits' message and byte counts.

    The spec lets the agent decide which messages a task's history persists
    (3.7, "Messages and Artifacts"); the newest is always kept.
    """
    window = HistoryWindow(limits)
    for message in reversed(history):
        if not window.offer(message):
            break
    return window.messages()


class HistoryWindow:
    """A task's history as responses show it, gathered from its newest message back.

    The task's event log keeps every message; a response shows the most
    recent ones within ``[limits] history_messages`` and ``history_bytes``
    (the newest whatever its size), and at most ``length`` of them when a
    request names a ``historyLength``. A message equal in every field to an
    older one in the window is shown once, at the older place (clients may
    reuse a messageId for different messages, so only equal ones are folded).
    """

    def __init__(self, limits: Limits, length: int | None = None) -> None:
        self._most = (
            limits.history_messages if length is None else min(length, limits.history_messages)
        )
        self._bytes = limits.history_bytes
        self._size = 0
        #: The newest message, kept whatever its size: measured only once an
        #: older one asks whether it still fits (most windows hold one message).
        self._unmeasured: Message | None = None
        #: Newest first.
        self._kept: list[Message] = []
        self._by_id: dict[str, list[int]] = {}

    @property
    def full(self) -> bool:
        return len(self._kept) >= self._most

    def offer(self, message: Message, size: int | None = None) -> bool:
        """Take the next older message; False once the window is full (it was not taken).

        ``size`` is the length of the message's JSON, when the caller knows it.
        """
        if self.full:
            return False
        places = self._by_id.setdefault(message.message_id, [])
        for place in places:
            if self._kept[place] == message:
                # The same message again, older: it shows at this older place.
                del self._kept[place]
                self._kept.append(message)
                self._reindex()
                return True
        if not self._kept:
            if size is None:
                self._unmeasured = message
            else:
                self._size += size
        else:
            if self._unmeasured is not None:
                self._size += len(self._unmeasured.to_json())
                self._unmeasured = None
            if size is None:
                size = len(message.to_json())
            if self._size + size > self._bytes:
                self._most = len(self._kept)  # full: nothing older fits
                return False
            self._size += size
        places.append(len(self._kept))
        self._kept.append(message)
        return True

    def _reindex(self) -> None:
        self._by_id = {}
        for place, kept in enumerate(self._kept):
            self._by_id.setdefault(kept.message_id, []).append(place)

    def messages(self) -> list[Message]:
        """The window, oldest first."""
        return self._kept[::-1]


def apply_status(task: Task, event: TaskStatusUpdateEvent) -> Task:
    """The task after a status update (its message joins the history in the log)."""
    return task.model_copy(update={"status": event.status})


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

"""Feed events: what the console and ``a2a-trio watch`` see, as plain JSON-ready dicts.

Pure functions from what was committed (a share, a delivery attempt, an
execution's start or end) to events. Every event has ``kind``, ``agent``,
``task``, ``owner``, ``state`` and ``time``; the hub adds ``seq``. Nothing
here carries a credential: webhook events name their config, never its URL,
token or authentication.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..protocol import Part, Task
from ..store import Notification, Share
from ..store.browse import TimelineEntry

__all__ = [
    "KINDS",
    "FeedFilter",
    "attempt_events",
    "execution_event",
    "logged_events",
    "share_events",
    "text_of",
]

#: Every kind of feed event.
KINDS = (
    "task.created",
    "task.status",
    "task.artifact",
    "task.message",
    "webhook.attempt",
    "webhook.dead_letter",
    "execution.started",
    "execution.ended",
)

#: Message and artifact text is cut to this many characters in the feed.
TEXT_LIMIT = 500

Event = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def text_of(parts: Iterable[Mapping[str, Any]] | None) -> str:
    """The text parts joined (other parts as ``[data]``/``[file]``), cut to TEXT_LIMIT."""
    pieces: list[str] = []
    for part in parts or ():
        if "text" in part:
            pieces.append(str(part["text"]))
        elif "data" in part:
            pieces.append("[data]")
        else:
            pieces.append("[file]")
    text = " ".join(pieces)
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def _model_text(parts: Iterable[Part]) -> str:
    """text_of for parts as models (no wire rendering on the recorder's path)."""
    pieces = []
    for part in parts:
        if part.text is not None:
            pieces.append(part.text)
        else:
            pieces.append("[file]" if part.data is None else "[data]")
    text = " ".join(pieces)
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def _base(
    kind: str, agent: str, task: str, owner: str | None, state: str | None, at: str | None = None
) -> Event:
    return {
        "kind": kind,
        "agent": agent,
        "task": task,
        "owner": owner,
        "state": state,
        "time": at or now(),
    }


def _state(task: Task) -> str:
    return task.status.state.value


def share_events(agent: str, share: Share, owner: str | None) -> list[Event]:
    """One event per event the share stored, in log order."""
    events: list[Event] = []
    at = now()  # one commit, one time
    for write in share.events:
        state = _state(write.snapshot)
        if write.kind == "task":
            event = _base("task.created", agent, share.task_id, owner, state, at)
            # The opening history travels in the event, not in the task's row.
            history = json.loads(write.payload).get("task", {}).get("history") or []
            event["text"] = text_of(history[0].get("parts")) if history else ""
            event["context"] = write.snapshot.context_id
        elif write.kind == "status":
            event = _base("task.status", agent, share.task_id, owner, state, at)
            message = write.snapshot.status.message
            event["text"] = _model_text(message.parts) if message else ""
        elif write.kind == "artifact":
            event = _base("task.artifact", agent, share.task_id, owner, state, at)
            update = json.loads(write.payload).get("artifactUpdate", {})
            artifact = update.get("artifact", {})
            event["artifact"] = artifact.get("artifactId")
            event["name"] = artifact.get("name")
            event["text"] = text_of(artifact.get("parts"))
        else:
            event = _base("task.message", agent, share.task_id, owner, state, at)
            message = json.loads(write.payload)
            event["role"] = message.get("role")
            event["text"] = text_of(message.get("parts"))
        event["eventSeq"] = write.seq
        events.append(event)
    return events


def logged_events(
    agent: str, task_id: str, owner: str | None, entries: Iterable[TimelineEntry], state: str
) -> list[Event]:
    """The events :func:`share_events` made of these log rows, as another process recorded them.

    Each row's state is the one its own payload carries, or, for artifacts and
    messages, the last one before it in ``entries`` (else ``state``: the task's now).
    """
    events: list[Event] = []
    for entry in entries:
        body = json.loads(entry.payload)
        at = entry.at[:23] + "Z" if len(entry.at) > 23 else entry.at
        if entry.kind == "task":
            task = body.get("task", {})
            state = task.get("status", {}).get("state", state)
            event = _base("task.created", agent, task_id, owner, state, at)
            history = task.get("history") or [{}]
            event["text"] = text_of(history[0].get("parts"))
            event["context"] = task.get("contextId")
        elif entry.kind == "status":
            status = body.get("statusUpdate", {}).get("status", {})
            state = status.get("state", state)
            event = _base("task.status", agent, task_id, owner, state, at)
            event["text"] = text_of((status.get("message") or {}).get("parts"))
        elif entry.kind == "artifact":
            event = _base("task.artifact", agent, task_id, owner, state, at)
            artifact = body.get("artifactUpdate", {}).get("artifact", {})
            event["artifact"] = artifact.get("artifactId")
            event["name"] = artifact.get("name")
            event["text"] = text_of(artifact.get("parts"))
        else:
            event = _base("task.message", agent, task_id, owner, state, at)
            event["role"] = body.get("role")
            event["text"] = text_of(body.get("parts"))
        event["eventSeq"] = entry.seq
        events.append(event)
    return events


def attempt_events(
    notification: Notification,
    owner: str | None,
    outcome: str,
    status: int | None,
    error: str | None,
) -> list[Event]:
    """A stored delivery attempt; a ``failed`` one adds the dead letter it leaves."""
    lane = notification.lane
    attempt = _base("webhook.attempt", lane.agent, lane.task_id, owner, None)
    details = {
        "delivery": notification.id,
        "notification": notification.notification_id,
        "config": lane.config_id,
        "eventSeq": notification.seq,
        "attempt": notification.attempts + (0 if outcome == "abandoned" else 1),
        "outcome": outcome,
        "status": status,
        "error": error,
    }
    attempt.update(details)
    events = [attempt]
    if outcome in ("failed", "abandoned"):
        dead = _base("webhook.dead_letter", lane.agent, lane.task_id, owner, None)
        dead.update(details)
        events.append(dead)
    return events


def execution_event(
    kind: str, agent: str, task: str, owner: str, error: str | None = None
) -> Event:
    event = _base(kind, agent, task, owner, None)
    if kind == "execution.ended":
        event["error"] = error
    return event


@dataclass(frozen=True, slots=True)
class FeedFilter:
    """Which events a subscriber wants: each field empty means all.

    ``kinds`` holds kinds (``task.status``) or their families (``task``).
    """

    agents: frozenset[str] = frozenset()
    tasks: frozenset[str] = frozenset()
    states: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, args: Mapping[str, str]) -> FeedFilter:
        """From query arguments ``agent``, ``task``, ``state``, ``kind`` (comma lists).

        A state may be given short (``working``) or as on the wire
        (``TASK_STATE_WORKING``). Unknown kinds raise ValueError.
        """

        def values(name: str) -> frozenset[str]:
            raw = args.get(name) or ""
            return frozenset(value.strip() for value in raw.split(",") if value.strip())

        states = frozenset(
            state.upper()
            if state.upper().startswith("TASK_STATE_")
            else f"TASK_STATE_{state.upper()}"
            for state in values("state")
        )
        kinds = values("kind")
        families = {kind.split(".")[0] for kind in KINDS}
        unknown = sorted(kind for kind in kinds if kind not in KINDS and kind not in families)
        if unknown:
            raise ValueError(f"unknown event kind {', '.join(unknown)}; known: {', '.join(KINDS)}")
        return cls(values("agent"), values("task"), states, kinds)

    @property
    def everything(self) -> bool:
        """Whether this filter lets every event through."""
        return not (self.agents or self.tasks or self.states or self.kinds)

    def matches(self, event: Mapping[str, Any]) -> bool:
        if self.agents and event["agent"] not in self.agents:
            return False
        if self.tasks and event["task"] not in self.tasks:
            return False
        if self.states and event["state"] not in self.states:
            return False
        if self.kinds:
            kind = event["kind"]
            return kind in self.kinds or kind.split(".")[0] in self.kinds
        return True

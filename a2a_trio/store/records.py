"""What the stores hand back: tasks as stored, log rows, outbox rows, pages.

Plain data shared by every backend, with the few rules about stored text
that both must apply alike (how a snapshot is read back, how times sort,
what a page token holds) and the readers that turn their rows into records.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..protocol import (
    InvalidParamsError,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from ..protocol._base import iso_utc
from ..protocol.models import AuthenticationInfo
from .secrets import SecretBox

__all__ = [
    "READ_BACK_KINDS",
    "STREAMED_KINDS",
    "UNREADABLE_SNAPSHOT",
    "Attempt",
    "Delivery",
    "EventKind",
    "Lane",
    "LoggedEvent",
    "Notification",
    "Receipt",
    "StoredTask",
    "TaskPage",
    "decode_page_token",
    "encode_page_token",
    "order_key",
    "read_deliveries",
    "read_push_config",
    "read_snapshot",
    "read_task",
    "read_task_page",
]

log = logging.getLogger("a2a_trio.store")

#: ``task``, ``status`` and ``artifact`` rows hold a StreamResponse that
#: subscribers see; ``message`` rows hold a Message added to the history.
EventKind = Literal["task", "status", "artifact", "message"]
STREAMED_KINDS = ("task", "status", "artifact")
#: What a process reads back of a task another one moved: its streamed events
#: and the history's own rows (a continuation's message, an agent's answer).
READ_BACK_KINDS = (*STREAMED_KINDS, "message")


@dataclass(frozen=True, slots=True)
class StoredTask:
    """A task as stored: its snapshot, its owner and its log position."""

    agent: str
    owner: str
    task: Task
    last_seq: int

    @property
    def state(self) -> TaskState:
        return self.task.status.state


@dataclass(frozen=True, slots=True)
class Lane:
    """Notifications for one webhook config of one task: delivered strictly in order."""

    agent: str
    task_id: str
    config_id: str


@dataclass(frozen=True, slots=True)
class Notification:
    """One queued update for one webhook: the task's event as a StreamResponse."""

    lane: Lane
    id: int
    notification_id: str
    seq: int
    payload: str
    attempts: int
    next_attempt_at: float


@dataclass(frozen=True, slots=True)
class Attempt:
    number: int
    at: str
    status: int | None
    error: str | None
    duration_ms: float


@dataclass(frozen=True, slots=True)
class Delivery:
    """A notification's history: its state (pending, delivered, failed) and attempts."""

    id: int
    notification_id: str
    agent: str
    task_id: str
    config_id: str
    seq: int
    state: str
    attempts_made: int
    last_error: str | None
    created_at: str
    attempts: list[Attempt] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    seq: int
    kind: str
    payload: str


@dataclass(frozen=True, slots=True)
class Receipt:
    """What an earlier SendMessage with the same messageId and content started."""

    #: The task it created or continued, and for a continuation the log
    #: position of the message (0 for a new task); or the direct answer.
    task_id: str | None
    seq: int
    answer: str | None


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[Task]
    next_page_token: str
    total_size: int


#: The status message of a task whose stored snapshot could not be read.
UNREADABLE_SNAPSHOT = (
    "This task's stored record cannot be read; its history and artifacts are not shown."
)


def read_snapshot(task_id: str, context_id: str | None, state: str, text: str) -> Task:
    """The stored task; a stand-in, logged, for a snapshot that cannot be read.

    Everything written now can be read back (see protocol.limits), but a row
    written by an older version may not be. One such row must not break
    every ListTasks page that holds it, nor stop the start-up recovery: the
    stand-in keeps the id, the context and the state, and says why the rest
    is missing; the event log keeps the original events. The row holds no
    history (see :mod:`.history`).
    """
    try:
        task = Task.model_validate_json(text)
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        log.error("task %s: its stored snapshot cannot be read (%s)", task_id, error)
        return Task(
            id=task_id,
            context_id=context_id,
            status=TaskStatus(
                state=TaskState.parse(state),
                message=Message(
                    message_id=f"{task_id}-unreadable",
                    role=Role.AGENT,
                    parts=[Part(text=UNREADABLE_SNAPSHOT)],
                    task_id=task_id,
                    context_id=context_id,
                ),
            ),
        )
    if task.history is not None:
        # Written before the history left the row (and kept by the migration
        # when it could not rewrite it): readers read the log's window instead.
        task = task.model_copy(update={"history": None})
    return task


def order_key(moment: datetime) -> str:
    """A time as stored: fixed width and UTC, so text order is time order.

    Microseconds break ties that the millisecond wire format would leave.
    """
    return iso_utc(moment, "microseconds")


def encode_page_token(updated_at: str, task_id: str) -> str:
    """The ListTasks cursor after the task (its ``order_key`` and id)."""
    raw = json.dumps([updated_at, task_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_page_token(token: str) -> tuple[str, str]:
    """The (updated_at, task id) a token holds; InvalidParamsError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decoded = json.loads(raw)
        if not (
            isinstance(decoded, list)
            and len(decoded) == 2
            and all(isinstance(item, str) for item in decoded)
        ):
            raise ValueError
        updated_at, task_id = decoded
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParamsError(
            "pageToken: not a token this server issued", metadata={"field": "pageToken"}
        ) from None
    return updated_at, task_id


# --- rows into records ----------------------------------------------------------------
#
# Each backend selects the columns in the order a reader names; ``time`` turns
# a time column as the backend returns it into its order_key text (SQLite
# stores that text already; PostgreSQL returns a datetime).


def _as_stored(text: str) -> str:
    return text


def read_task(agent: str, task_id: str, row: Sequence[Any]) -> StoredTask:
    """The task of a row (owner, snapshot text, last_seq, context_id, state)."""
    owner, snapshot, last_seq, context_id, state = row
    return StoredTask(
        agent, owner, read_snapshot(task_id, context_id, state, snapshot), int(last_seq)
    )


def read_task_page(
    rows: Sequence[Sequence[Any]],
    page_size: int,
    total: int,
    time: Callable[[Any], str] = _as_stored,
) -> TaskPage:
    """A ListTasks page of rows (id, updated_at, snapshot text, context_id, state).

    The rows are fetched one past ``page_size``: a row past it means there is a
    next page, which starts after the page's last task.
    """
    next_token = ""
    if len(rows) > page_size:
        rows = rows[:page_size]
        next_token = encode_page_token(time(rows[-1][1]), rows[-1][0])
    tasks = [read_snapshot(row[0], row[3], row[4], row[2]) for row in rows]
    return TaskPage(tasks, next_token, total)


def read_push_config(row: Sequence[Any], box: SecretBox) -> TaskPushNotificationConfig:
    """A config of a row (task_id, id, owner, url, token, auth_scheme, auth_credentials).

    Its secrets are opened with ``box``. Checked when saved, it is read back
    as stored (an older version's row included).
    """
    task_id, config_id, _owner, url, token, scheme, credentials = row
    authentication = None
    if scheme:
        authentication = AuthenticationInfo.model_construct(
            scheme=scheme, credentials=box.open(credentials)
        )
    return TaskPushNotificationConfig.model_construct(
        id=config_id,
        task_id=task_id,
        url=url,
        token=box.open(token),
        authentication=authentication,
    )


def read_deliveries(
    rows: Iterable[Sequence[Any]],
    attempt_rows: Iterable[Sequence[Any]],
    time: Callable[[Any], str] = _as_stored,
) -> list[Delivery]:
    """Outbox rows with the attempts made for each, both in the order given.

    An outbox row is (id, notification_id, agent, task_id, config_id, seq,
    state, attempts, last_error, created_at); an attempt row is (outbox_id,
    attempt, at, status, error, duration_ms).
    """
    attempts: dict[int, list[Attempt]] = {}
    for outbox_id, number, at, status, error, duration in attempt_rows:
        attempts.setdefault(outbox_id, []).append(
            Attempt(number, time(at), status, error, duration)
        )
    return [
        Delivery(
            id=row[0],
            notification_id=row[1],
            agent=row[2],
            task_id=row[3],
            config_id=row[4],
            seq=row[5],
            state=row[6],
            attempts_made=row[7],
            last_error=row[8],
            created_at=time(row[9]),
            attempts=attempts.get(row[0], []),
        )
        for row in rows
    ]

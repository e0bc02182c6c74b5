"""What the operator console reads: every owner's tasks, a task's whole log, the outbox.

Shared by both backends: the records, the queries (with the backend's
parameter mark) and the page tokens. Every read is paged or aggregated, so
the console stays quick with a hundred thousand tasks in the store.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..protocol import InvalidParamsError, TaskState
from . import queries

__all__ = ["OutboxSummary", "SummaryPage", "TaskSummary", "TimelineEntry"]

Query = tuple[str, list[Any]]


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """A task as the console lists it: no snapshot, only what a row of the list shows."""

    agent: str
    id: str
    owner: str
    context_id: str | None
    state: str
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class SummaryPage:
    tasks: list[TaskSummary]
    #: Empty on the last page.
    next_page_token: str


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One logged event of a task (every kind, history-only messages included)."""

    seq: int
    kind: str
    payload: str
    at: str


@dataclass(frozen=True, slots=True)
class OutboxSummary:
    pending: int
    failed: int
    #: When the oldest pending notification was queued (None: none is pending).
    oldest_pending: datetime | None


def encode_token(*values: str) -> str:
    raw = json.dumps(list(values), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_token(token: str, size: int) -> list[str]:
    """The values a token holds; InvalidParamsError for anything this server did not issue."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if not (
            isinstance(decoded, list)
            and len(decoded) == size
            and all(isinstance(item, str) for item in decoded)
        ):
            raise ValueError
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParamsError("pageToken: not a token this server issued") from None
    return decoded


def browse_query(
    mark: str,
    agent: str | None,
    state: TaskState | None,
    cursor: tuple[Any, str, str] | None,
    page_size: int,
) -> Query:
    """Every owner's tasks, most recently updated first, one past ``page_size``."""
    extra = []
    args: list[Any] = []
    if state is not None and state is not TaskState.UNSPECIFIED:
        extra.append(f"state = {mark}")
        args.append(state.value)
    if cursor is not None:
        extra.append(f"(updated_at, agent, id) < ({mark}, {mark}, {mark})")
        args.extend(cursor)
    clause, more = queries.where(mark, *extra, agent=agent)
    query = (
        "SELECT agent, id, owner, context_id, state, created_at, updated_at FROM tasks"
        f"{clause} ORDER BY updated_at DESC, agent DESC, id DESC LIMIT {mark}"
    )
    return query, [*args, *more, page_size + 1]


def read_summary_page(
    rows: Sequence[Sequence[Any]], page_size: int, time: Callable[[Any], str]
) -> SummaryPage:
    next_token = ""
    if len(rows) > page_size:
        rows = rows[:page_size]
        last = rows[-1]
        next_token = encode_token(time(last[6]), last[0], last[1])
    tasks = [
        TaskSummary(row[0], row[1], row[2], row[3], row[4], time(row[5]), time(row[6]))
        for row in rows
    ]
    return SummaryPage(tasks, next_token)


def merge_pages(pages: Sequence[SummaryPage], page_size: int) -> SummaryPage:
    """One page of several stores' pages, each read with the same token and size.

    Most recently updated first, as each store orders its own; the token of
    the last task kept continues every store where this page stopped.
    """
    merged = sorted(
        (task for page in pages for task in page.tasks),
        key=lambda task: (task.updated_at, task.agent, task.id),
        reverse=True,
    )
    more = len(merged) > page_size or any(page.next_page_token for page in pages)
    kept = merged[:page_size]
    last = kept[-1] if kept else None
    token = encode_token(last.updated_at, last.agent, last.id) if more and last else ""
    return SummaryPage(kept, token)


def timeline_query(mark: str, agent: str, task_id: str, after: int, limit: int) -> Query:
    return (
        "SELECT seq, kind, payload, created_at FROM task_events"
        f" WHERE agent = {mark} AND task_id = {mark} AND seq > {mark} ORDER BY seq LIMIT {mark}",
        [agent, task_id, after, limit],
    )


TASK_COUNTS = "SELECT agent, state, count(*) FROM tasks GROUP BY agent, state"


def read_task_counts(rows: Sequence[Sequence[Any]]) -> dict[tuple[str, TaskState], int]:
    return {(row[0], TaskState.parse(row[1])): int(row[2]) for row in rows}


OUTBOX_SUMMARY = (
    "SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'failed'),"
    " min(created_at) FILTER (WHERE state = 'pending') FROM push_outbox"
)


def delivery_page_query(
    mark: str,
    agent: str | None,
    task_id: str | None,
    state: str | None,
    before: int | None,
    limit: int,
) -> Query:
    """Outbox rows, newest first (by id), before the id ``before`` if given."""
    extra: list[str] = []
    args: list[Any] = []
    if state is not None:
        extra.append(f"state = {mark}")
        args.append(state)
    if before is not None:
        extra.append(f"id < {mark}")
        args.append(before)
    clause, more = queries.where(mark, *extra, agent=agent, task_id=task_id)
    return (
        "SELECT id, notification_id, agent, task_id, config_id, seq, state, attempts,"
        f" last_error, created_at FROM push_outbox{clause} ORDER BY id DESC LIMIT {mark}"
    ), [*args, *more, limit]

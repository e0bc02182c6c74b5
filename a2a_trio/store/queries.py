"""The SQL that both backends build alike, with their placeholder as a parameter.

``mark`` is a backend's parameter placeholder: ``?`` on SQLite, ``%s`` on
PostgreSQL. What else differs (row values, arrays, casts, how a time is
sent) stays with the backend. The columns come in the order in which the
:mod:`.records` reader of their rows takes them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..protocol import TaskState

__all__ = [
    "FINAL_STATES",
    "PAUSED_STATES",
    "PUSH_CONFIG_COLUMNS",
    "UNFINISHED_STATES",
    "attempts",
    "continued",
    "deliveries",
    "pending_lanes",
    "push_configs",
    "task_filters",
    "where",
]

#: A push config's columns, as :func:`.records.read_push_config` takes them.
PUSH_CONFIG_COLUMNS = "task_id, id, owner, url, token, auth_scheme, auth_credentials"

#: The states of the tasks left with work under way (``unfinished_tasks``),
#: and of the finished ones (those ``prune`` may delete), as stored.
UNFINISHED_STATES = [TaskState.SUBMITTED.value, TaskState.WORKING.value]
FINAL_STATES = [state.value for state in TaskState if state.is_final]
#: The states of the tasks paused for their client (INPUT_REQUIRED, AUTH_REQUIRED).
PAUSED_STATES = [state.value for state in TaskState if state.is_interrupted]

Query = tuple[str, list[object]]


def where(mark: str, *conditions: str, **equal: object) -> Query:
    """A ``WHERE`` clause and its parameters; ``""`` when there is nothing to match.

    The ``conditions`` come first, as written (the caller puts their
    parameters, if any, before the ones returned); then ``column = mark`` for
    every keyword whose value is not None, the value its parameter.
    """
    clauses = list(conditions)
    args: list[object] = []
    for column, value in equal.items():
        if value is not None:
            clauses.append(f"{column} = {mark}")
            args.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def continued(role: str) -> str:
    """The condition that the paused task ``t`` had its follow-up's execution under way.

    Its log holds a user's message after its last status (or task) event: the
    follow-up is written when its execution starts, before the executor
    runs, so the execution had started and recorded no status since. Left
    so by a crash, the task is unfinished work, not a pause. ``role`` is the
    backend's expression of the role in the payload of the message event
    ``e``.
    """
    return (
        "EXISTS (SELECT 1 FROM task_events e WHERE e.agent = t.agent AND e.task_id = t.id"
        f" AND e.kind = 'message' AND {role} = 'ROLE_USER' AND e.seq > COALESCE("
        "(SELECT max(s.seq) FROM task_events s WHERE s.agent = t.agent AND s.task_id = t.id"
        " AND s.kind IN ('task', 'status')), 0))"
    )


def task_filters(
    mark: str,
    time: Callable[[datetime], object],
    agent: str,
    owner: str,
    *,
    context_id: str | None,
    state: TaskState | None,
    updated_after: datetime | None,
) -> Query:
    """The conditions of ListTasks (without ``WHERE``) and their parameters.

    ``time`` turns a time into the parameter the backend compares with its
    ``updated_at`` column.
    """
    conditions = [f"agent = {mark}", f"owner = {mark}"]
    args: list[object] = [agent, owner]
    if context_id:
        conditions.append(f"context_id = {mark}")
        args.append(context_id)
    if state is not None and state is not TaskState.UNSPECIFIED:
        conditions.append(f"state = {mark}")
        args.append(state.value)
    if updated_after is not None:
        conditions.append(f"updated_at >= {mark}")
        args.append(time(updated_after))
    return " AND ".join(conditions), args


def push_configs(mark: str, agent: str, task_id: str, owner: str | None) -> Query:
    """The task's configs, oldest first: the owner's, or every owner's when None."""
    clause, args = where(mark, agent=agent, task_id=task_id, owner=owner)
    return f"SELECT {PUSH_CONFIG_COLUMNS} FROM push_configs{clause} ORDER BY created_at, id", args


def pending_lanes(mark: str, agent: str | None, task_id: str | None) -> Query:
    """The lanes with notifications pending (unordered), of the agent and task if given."""
    clause, args = where(mark, "state = 'pending'", agent=agent, task_id=task_id)
    return f"SELECT DISTINCT agent, task_id, config_id FROM push_outbox{clause}", args


def deliveries(mark: str, agent: str | None, task_id: str | None) -> Query:
    """The outbox, oldest first, of the agent and task if given."""
    clause, args = where(mark, agent=agent, task_id=task_id)
    return (
        "SELECT id, notification_id, agent, task_id, config_id, seq, state, attempts,"
        f" last_error, created_at FROM push_outbox{clause} ORDER BY id"
    ), args


def attempts(outbox_ids: str) -> str:
    """The attempts of the outbox rows whose id is ``outbox_ids`` (the backend's test)."""
    return (
        "SELECT outbox_id, attempt, at, status, error, duration_ms FROM push_attempts"
        f" WHERE outbox_id {outbox_ids} ORDER BY outbox_id, attempt"
    )

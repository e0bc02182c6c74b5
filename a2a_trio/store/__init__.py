"""Durable state: SQLite tables for tasks, the event log and push configs."""

from __future__ import annotations

from .lock import DatabaseInUseError
from .secrets import SecretBox, SecretKeyError
from .tasks import (
    Attempt,
    Delivery,
    Lane,
    LoggedEvent,
    Notification,
    StoredTask,
    TaskPage,
    TaskStore,
    Written,
)

__all__ = [
    "Attempt",
    "DatabaseInUseError",
    "Delivery",
    "Lane",
    "LoggedEvent",
    "Notification",
    "SecretBox",
    "SecretKeyError",
    "StoredTask",
    "TaskPage",
    "TaskStore",
    "Written",
]

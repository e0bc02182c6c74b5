"""Durable state: SQLite tables for tasks, the event log and push configs."""

from __future__ import annotations

from .checkpoints import checkpoint_periodically
from .lock import DatabaseInUseError
from .secrets import SecretBox, SecretKeyError
from .tasks import (
    Attempt,
    Delivery,
    Lane,
    LoggedEvent,
    Notification,
    Receipt,
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
    "Receipt",
    "SecretBox",
    "SecretKeyError",
    "StoredTask",
    "TaskPage",
    "TaskStore",
    "Written",
    "checkpoint_periodically",
]

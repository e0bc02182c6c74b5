"""Durable state: SQLite tables for tasks, the event log and push configs."""

from __future__ import annotations

from .secrets import SecretBox, SecretKeyError
from .tasks import LoggedEvent, StoredTask, TaskPage, TaskStore

__all__ = ["LoggedEvent", "SecretBox", "SecretKeyError", "StoredTask", "TaskPage", "TaskStore"]

"""Durable state: tasks, the event log, push configs and the outbox.

One interface (:class:`Store`) with two backends: SQLite, the embedded
default (:class:`SqliteStore`), and PostgreSQL (:mod:`.postgres`).
"""

from __future__ import annotations

from .base import Store
from .checkpoints import checkpoint_periodically
from .lock import DatabaseInUseError
from .outage import StoreUnreachable
from .records import (
    Attempt,
    Delivery,
    EventKind,
    Lane,
    LoggedEvent,
    Notification,
    Receipt,
    StoredTask,
    TaskPage,
)
from .rounds import EventWrite, NewTask, ReceiptWrite, Round, Share, ShareOutcome, StaleTask
from .secrets import SecretBox, SecretKeyError
from .sqlite import SqliteStore

__all__ = [
    "Attempt",
    "DatabaseInUseError",
    "Delivery",
    "EventKind",
    "EventWrite",
    "Lane",
    "LoggedEvent",
    "NewTask",
    "Notification",
    "Receipt",
    "ReceiptWrite",
    "Round",
    "SecretBox",
    "SecretKeyError",
    "Share",
    "ShareOutcome",
    "SqliteStore",
    "StaleTask",
    "Store",
    "StoreUnreachable",
    "StoredTask",
    "TaskPage",
    "checkpoint_periodically",
]

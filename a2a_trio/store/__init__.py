"""Durable state: tasks, the event log, push configs and the outbox.

One interface (:class:`Store`, the union of a protocol per room: :class:`TaskLog`,
:class:`Receipts`, :class:`PushConfigs`, :class:`Outbox`, :class:`Browse`,
:class:`Pruning`, :class:`Lifetime`) with two backends: SQLite, the embedded
default (:class:`SqliteStore`, :mod:`.sqlite`), and PostgreSQL (:mod:`.postgres`).
"""

from __future__ import annotations

from .base import Browse, Lifetime, Outbox, Pruning, PushConfigs, Receipts, Store, TaskLog
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
from .rounds import (
    EventWrite,
    LeaseHeld,
    NewTask,
    ReceiptWrite,
    Round,
    Share,
    ShareOutcome,
    StaleTask,
)
from .secrets import SecretBox, SecretKeyError
from .sqlite import DatabaseUnopenable, SqliteStore

__all__ = [
    "Attempt",
    "Browse",
    "DatabaseInUseError",
    "DatabaseUnopenable",
    "Delivery",
    "EventKind",
    "EventWrite",
    "Lane",
    "LeaseHeld",
    "Lifetime",
    "LoggedEvent",
    "NewTask",
    "Notification",
    "Outbox",
    "Pruning",
    "PushConfigs",
    "Receipt",
    "ReceiptWrite",
    "Receipts",
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
    "TaskLog",
    "TaskPage",
    "checkpoint_periodically",
]

"""How one agent host is timed and sized."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..protocol.limits import Limits

__all__ = ["HostSettings"]


@dataclass(frozen=True, slots=True)
class HostSettings:
    """Timing and sizing of one host."""

    #: How long CancelTask lets the executor's ``cancel`` hook run; once the
    #: task is CANCELED the execution's cancel scope is cancelled at once.
    cancel_grace: float = 5.0
    #: How long shutdown lets running executions finish before cancelling them.
    shutdown_grace: float = 10.0
    #: Events the host's executors, all together, may enqueue ahead of its
    #: recorder; also the most events the recorder commits in one transaction.
    queue_size: int = 256
    #: Recent events kept in memory per live task for readers that lag.
    feed_window: int = 256
    #: ListTasks page size when the request names none.
    default_page_size: int = 50
    #: Messages of history each ListTasks task shows when the request names
    #: no historyLength (None: all of it).
    list_history_length: int | None = 0
    #: What one request may carry, and how many artifacts a task may hold.
    limits: Limits = field(default_factory=Limits)
    #: Seconds during which a retried SendMessage (same caller, messageId and
    #: content as one whose answer did not reach its client) gets the original
    #: task or answer instead of starting new work (spec 3.3.1); 0 turns it off.
    retry_window: float = 600.0

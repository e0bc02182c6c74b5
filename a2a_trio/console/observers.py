"""The console's observers of the store: one fan-out to many, and the rates it shows.

The recorder and the push worker tell one observer (:class:`Fanout`) what they
committed; it tells the feed hub, the metrics and the rates, and keeps a
failing one from reaching the recorder's loop.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Literal

from ..store import Notification, Share
from ..store.observer import Observer

__all__ = ["EventRate", "Fanout", "Rate"]

log = logging.getLogger("a2a_trio.console")


class Fanout(Observer):
    """Tells every observer, and keeps a failing one from reaching the recorder's loop."""

    def __init__(self, *observers: Observer) -> None:
        self._observers = list(observers)

    def add(self, observer: Observer) -> None:
        """Tell ``observer`` too, from now on."""
        self._observers.append(observer)

    def _each(self, method: str, *args: Any) -> None:
        for observer in self._observers:
            try:
                getattr(observer, method)(*args)
            except Exception:
                log.exception("console: %s.%s failed", type(observer).__name__, method)

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        """Tell every observer of a committed round of events."""
        self._each("committed", agent, share, owner, seconds)

    def attempted(
        self,
        notification: Notification,
        outcome: Literal["delivered", "retry", "failed", "abandoned"],
        status: int | None,
        error: str | None,
    ) -> None:
        """Tell every observer of a webhook attempt."""
        self._each("attempted", notification, outcome, status, error)

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        """Tell every observer of an execution that started."""
        self._each("execution_started", agent, task_id, owner)

    def execution_ended(self, agent: str, task_id: str, owner: str, error: str | None) -> None:
        """Tell every observer of an execution that ended."""
        self._each("execution_ended", agent, task_id, owner, error)


class EventRate(Observer):
    """Counts the task events this process commits (not those read back from others)."""

    def __init__(self, rate: Rate) -> None:
        self._rate = rate

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        """Count the round's events."""
        self._rate.add(len(share.events))


class Rate:
    """Events per second over the last few seconds."""

    def __init__(self, window: int = 5) -> None:
        self._window = window
        self._buckets: deque[list[int]] = deque()

    def add(self, count: int = 1) -> None:
        """Count ``count`` events now."""
        second = int(time.monotonic())
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += count
        else:
            self._buckets.append([second, count])
            while len(self._buckets) > self._window + 1:
                self._buckets.popleft()

    def per_second(self) -> float:
        """The mean rate over the last ``window`` whole seconds."""
        now = int(time.monotonic())
        total = sum(count for second, count in self._buckets if now - self._window <= second < now)
        return total / self._window

"""The console's observers of the store: one fan-out to many, and the rates it shows.

The recorder and the push worker tell one observer (:class:`Fanout`) what they
committed; it tells the feed hub, the metrics and the rates, and keeps a
failing one from reaching the recorder's loop.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Literal

from ..store import Notification, Share
from ..store.observer import Observer

__all__ = ["EventRate", "Fanout", "Rate"]

log = logging.getLogger("a2a_trio.console")

#: The hooks of :class:`~a2a_trio.store.observer.Observer` a fan-out passes on.
_HOOKS = ("committed", "attempted", "execution_started", "execution_ended")


class Fanout(Observer):
    """Tells every observer, and keeps a failing one from reaching the recorder's loop."""

    def __init__(self, *observers: Observer) -> None:
        #: Each hook's methods to call: an observer's own, not the base's that do
        #: nothing (several are told of each request, and most hear only some hooks).
        self._hooks: dict[str, list[Callable[..., None]]] = {hook: [] for hook in _HOOKS}
        for observer in observers:
            self.add(observer)

    def add(self, observer: Observer) -> None:
        """Tell ``observer`` too, from now on."""
        for hook, methods in self._hooks.items():
            if getattr(type(observer), hook) is not getattr(Observer, hook):
                methods.append(getattr(observer, hook))

    def _each(self, hook: str, *args: Any) -> None:
        for method in self._hooks[hook]:
            try:
                method(*args)
            except Exception:
                log.exception("console: %s failed", method.__qualname__)

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

"""Fairness between webhook hosts: a share of the attempts each, and a circuit breaker.

One host that hangs must not hold every delivery slot. Each host (scheme,
name and port of the webhook URL) may have at most ``per_host`` attempts in
flight; the rest of ``push.concurrency`` stays free for the others. A host
that leaves ``threshold`` attempts in a row without an HTTP answer (a
timeout, a refused or broken connection) is *open* for ``cooldown``
seconds: its lanes wait without spending attempts, then a few attempts go
through again. Any HTTP answer, even an error status, closes it. Opening and
closing are logged once each, never per attempt.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

__all__ = ["Host", "HostGate", "HostState"]

log = logging.getLogger("a2a_trio.push")

#: A webhook host: the scheme, name and port of its URL.
Host = tuple[str, str, int]


@dataclass(slots=True)
class HostState:
    """What the gate knows of one webhook host."""

    limiter: trio.CapacityLimiter
    #: Attempts in a row that got no HTTP answer.
    failures: int = 0
    #: While trio's clock is before this, the host's attempts wait (the circuit is open).
    open_until: float = -math.inf
    #: Woken when the circuit closes before its cool-down ends.
    closed: trio.Event = field(default_factory=trio.Event)


class HostGate:
    """Admits delivery attempts host by host: a limiter and a circuit breaker each."""

    def __init__(
        self,
        *,
        per_host: int,
        threshold: int,
        cooldown: float,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.per_host = per_host
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._hosts: dict[Host, HostState] = {}

    def _state(self, host: Host) -> HostState:
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = HostState(trio.CapacityLimiter(self.per_host))
        return state

    def open_hosts(self) -> dict[str, float]:
        """Hosts whose circuit is open now (``scheme://name:port``), with seconds left."""
        now = self._clock()
        return {
            f"{scheme}://{name}:{port}": state.open_until - now
            for (scheme, name, port), state in self._hosts.items()
            if state.open_until > now
        }

    def is_open(self, host: Host) -> bool:
        """Whether ``host``'s attempts wait now (its circuit is open)."""
        state = self._hosts.get(host)
        return state is not None and state.open_until > self._clock()

    @asynccontextmanager
    async def turn(self, host: Host) -> AsyncIterator[None]:
        """Wait until ``host`` may take one more attempt, and hold its slot meanwhile."""
        state = self._state(host)
        while True:
            await self._closed(state)
            await state.limiter.acquire()
            if state.open_until <= self._clock():
                break
            # The circuit opened while this attempt waited for its slot.
            state.limiter.release()
        try:
            yield
        finally:
            state.limiter.release()
            if not state.limiter.borrowed_tokens and state.open_until <= self._clock():
                self._forget_idle(host, state)

    async def _closed(self, state: HostState) -> None:
        while (left := state.open_until - self._clock()) > 0:
            with trio.move_on_after(left):
                await state.closed.wait()

    def answered(self, host: Host) -> None:
        """An attempt got an HTTP answer: the host is alive; its circuit closes."""
        state = self._hosts.get(host)
        if state is None:
            return
        if state.open_until > -math.inf:
            log.info("webhook host %s answers again: its circuit is closed", _name(host))
            state.open_until = -math.inf
            state.closed.set()
            state.closed = trio.Event()
        state.failures = 0

    def unanswered(self, host: Host) -> None:
        """An attempt got no answer: after ``threshold`` in a row, the circuit opens."""
        state = self._state(host)
        state.failures += 1
        if state.failures < self.threshold or state.open_until > self._clock():
            return
        if state.open_until == -math.inf:
            log.warning(
                "webhook host %s left %d attempts in a row unanswered: its deliveries wait"
                " %g s (circuit open)",
                _name(host),
                state.failures,
                self.cooldown,
            )
        state.open_until = self._clock() + self.cooldown

    def _forget_idle(self, host: Host, state: HostState) -> None:
        """Drop a healthy host nobody waits for, so the table stays as small as the traffic."""
        if state.failures == 0 and state.limiter.statistics().tasks_waiting == 0:
            self._hosts.pop(host, None)


def _name(host: Host) -> str:
    scheme, name, port = host
    return f"{scheme}://{name}:{port}"

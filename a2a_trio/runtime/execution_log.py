"""One INFO line when an execution starts and one when it ends (a queue worker's log).

An :class:`~a2a_trio.store.observer.Observer`: the executions tell it of
each start and end, the recorder of each committed share, from which it
keeps the state the task reached. The end line says the task, the agent,
how long it ran and how it came out (the state, or the host's error).
"""

from __future__ import annotations

import logging
import time

from ..store import Share
from ..store.observer import Observer

__all__ = ["ExecutionLog"]

log = logging.getLogger("a2a_trio.worker")


class ExecutionLog(Observer):
    """Logs every execution's start and end; see the module docstring."""

    def __init__(self) -> None:
        #: Running executions: when each began, and the state its task reached so far.
        self._running: dict[tuple[str, str], tuple[float, str]] = {}

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        self._running[(agent, task_id)] = (time.monotonic(), "")
        log.info("execution started: task %s of agent %s", task_id, agent)

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        key = (agent, share.task_id)
        snapshot = share.snapshot
        if snapshot is not None and key in self._running:
            began, _ = self._running[key]
            self._running[key] = (began, snapshot.status.state.value.removeprefix("TASK_STATE_"))

    def execution_ended(self, agent: str, task_id: str, owner: str, error: str | None) -> None:
        began, state = self._running.pop((agent, task_id), (time.monotonic(), ""))
        outcome = f"error: {error}" if error else (state or "no event")
        log.info(
            "execution ended: task %s of agent %s after %.3f s: %s",
            task_id,
            agent,
            time.monotonic() - began,
            outcome,
        )

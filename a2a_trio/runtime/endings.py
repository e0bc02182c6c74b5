"""Endings the store could not take yet: a task's FAILED or CANCELED, retried until stored.

When an execution fails because the store does (a database restart, a full
disk), its task must still end: FAILED, or CANCELED if its client asked.
An ending that cannot be stored now waits here and is tried again with a
growing pause; a cancel asked meanwhile turns a waiting FAILED into
CANCELED, so the client's request is what the task ends with.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from ..protocol import StorageFullError, TaskState

if TYPE_CHECKING:
    from .state import HostState, LiveTask

__all__ = [
    "CANCELED_BY_CLIENT",
    "STORE_FAILED",
    "Ending",
    "PendingEndings",
    "ending_of",
    "until_stored",
]

log = logging.getLogger("a2a_trio.runtime")

#: The status message of a task ended by a host failure (its events could not be stored).
STORE_FAILED = "The server failed while running this task."
#: The status message of a task its client canceled.
CANCELED_BY_CLIENT = "Canceled by the client."

#: How a task ends: its state and the reason its status message gives.
Ending = tuple[TaskState, str]


def ending_of(*, cancel_requested: bool) -> Ending:
    """How a task ends when its execution failed: CANCELED if its client asked, else FAILED."""
    if cancel_requested:
        return TaskState.CANCELED, CANCELED_BY_CLIENT
    return TaskState.FAILED, STORE_FAILED


async def until_stored(
    state: HostState,
    attempt: Callable[[], Awaitable[bool]],
    failed: Callable[[Exception], None],
) -> None:
    """Call ``attempt`` until it says it is settled: pauses of 0.25 s growing to 10 s.

    One last try when the host stops, then no more. What ``attempt`` raises
    is told to ``failed``, but for a full disk (the store logs that once).
    """
    pause = 0.25
    while True:
        stopping = state.stopping.is_set()
        with trio.move_on_after(pause):
            await state.stopping.wait()
        try:
            if await attempt():
                return
        except Exception as error:
            if not isinstance(error, StorageFullError):  # that one is logged once
                failed(error)
        if stopping:
            return
        pause = min(pause * 2, 10.0)


class PendingEndings:
    """The endings waiting for the store, one retrying task each, in the host's nursery."""

    def __init__(
        self,
        state: HostState,
        *,
        end_now: Callable[[LiveTask, TaskState, str], Awaitable[None]],
        end: Callable[[str, Ending], Awaitable[object]],
        release: Callable[[str | None], None],
    ) -> None:
        self.name = state.name
        #: Where the retries run (the host nursery), and when it stops.
        self._state = state
        #: Ends the live task unless it is final (creating it first, if need be).
        self._end_now = end_now
        #: Ends the stored task if it is still open (raises what the store raised).
        self._end = end
        #: Lets go of a task lease held meanwhile (several processes).
        self._release = release
        self._endings: dict[str, Ending] = {}

    @property
    def waiting(self) -> int:
        """How many tasks wait here for their ending to be stored."""
        return len(self._endings)

    async def end_now(self, live: LiveTask, ending: Ending, lease: str | None) -> bool:
        """End the task now if the store takes it; else later (holding ``lease``): whether now."""
        try:
            await self._end_now(live, *ending)
        except Exception as error:
            if not isinstance(error, StorageFullError):  # that one is logged once
                log.exception("could not record the ending of task %s", live.task_id)
            self.add(live.task_id, ending, lease)
            return False
        return True

    def add(self, task_id: str, ending: Ending, lease: str | None = None) -> None:
        """End the task once the store takes it; CANCELED wins over a waiting FAILED.

        ``lease`` is held until then, so no other process takes the task over.
        """
        if task_id in self._endings:
            if ending[0] is TaskState.CANCELED:
                self._endings[task_id] = ending
            self._release(lease)
            return
        self._endings[task_id] = ending
        self._state.finishing().start_soon(self._retry, task_id, lease)

    async def _retry(self, task_id: str, lease: str | None) -> None:
        """Try again with a growing pause until stored, or until the host shuts down.

        One last try then: a database restart or a full disk must not leave
        the task WORKING with nothing running it. What is still open after
        that, the next start's recovery ends.
        """

        async def attempt() -> bool:
            await self._end(task_id, self._endings[task_id])
            return True

        def failed(error: Exception) -> None:
            log.warning("agent %s: task %s still cannot be ended: %s", self.name, task_id, error)

        try:
            await until_stored(self._state, attempt, failed)
        finally:
            del self._endings[task_id]
            self._release(lease)

"""Tried again with a growing pause: work a client waits for, that only this process does.

A queued execution's end that its worker writes, the outcome and the task
that its web process reads, the task a web process reads back after a
wake-up: when the database refuses one, nothing else would do it. So it is
tried at once, then again after a short pause, then after longer ones, for
as long as someone needs it.

(An ending the store could not take, by contrast, waits before each try and
stops with the host: see :func:`a2a_trio.runtime.endings.until_stored`.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

__all__ = ["FIRST_PAUSE", "LONGEST_PAUSE", "retrying"]

T = TypeVar("T")

#: The pause after the first refusal, in seconds; each next one is twice as long.
FIRST_PAUSE = 0.1
#: The longest pause between two tries, in seconds.
LONGEST_PAUSE = 5.0


async def retrying(
    attempt: Callable[[bool], Awaitable[T]],
    refused: Callable[[Exception, float], None],
    *,
    shield: bool = False,
    wanted: Callable[[], bool] | None = None,
) -> T | None:
    """What ``attempt`` returns, tried at once, then again after each refusal.

    ``attempt`` is told whether it is the first try. Each exception it
    raises is told to ``refused`` with the pause before the next try:
    0.1 s, then twice as long each time up to 5 s. ``refused`` logs it, or
    gives up by raising (the exception, say), which ends the tries.
    ``shield`` shields each try, not the pauses. None when, after a pause,
    ``wanted`` says the result is needed no more.
    """
    first, pause = True, FIRST_PAUSE
    while True:
        try:
            with trio.CancelScope(shield=shield):
                return await attempt(first)
        except Exception as error:
            refused(error, pause)
        first = False
        await trio.sleep(pause)
        pause = min(pause * 2, LONGEST_PAUSE)
        if wanted is not None and not wanted():
            return None

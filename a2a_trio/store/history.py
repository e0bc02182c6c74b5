"""A task's history, read from its event log: the window a response shows.

Messages live once, in the log: the user's (the task's first event, then a
``message`` row per continuation), the agent's (``message`` rows) and every
status message (``status`` rows). The task's row holds no history, so a turn
of a long conversation writes as little as the first turn did; a reader that
shows the history gathers it here, from the newest row back, and stops once
the window (:class:`~a2a_trio.protocol.tasks.HistoryWindow`) is full. Both
backends read through :func:`read_history`; each says how to fetch a page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..protocol import Message, StreamResponse
from ..protocol.limits import Limits
from ..protocol.tasks import HistoryWindow

__all__ = ["HISTORY_KINDS", "FetchRows", "messages_in", "messages_of", "read_history"]

#: The kinds of log rows that may hold a message of the history.
HISTORY_KINDS = ("task", "status", "message")

#: Rows (seq, kind, payload) of the history kinds with a sequence below the
#: first argument, newest first, at most the second argument of them.
FetchRows = Callable[[int, int], Sequence[Sequence[Any]]]

#: Any status update with a message has this key (so may one without, in metadata).
_MESSAGE_KEY = '"message"'

#: Rows read at once: a turn is about two of them (the user's message, the
#: agent's status), so one page serves a window of this many messages or so.
_PAGE = 64


def messages_of(kind: str, payload: str) -> list[Message]:
    """The history messages a log row holds, in their order."""
    if kind == "message":
        return [Message.model_validate_json(payload)]
    if kind == "status" and _MESSAGE_KEY not in payload:
        return []  # most status updates carry no message: no need to read them
    return messages_in(StreamResponse.model_validate_json(payload))


def messages_in(response: StreamResponse) -> list[Message]:
    """The history messages a streamed event holds (a task's history, a status message)."""
    if response.task is not None:
        return list(response.task.history or [])
    if response.status_update is not None:
        message = response.status_update.status.message
        return [message] if message is not None else []
    return []


def read_history(
    fetch: FetchRows, through: int | None, limits: Limits, length: int | None = None
) -> list[Message]:
    """The task's history up to event ``through`` (None: all of it), oldest first.

    The most recent messages within ``limits`` and, when given, ``length``.
    """
    window = HistoryWindow(limits, length)
    if window.full:  # length 0
        return []
    below = (through + 1) if through is not None else 2**62
    page = _PAGE
    while True:
        rows = fetch(below, page)
        for _seq, kind, payload in rows:
            # A message row is the message's JSON as rendered: its size is known.
            size = len(payload) if kind == "message" else None
            for message in reversed(messages_of(kind, payload)):
                if not window.offer(message, size):
                    return window.messages()
        if len(rows) < page:
            return window.messages()
        below = int(rows[-1][0])
        page = min(page * 4, 4096)

"""Whose turn it is to send on an HTTP/2 connection: round robin, in constant time.

hypercorn's HTTP/2 connection asks a ``priority.PriorityTree`` which stream
sends next. The tree serves RFC 7540's priorities, which RFC 9113 (5.3.2)
deprecates and :class:`~.hypercorn_h2.MendedH2Protocol` ignores (its fault
2); with every stream at the default weight it is a round robin, paid for
with a heap: each turn pops every blocked stream before the one that may
send and pushes them all back, and each stream's removal is a linear search.
A connection with 16 gRPC calls waiting on their agents spent 80 Python
calls of the tree per call it answered, against 19 when answers left at once.

:class:`SendingTurns` answers the same questions the tree does, for the
calls hypercorn and the mends make, with one ordered dict and one set.
"""

from __future__ import annotations

from priority.priority import DeadlockError, DuplicateStreamError, MissingStreamError

__all__ = ["SendingTurns"]


class SendingTurns:
    """The streams of a connection, each waiting for data or ready to send, taken in turn.

    Stands where hypercorn keeps its ``priority.PriorityTree`` and raises
    that library's errors, which hypercorn catches: a stream inserted twice
    (``DuplicateStreamError``), one unknown (``MissingStreamError``), no
    stream ready (``DeadlockError``, from :func:`next`).
    """

    __slots__ = ("_blocked", "_ready")

    def __init__(self) -> None:
        #: Streams with something to send, the next one first (the dict keeps order).
        self._ready: dict[int, None] = {}
        #: Streams with nothing to send now.
        self._blocked: set[int] = set()

    def __len__(self) -> int:
        return len(self._ready) + len(self._blocked)

    def __contains__(self, stream_id: object) -> bool:
        return stream_id in self._ready or stream_id in self._blocked

    def insert_stream(self, stream_id: int, *_: object, **__: object) -> None:
        """A new stream, ready to send; its priority (depends on, weight) is ignored."""
        if stream_id in self:
            raise DuplicateStreamError(stream_id)
        self._ready[stream_id] = None

    def remove_stream(self, stream_id: int) -> None:
        """The stream is done: it sends no more."""
        if stream_id in self._ready:
            del self._ready[stream_id]
        elif stream_id in self._blocked:
            self._blocked.remove(stream_id)
        else:
            raise MissingStreamError(stream_id)

    def block(self, stream_id: int) -> None:
        """The stream has nothing to send: skip it until :meth:`unblock`."""
        if stream_id in self._ready:
            del self._ready[stream_id]
            self._blocked.add(stream_id)
        elif stream_id not in self._blocked:
            raise MissingStreamError(stream_id)

    def unblock(self, stream_id: int) -> None:
        """The stream has something to send: it takes its turn after those ready before it."""
        if stream_id in self._blocked:
            self._blocked.remove(stream_id)
            self._ready[stream_id] = None
        elif stream_id not in self._ready:
            raise MissingStreamError(stream_id)

    def __iter__(self) -> SendingTurns:
        return self

    def __next__(self) -> int:
        """The stream whose turn it is; it goes to the back of the line."""
        if not self._ready:
            raise DeadlockError("No unblocked streams to schedule.")
        stream_id = next(iter(self._ready))
        del self._ready[stream_id]
        self._ready[stream_id] = None
        return stream_id

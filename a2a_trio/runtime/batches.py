"""Writes that tasks hand in during one scheduling pass, stored together.

A queue worker's executions that start (or end) at about the same time each
have one small write to make; :class:`Batch` lets them share one
transaction, the way the recorder's rounds share one between tasks: the
first writer waits one scheduling pass for the others, then writes them all
and tells each how it went. No task of its own: the first caller writes, and
those handed in meanwhile are written next by one of their own callers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

__all__ = ["Batch"]

T = TypeVar("T")


class _Ticket:
    __slots__ = ("done", "error", "writes")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.error: BaseException | None = None
        #: Set with ``done`` when its item is not written yet: its caller
        #: writes the next batch (see :meth:`Batch._write_pending`).
        self.writes = False


class Batch(Generic[T]):
    """Items handed in by :meth:`add`, written by ``write`` a batch at a time."""

    def __init__(
        self, write: Callable[[list[T]], Awaitable[None]], *, shield: bool = False
    ) -> None:
        self._write = write
        #: Whether a writer cancelled meanwhile still writes the batch it took
        #: on (then raises its cancellation): the others' writes never fail for it.
        self._shield = shield
        self._pending: list[tuple[T, _Ticket]] = []
        #: Whether a caller writes, or has been handed the next batch to write.
        self._writing = False

    async def add(self, item: T) -> None:
        """Return once ``item`` is written (with those handed in meanwhile).

        Raises what its batch's write raised; a write cancelled under its
        writer fails its batch with ``RuntimeError`` (unless the batch shields
        its writes: then the writer raises its cancellation once its batch is
        written, its own item written too). Those pending behind it are written
        by one of their callers still waiting (failed too if none waits).
        """
        ticket = _Ticket()
        self._pending.append((item, ticket))
        if not self._writing:
            self._writing = True
            await self._write_pending()
            await trio.lowlevel.checkpoint_if_cancelled()  # cancelled while it wrote
        else:
            # No checkpoint since it was appended: a ticket's caller waits
            # on it until it is written or handed the next batch.
            await ticket.done.wait()
            if ticket.writes:
                await self._write_pending()
                await trio.lowlevel.checkpoint_if_cancelled()
        if ticket.error is not None:
            raise ticket.error

    async def _write_pending(self) -> None:
        """Write the pending items as one batch, then hand the pen on.

        Those handed in while it is written are the next batch, written by
        one of their callers: none waits for more than the batch before its
        own, and a writer returns as soon as its own item is written. A
        writer cancelled under its write fails that batch (whether it was
        written is not known); the next is still handed on.
        """
        batch: list[tuple[T, _Ticket]] = []
        handed_on = False
        try:
            with trio.CancelScope(shield=self._shield):
                # Those handing theirs in during this scheduling pass join the batch.
                await trio.lowlevel.checkpoint()
                while self._pending:
                    batch, self._pending = self._pending, []
                    error: Exception | None = None
                    try:
                        await self._write([item for item, _ in batch])
                    except Exception as failure:
                        error = failure
                    for _, ticket in batch:
                        ticket.error = error
                        ticket.done.set()
                    batch = []
                    handed_on = self._hand_on()
                    if handed_on:
                        return
        finally:
            for _, ticket in batch:
                ticket.error = RuntimeError("the batch's write was cancelled")
                ticket.done.set()
            if not handed_on and not self._hand_on():
                self._writing = False
                unwritten, self._pending = self._pending, []
                for _, ticket in unwritten:
                    ticket.error = RuntimeError("the batch's write was cancelled")
                    ticket.done.set()

    def _hand_on(self) -> bool:
        """Make a caller of a pending item the next writer, if one still waits (one
        cancelled meanwhile waits no more)."""
        for _, ticket in self._pending:
            if ticket.done.statistics().tasks_waiting:
                ticket.writes = True
                ticket.done.set()
                return True
        return False

"""The memory budget of request bodies in flight, across every request of the process.

Each protocol request (JSON-RPC, HTTP+JSON, gRPC) holds a share of the
budget from before its body is read until its answer is ready: the body's
declared length before the first byte is taken (or each piece's length as it
comes, when no length is declared), then, before it is decoded, what decoding
it may cost (:func:`decoding_cost`). A request whose share would pass the
budget waits ``patience`` seconds for others to give theirs back, then is
refused with :class:`~a2a_trio.protocol.ServerBusyError` (HTTP 503 and
``Retry-After``, gRPC RESOURCE_EXHAUSTED) without its body being kept.

Without it, 64 concurrent 8 MiB SendMessage calls took a server to 2.7 GiB
and, under a 2 GiB address-space limit, aborted it (issue 31). Bodies of
:data:`LARGE_SHARE` bytes and more may fill only three quarters of the budget,
so that small calls (GetTask, CancelTask, short messages) still get in while
large ones queue; a request alone may always proceed, whatever its size.

When the last share of a burst of :data:`TRIM_AFTER` bytes or more is given
back, the C allocator is asked to return its free memory to the system
(glibc's ``malloc_trim``): measured on 64 concurrent 8 MiB calls under a
256 MiB budget, the server's RSS fell from 603 to 280 MiB with it, and stayed
at 603 without (issue 31). It costs some 30 ms, once per burst.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import time
from collections.abc import Callable
from types import TracebackType

import trio

from ..protocol import ServerBusyError

__all__ = ["BodyBudget", "BudgetShare", "decoding_cost", "unbudgeted"]

log = logging.getLogger("a2a_trio.server")

#: A share from this many bytes on is a large body's (see the module docstring).
LARGE_SHARE = 256 * 1024

#: A burst that held this many bytes at its height gives its memory back to
#: the system when it ends (see the module docstring).
TRIM_AFTER = 32 * 1024 * 1024


@functools.cache
def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none (musl, macOS).

    Looked up among the symbols the process has loaded, on first use:
    ``ctypes.util.find_library`` would run ``ldconfig`` at every import.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    return lambda: trim(0)


#: What one JSON object or array costs once decoded, beyond its bytes: a dict
#: is 64 bytes and more, a list 56, plus the pointer to it (CPython 3.11).
CONTAINER_BYTES = 100


def decoding_cost(body: bytes) -> int:
    """Bytes decoding the JSON ``body`` may hold beyond the body itself (an upper estimate).

    Its text once decoded (as many bytes again, for ASCII), and each object
    or array it opens: a body of ``[{},{},...]`` costs some 25 times its
    length once decoded, a body of one long text twice its length. Counted in
    C (``bytes.count``), a few milliseconds for 10 MiB.
    """
    return len(body) + CONTAINER_BYTES * (body.count(b"{") + body.count(b"["))


class BodyBudget:
    """At most ``capacity`` bytes of request bodies (and their decoding) held at once."""

    def __init__(self, capacity: int, patience: float = 1.0, retry_after: int = 1) -> None:
        if capacity < 1:
            raise ValueError("a body budget holds at least one byte")
        self.capacity = capacity
        #: Seconds a request waits for room before it is refused.
        self.patience = patience
        #: Seconds a refused client is asked to wait (``Retry-After``).
        self.retry_after = retry_after
        #: Bytes held now, by every request together.
        self.in_use = 0
        #: Requests holding a share now.
        self.holders = 0
        #: Requests refused since the start.
        self.refused = 0
        #: The most bytes held at once since the budget last stood empty.
        self.burst_height = 0
        self._waiting = trio.lowlevel.ParkingLot()

    def share(self) -> BudgetShare:
        """A request's share: empty at first, given back in full when its ``with`` ends."""
        return BudgetShare(self)

    def _fits(self, held: int, more: int) -> bool:
        if self.in_use == held:  # this request alone: it proceeds, whatever its size
            return True
        ceiling = self.capacity - (self.capacity // 4 if held + more >= LARGE_SHARE else 0)
        return self.in_use + more <= ceiling

    async def take(self, held: int, more: int) -> None:
        """``more`` bytes for a request that holds ``held``; waits, or ServerBusyError."""
        if not self._fits(held, more):
            with trio.move_on_after(self.patience):
                while not self._fits(held, more):
                    await self._waiting.park()
            if not self._fits(held, more):
                self.refused += 1
                raise ServerBusyError(
                    f"The server holds as many request bodies as it may ({self.in_use} of"
                    f" {self.capacity} bytes): retry in {self.retry_after} s",
                    retry_after=self.retry_after,
                )
        self.in_use += more
        self.burst_height = max(self.burst_height, self.in_use)

    def give_back(self, size: int) -> None:
        """A request lets go of ``size`` bytes: those waiting for room look again."""
        self.in_use -= size
        self._waiting.unpark_all()
        if self.in_use == 0:
            trim = _malloc_trim() if self.burst_height >= TRIM_AFTER else None
            if trim is not None:
                began = time.perf_counter()
                trim()
                log.debug(
                    "returned free memory after a burst of %d bytes of bodies in %.1f ms",
                    self.burst_height,
                    (time.perf_counter() - began) * 1000,
                )
            self.burst_height = 0


class BudgetShare:
    """One request's share of a :class:`BodyBudget`; a ``with`` block gives it back."""

    def __init__(self, budget: BodyBudget | None) -> None:
        self._budget = budget
        #: Bytes this request holds.
        self.size = 0

    async def grow_to(self, size: int) -> None:
        """Hold ``size`` bytes in all (nothing if it holds that many already).

        Waits up to the budget's ``patience`` for room;
        :class:`~a2a_trio.protocol.ServerBusyError` if none is made.
        """
        more = size - self.size
        if more <= 0 or self._budget is None:
            return
        await self._budget.take(self.size, more)
        self.size = size

    def __enter__(self) -> BudgetShare:
        if self._budget is not None:
            self._budget.holders += 1
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._budget is not None:
            self._budget.holders -= 1
            self._budget.give_back(self.size)
        self.size = 0


def unbudgeted() -> BudgetShare:
    """A share of no budget: it never waits and is never refused."""
    return BudgetShare(None)

"""Whether the database has room for writes: a full disk said plainly, once.

A write that fails for lack of space (SQLite's ``SQLITE_FULL``, an
``ENOSPC`` from the file system, PostgreSQL's ``disk_full``, SQLSTATE 53100)
becomes :class:`~a2a_trio.protocol.StorageFullError`, which every binding
answers as a precise, retryable error. The store's :class:`StorageCondition`
remembers it: readiness says "not ready" with the reason, and the log gets
one line when storage fills and one when a write succeeds again, never a
traceback per request.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import time
from collections.abc import Callable

from ..protocol import StorageFullError

__all__ = ["StorageCondition", "is_disk_full"]

log = logging.getLogger("a2a_trio.store")

#: PostgreSQL's SQLSTATE for "could not extend file: No space left on device".
DISK_FULL_SQLSTATE = "53100"


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` (SQLite's, PostgreSQL's or the OS's) says there was no space left."""
    if isinstance(error, StorageFullError):
        return True
    if isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        return code is not None and code & 0xFF == sqlite3.SQLITE_FULL
    if isinstance(error, OSError):
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    return getattr(error, "sqlstate", None) == DISK_FULL_SQLSTATE


class StorageCondition:
    """Full or not, since when and why: one per store, told of every write's fate.

    Full lasts until a write succeeds, or until ``hold`` seconds pass with no
    write refused for lack of space (a store that takes no writes meanwhile
    must not stay "not ready" for ever: the next refusal marks it full again).
    """

    def __init__(
        self, display: str, *, hold: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.display = display
        self.hold = hold
        self._clock = clock
        self._error: str | None = None
        self._since = 0.0
        self._last = 0.0

    def refused(self, error: BaseException) -> StorageFullError:
        """A write failed for lack of space: note it (logged if new); the error to raise."""
        now = self._clock()
        if self._error is None:
            self._since = now
            log.warning(
                "storage full (%s): %s; writes answer STORAGE_FULL until space is freed",
                self.display,
                _cause(error),
            )
        self._error = _cause(error)
        self._last = now
        return error if isinstance(error, StorageFullError) else StorageFullError()

    def wrote(self) -> None:
        """A write succeeded: there is space (logged if there was none)."""
        if self._error is not None:
            log.info(
                "storage has space again (%s): a write succeeded after %.0f s full",
                self.display,
                self._clock() - self._since,
            )
            self._error = None

    @property
    def full(self) -> str | None:
        """Why writes fail now ("" never), or None while there is space as far as is known."""
        if self._error is None:
            return None
        if self._clock() - self._last >= self.hold:
            log.info(
                "storage (%s): no write refused for lack of space in %g s; taking writes again",
                self.display,
                self.hold,
            )
            self._error = None
            return None
        return f"full since {self._clock() - self._since:.0f} s: {self._error}"


def _cause(error: BaseException) -> str:
    """The driver's own words for the failure (SQLite's, PostgreSQL's, the OS's)."""
    while isinstance(error, StorageFullError) and error.__cause__ is not None:
        error = error.__cause__
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text

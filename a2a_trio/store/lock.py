"""The lock that gives one serving process a SQLite database to itself.

Two processes serving one file would each run executions the other cannot see:
a task canceled in one could still complete in the other, one's crash recovery
would fail the other's live tasks, and subscribers would miss the other's
events. So a serving store holds an OS lock on a file beside the database
(``a2a.db.lock`` for ``a2a.db``), and a second server on that file is refused
at start. Readers (the CLI) take no lock: SQLite's WAL lets them read and
prune while the server writes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO

if sys.platform != "win32":
    import fcntl

__all__ = ["DatabaseInUseError", "ServingLock"]


class DatabaseInUseError(RuntimeError):
    """Another server (in this process or another) already serves the database."""


class ServingLock:
    """An exclusive, non-blocking lock on ``<database>.lock``, held until released.

    The lock is ``flock(2)``: the OS drops it when its holder exits, however it
    exits (a SIGKILL leaves no stale lock), and it belongs to one open file, so
    a second server in the same process is refused too. The holder writes its
    pid into the file, and the refusal names it when it is there already.
    Where there is no ``fcntl`` (Windows, not a target) nothing is locked.
    """

    def __init__(self, database: str | Path) -> None:
        self.database = str(database)
        # Beside the real file: a symlink to the database is the same database.
        self.path = Path(os.path.realpath(database) + ".lock")
        self._file: BinaryIO | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`DatabaseInUseError` at once. Idempotent."""
        if self._file is not None or sys.platform == "win32":
            return
        # A file object, not a bare descriptor: should its owner be dropped
        # without release(), collecting it closes the file and frees the lock.
        # Closed on exec (PEP 446): a program an agent runs does not inherit the lock.
        file = self.path.open("a+b", buffering=0)
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_in(file)
            file.close()
            raise DatabaseInUseError(self._refusal(holder)) from None
        except BaseException:
            file.close()
            raise
        file.truncate(0)
        file.write(f"{os.getpid()}\n".encode())
        self._file = file

    def release(self) -> None:
        """Let the database go (the file stays: removing it would race a new holder)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _refusal(self, holder: int | None) -> str:
        if holder is None:
            who = "another process"
        elif holder == os.getpid():
            who = f"another app in this process (pid {holder})"
        else:
            who = f"another process (pid {holder})"
        return (
            f"{self.database} is already served by {who}, which holds {self.path}. "
            "A SQLite database is served by one process only: serve it from a single "
            "process (hypercorn without --workers), or give this server a database "
            "of its own (storage.url)"
        )


def _pid_in(file: BinaryIO) -> int | None:
    # The holder may be between truncating and writing its pid: then none is known.
    file.seek(0)
    text = file.read(32).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None

"""One SQLite file and the connections a store keeps on it.

:class:`Database` opens the file (taking the serving lock first when asked,
then migrating it), hands out the connection to read on and one transaction
at a time to write in, and copies the WAL into the file (checkpoints). It
knows nothing of tasks: :mod:`.recording` and :mod:`.store` write and read
them through it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import sqlite_utils
import trio
from cryptography.fernet import Fernet

from ..._locks import held
from ..lock import ServingLock
from ..schema import SCHEMA_VERSION, migrate
from ..secrets import SecretBox, development_key
from ..space import StorageCondition, is_disk_full

__all__ = ["Database", "DatabaseUnopenable", "Synchronous"]

T = TypeVar("T")
#: SQLite's ``PRAGMA synchronous`` levels a store may run at.
Synchronous = Literal["OFF", "NORMAL", "FULL"]


@dataclass(frozen=True, slots=True)
class _Connections:
    """What :meth:`Database.connect` opens, all at once."""

    db: sqlite_utils.Database
    #: ``db``'s connection, the only one that writes.
    writer: sqlite3.Connection
    #: While a write runs on a worker thread (see :meth:`Database.write`),
    #: reads go through this connection of their own, so that none sees the
    #: write before it commits. Otherwise they share the writing connection,
    #: whose page cache a write of its own leaves warm. An in-memory database
    #: has one connection for both.
    reader: sqlite3.Connection
    box: SecretBox


class DatabaseUnopenable(RuntimeError):
    """The SQLite file cannot be opened (no such directory, no permission, not a database)."""


class Database:
    """The SQLite file at ``path``: its connections, its write turn and its WAL.

    Every property opens the file on first use (:meth:`connect`); :meth:`close`
    lets it go. Writes take turns (one at a time on the writing connection,
    whichever thread runs it); reads never wait for them.
    """

    def __init__(
        self,
        path: str,
        *,
        space: StorageCondition,
        secret_key: str | bytes | None = None,
        synchronous: Synchronous = "NORMAL",
        key: str = "storage.url",
    ) -> None:
        self.path = path
        #: The setting that named the file (``storage.url``, ``agents[0].storage``).
        self.key = key
        #: Where a write refused for lack of space is noted (and raised from).
        self.space = space
        self._secret_key = secret_key
        self._synchronous = synchronous
        self._connections: _Connections | None = None
        self._writing_elsewhere = False
        #: One write at a time on the writing connection, whichever thread runs it.
        self._writing = trio.Lock()
        #: Held while the store serves the database (``connect(exclusive=True)``).
        self._lock: ServingLock | None = None
        self._commits = 0
        #: The connection :meth:`checkpoint` uses, from a worker thread.
        self._checkpointer: sqlite3.Connection | None = None
        self._page_size = 4096
        #: (device, inode) of the file opened: a file moved or deleted under a
        #: serving process takes its writes with it, so it is not ready.
        self._file_id: tuple[int, int] | None = None

    # --- opening and closing -------------------------------------------------

    @property
    def in_memory(self) -> bool:
        """Whether the database lives in memory (one connection, no file, no lock)."""
        return self.path == ":memory:" or self.path.startswith("file::memory:")

    def connect(self, *, exclusive: bool = False) -> None:
        """Open the file and migrate it (idempotent).

        With ``exclusive``, the serving lock is taken before connecting and
        held until :meth:`close`; an in-memory database needs none.
        """
        try:
            self._connect(exclusive)
        except (OSError, sqlite3.DatabaseError) as error:
            raise DatabaseUnopenable(self._unopenable(error)) from error

    def _connect(self, exclusive: bool) -> None:
        locked_now = False
        if exclusive and self._lock is None and not self.in_memory:
            lock = ServingLock(self.path)
            lock.acquire()
            self._lock, locked_now = lock, True
        if self._connections is None:
            try:
                self._connections = self._open()
            except BaseException:
                if locked_now:
                    self._release_lock()
                raise

    def _unopenable(self, error: OSError | sqlite3.DatabaseError) -> str:
        """Why the file cannot be opened, in one line naming its setting."""
        directory = Path(self.path).parent
        if not directory.is_dir():
            reason = f"the directory {directory} does not exist"
        elif isinstance(error, OSError):
            reason = error.strerror or str(error)
        else:
            reason = str(error)
        return f"{self.key}: cannot open the SQLite database {self.path}: {reason}"

    def _open(self) -> _Connections:
        conn = self._new_connection()
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        db = sqlite_utils.Database(conn)
        try:
            migrate(db)
        except BaseException:
            conn.close()
            raise
        key = self._secret_key
        if key is None:
            key = Fernet.generate_key() if self.in_memory else development_key(Path(self.path))
        box = SecretBox(key)
        reader = conn if self.in_memory else self._new_connection()
        if not self.in_memory:
            stat = os.stat(self.path)
            self._file_id = (stat.st_dev, stat.st_ino)
        return _Connections(db, conn, reader, box)

    def _new_connection(self) -> sqlite3.Connection:
        return sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=5.0
        )

    def check(self) -> None:
        """Raise (saying why) unless the file opened is still there, at this schema."""
        if self._file_id is not None:
            try:
                stat = os.stat(self.path)
            except OSError as error:
                raise RuntimeError(f"the database file is unreachable: {error.strerror}") from None
            if (stat.st_dev, stat.st_ino) != self._file_id:
                raise RuntimeError("the database file was replaced since it was opened")
        found = int(self.db.execute("PRAGMA user_version").fetchone()[0])
        if found != SCHEMA_VERSION:
            raise RuntimeError(f"schema version {found}; this a2a-trio uses {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close every connection and let the serving lock go."""
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None
        connections, self._connections = self._connections, None
        if connections is not None:
            if connections.reader is not connections.writer:
                connections.reader.close()
            connections.writer.close()
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @property
    def _opened(self) -> _Connections:
        if self._connections is None:
            self.connect()
        assert self._connections is not None
        return self._connections

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the database, on the writing connection."""
        return self._opened.db

    @property
    def reads(self) -> sqlite3.Connection:
        """The connection to read on now (never one a write is running on elsewhere)."""
        opened = self._opened
        return opened.reader if self._writing_elsewhere else opened.writer

    @property
    def box(self) -> SecretBox:
        """What seals and opens the push configs' secrets."""
        return self._opened.box

    # --- writing ----------------------------------------------------------------

    @property
    def commits(self) -> int:
        """Transactions committed since the database was created."""
        return self._commits

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[sqlite3.Connection]:
        """One transaction of the statements run inside (on the trio thread)."""
        async with held(self._writing):
            with self._committing() as conn:
                yield conn

    async def write(self, work: Callable[[sqlite3.Connection], T], *, on_thread: bool) -> T:
        """``work(conn)`` in one transaction, on a worker thread when ``on_thread``.

        Meanwhile reads go through a connection of their own, so none sees
        the write before it commits. An in-memory database, whose one
        connection both reads and writes, is written on the trio thread.
        """
        async with held(self._writing):
            if self.in_memory or not on_thread:
                return self._commit(work)
            self._writing_elsewhere = True
            try:
                # Not abandoned on cancel: the write ends before the turn passes.
                return await trio.to_thread.run_sync(self._commit, work)
            finally:
                self._writing_elsewhere = False

    def _commit(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._committing() as conn:
            return work(conn)

    @contextmanager
    def _committing(self) -> Iterator[sqlite3.Connection]:
        """One transaction on the writing connection, whose turn the caller holds."""
        conn = self._opened.writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as error:
            # A failed COMMIT (I/O, a full disk) leaves the transaction open;
            # SQLite may have rolled back already after a failed statement.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if is_disk_full(error):
                raise self.space.refused(error) from error
            raise
        self._commits += 1
        self.space.wrote()

    # --- WAL checkpoints ----------------------------------------------------

    def defer_checkpoints(self, deferred: bool) -> None:
        """Whether commits leave WAL checkpoints to :meth:`checkpoint`.

        By default SQLite checkpoints inside the commit that fills the WAL
        past 1,000 pages: that commit copies the pages into the database and
        syncs it while the event loop waits (~0.2 s after a 10 MiB message).
        Deferred, commits only append to the WAL, and a worker thread calls
        :meth:`checkpoint` (see :func:`a2a_trio.store.checkpoint_periodically`).
        """
        if self._connections is not None or deferred:
            self._opened.writer.execute(f"PRAGMA wal_autocheckpoint={0 if deferred else 1000}")

    @property
    def checkpointing(self) -> bool:
        """Whether a checkpoint ran (its connection is open) since the database was opened."""
        return self._checkpointer is not None

    def checkpoint(self) -> int:
        """Copy the WAL into the database (PASSIVE: never waits for a reader or writer).

        Returns the bytes the WAL holds (copied or not). Thread-safe against
        the serving connection: it runs on a connection of its own, which
        only one thread at a time may use.
        """
        return self._checkpoint("PASSIVE")

    async def empty_wal(self) -> int:
        """Copy the whole WAL into the database and empty its file, between two writes.

        A passive checkpoint copies only what no write has touched meanwhile,
        and SQLite starts the WAL over only after one that copied it all: under
        steady writes that never happens, and the WAL grows without bound (a
        gigabyte a minute at 1,100 SendMessage/s). This one holds the write
        turn, so the store's own writes wait (in memory, off the event loop)
        while a worker thread copies and truncates. Returns the bytes left in
        the WAL: 0, unless a reader of another process held it.
        """
        async with held(self._writing):
            # Not abandoned on cancel: the turn must not pass while it runs.
            return await trio.to_thread.run_sync(self._checkpoint, "TRUNCATE")

    def _checkpoint(self, mode: str) -> int:
        if self._checkpointer is None:
            self._checkpointer = self._new_connection()
            self._page_size = int(self._checkpointer.execute("PRAGMA page_size").fetchone()[0])
        _busy, frames, _copied = self._checkpointer.execute(
            f"PRAGMA wal_checkpoint({mode})"
        ).fetchone()
        return max(int(frames), 0) * self._page_size

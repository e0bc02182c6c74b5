"""A small pool of psycopg connections driven from trio through worker threads.

Each unit of work is a plain function run in a worker thread on a pooled connection
inside one transaction: one thread hop per round, not one per statement
(docs/storage.md has the measurements behind this choice). A unit of one
statement is its own transaction (the pool's connections are in autocommit):
one round trip, not three. Everything here uses psycopg's public API only.
"""

from __future__ import annotations

import logging
import select
import shlex
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any, TypeVar

import psycopg
import trio
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo
from psycopg.pq import TransactionStatus

from ..outage import ReachabilityLog
from ..url import PostgresLocation
from .errors import ConnectionLost, DatabaseUnavailable, StatementTimeout
from .pool_settings import PoolSettings as PoolSettings  # re-exported: listener, store

T = TypeVar("T")
Connection = psycopg.Connection[tuple[Any, ...]]
Params = Sequence[Any]

log = logging.getLogger(__name__)


class Database:
    """At most ``settings.size`` connections to one PostgreSQL database.

    Open it with ``async with Database.open(location) as db``. A connection that broke,
    or whose server went away while it sat idle, is dropped and replaced on the next
    checkout, so calls after a server restart succeed once the server is back.
    """

    def __init__(self, location: PostgresLocation, settings: PoolSettings) -> None:
        self.location = location
        self.settings = settings
        #: Idle connections, most recently used last, with when they were let go.
        self._idle: list[tuple[Connection, float]] = []
        self._slots = trio.Semaphore(settings.size)
        # Threads of our own rather than trio's shared default limiter, so database
        # work never queues behind unrelated to_thread calls. A slot holder runs one
        # thread at a time; it waits here only while a cancelled query's abandoned
        # thread is still finishing, which is the back-pressure wanted.
        self._threads = trio.CapacityLimiter(settings.size)
        # Cancelling needs a thread of its own even when every work thread is taken.
        self._interrupts = trio.CapacityLimiter(settings.size)
        #: Logs the database going away and coming back, once each.
        self.reachability = ReachabilityLog(location.display)

    @classmethod
    @asynccontextmanager
    async def open(
        cls, location: PostgresLocation, settings: PoolSettings | None = None
    ) -> AsyncIterator[Database]:
        """Check that the database answers, then yield the pool; closes it on exit."""
        db = cls(location, settings or PoolSettings())
        try:
            await db.prime()
            yield db
        finally:
            db.close()

    async def prime(self) -> None:
        """Connect once, or raise why not; the connection waits in the pool for the first call.

        :meth:`open` does it so that a database that does not answer fails the
        start, not the first request.
        """
        self._idle.append((await self._connect(), trio.current_time()))

    def close(self) -> None:
        """Close every connection in the pool (at the end of :meth:`open`, when no call runs)."""
        for conn, _ in self._idle:
            conn.close()
        self._idle.clear()

    async def run(self, work: Callable[[Connection], T], *, single: bool = False) -> T:
        """Run ``work(conn)`` in a worker thread inside one transaction.

        The transaction commits when ``work`` returns and rolls back when it raises.
        If the calling trio task is cancelled, the server is asked to cancel the query,
        the transaction rolls back and the cancellation goes on; the connection returns
        to the pool only once it is idle again.

        ``single``: ``work`` runs one statement, which is then its own transaction
        (no ``BEGIN`` and ``COMMIT`` around it: one round trip, not three).
        """
        try:
            async with self._connection() as conn:
                result = await self._in_thread(conn, work, single)
        except (DatabaseUnavailable, ConnectionLost) as error:
            self.reachability.failed(error)
            raise
        if not self.reachability.reachable:
            self.reachability.succeeded()
        return result

    async def execute(self, query: str, params: Params = ()) -> int:
        """Run one statement in its own transaction; returns the row count."""

        def work(conn: Connection) -> int:
            return conn.execute(query, params).rowcount

        return await self.run(work, single=True)

    async def fetchone(self, query: str, params: Params = ()) -> tuple[Any, ...] | None:
        """The first row of one query, or None."""
        return await self.run(lambda conn: conn.execute(query, params).fetchone(), single=True)

    async def fetchall(self, query: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Every row of one query."""
        return await self.run(lambda conn: conn.execute(query, params).fetchall(), single=True)

    async def _connect(self) -> Connection:
        return await trio.to_thread.run_sync(
            partial(connect, self.location, self.settings, autocommit=True),
            limiter=self._threads,
        )

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        async with self._slots:
            conn = self._take_idle() or await self._connect()
            try:
                yield conn
            finally:
                if _reusable(conn):
                    self._idle.append((conn, trio.current_time()))
                elif conn.info.transaction_status != TransactionStatus.ACTIVE:
                    _close_quietly(conn)
                # else a cancelled query outlived its grace period: its worker thread
                # still uses the connection, so it is dropped here without closing.

    def _take_idle(self) -> Connection | None:
        while self._idle:
            conn, _ = self._idle.pop()
            if _still_alive(conn):
                return conn
            log.debug("dropping a PostgreSQL connection the server closed (%s)", self.display)
            _close_quietly(conn)
        return None

    def close_idle(self) -> None:
        """Close the connections no call used for ``settings.idle_seconds``."""
        cutoff = trio.current_time() - self.settings.idle_seconds
        # Let go last, used last: the oldest are at the front.
        while self._idle and self._idle[0][1] < cutoff:
            conn, _ = self._idle.pop(0)
            _close_quietly(conn)

    @property
    def display(self) -> str:
        return self.location.display

    async def _in_thread(
        self, conn: Connection, work: Callable[[Connection], T], single: bool = False
    ) -> T:
        finished = threading.Event()
        # "waiting" until the worker begins ("running") or the caller gives it
        # up first ("abandoned"): a call cancelled before its thread ran (while
        # it waited for a thread, say) has no query to interrupt or wait for.
        phase = "waiting"
        handshake = threading.Lock()

        def transaction() -> T:
            nonlocal phase
            with handshake:
                if phase == "abandoned":
                    raise _Abandoned  # the caller has gone on: nothing may run
                phase = "running"
            try:
                if single:
                    return work(conn)
                with conn.transaction():
                    return work(conn)
            except pg_errors.QueryCanceled as error:
                if "statement timeout" in str(error):
                    raise StatementTimeout(
                        f"PostgreSQL ({self.display}) cancelled a statement after"
                        f" statement_timeout = {self.settings.statement_timeout}s"
                    ) from error
                raise
            except psycopg.OperationalError as error:
                if conn.closed or conn.broken:
                    raise ConnectionLost(
                        f"the connection to PostgreSQL ({self.display}) was lost: {error}"
                    ) from error
                raise
            finally:
                finished.set()

        try:
            # abandon_on_cancel lets the cancellation reach us while the thread still
            # runs the query; the connection is not released until the thread is done.
            return await trio.to_thread.run_sync(
                transaction, abandon_on_cancel=True, limiter=self._threads
            )
        except trio.Cancelled:
            with handshake:
                running = phase == "running"
                if not running:
                    phase = "abandoned"
            if running:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(
                        _interrupt,
                        conn,
                        finished,
                        self.settings.cancel_grace,
                        limiter=self._interrupts,
                    )
            raise


class _Abandoned(Exception):
    """A worker whose caller was cancelled before it began: it does nothing."""


#: The statements psycopg prepares (those a connection ran five times) keep one plan.
#: PostgreSQL's default plans a prepared statement again at every execution while
#: the generic plan's estimate is not below the custom plans': an ``unnest`` of an
#: array parameter is estimated at 100 rows generic, 1 custom, so it never is, and
#: every follow-up's leasing read (task_reads) paid ~1.4 ms of the backend's CPU
#: for its planning, against ~0.45 ms run with its generic plan.
PLAN_CACHE_MODE = "force_generic_plan"


def connect(
    location: PostgresLocation,
    settings: PoolSettings,
    *,
    application: str = "a2a-trio",
    autocommit: bool = False,
) -> Connection:
    """Open one connection (blocking) with the pool's timeouts; errors never hold a password.

    ``application`` is its ``application_name`` (pg_stat_activity shows it);
    ``autocommit``: each statement outside ``conn.transaction()`` commits alone.
    """
    timeout_ms = int(settings.statement_timeout * 1000)
    try:
        conn: Connection = psycopg.connect(
            make_conninfo("", **location.conninfo_kwargs()),
            connect_timeout=max(1, round(settings.connect_timeout)),
            options=f"-c statement_timeout={timeout_ms} -c plan_cache_mode={PLAN_CACHE_MODE}",
            application_name=application,
            autocommit=autocommit,
        )
    except psycopg.Error as error:
        # libpq's message names host and port but never the password; ours adds the key.
        reason = str(error).strip().replace(location.password or "\0", "***")
        raise DatabaseUnavailable(
            f"{location.key}: cannot connect to PostgreSQL at {location.display}: {reason}"
            + _fix_for(location, reason)
        ) from None
    return conn


def _fix_for(location: PostgresLocation, reason: str) -> str:
    """What to do about a refused connection, where libpq's reason makes it plain."""
    if f'database "{location.dbname}" does not exist' in reason:
        user = f" -U {shlex.quote(location.user)}" if location.user else ""
        return (
            f"; create it with: createdb -h {location.host} -p {location.port}{user} "
            f"{shlex.quote(location.dbname)} (or name another database in {location.key})"
        )
    return ""


def _interrupt(conn: Connection, finished: threading.Event, grace: float) -> None:
    """Ask the server to cancel what ``conn`` runs, then wait for the worker to let go."""
    if finished.is_set():
        return
    try:
        conn.cancel_safe(timeout=grace)
    except psycopg.Error as error:
        log.warning("could not cancel a PostgreSQL query: %s", error)
    if not finished.wait(grace):
        # The worker still holds the connection; it must not come back to the pool,
        # and closing it under the worker's feet is not safe. Let it go.
        log.warning("a cancelled PostgreSQL query did not stop within %ss", grace)


def _reusable(conn: Connection) -> bool:
    return not (conn.closed or conn.broken) and (
        conn.info.transaction_status == TransactionStatus.IDLE
    )


def _still_alive(conn: Connection) -> bool:
    """False when the server closed the connection or said anything while it was idle."""
    if conn.closed or conn.broken:
        return False
    # An idle connection has nothing to read; a readable socket means the server sent
    # its goodbye (shutdown, restart, pg_terminate_backend) or closed it.
    # poll, not select: a busy server has descriptors past select's limit of 1024.
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return not poller.poll(0)


def _close_quietly(conn: Connection) -> None:
    with suppress(psycopg.Error):
        conn.close()

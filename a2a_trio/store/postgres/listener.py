"""LISTEN on one dedicated connection and wait for notifications on its socket."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

import psycopg
import trio
from psycopg import sql

from ..url import PostgresLocation
from .database import Connection, PoolSettings, connect
from .errors import ConnectionLost

#: The application_name of a listening connection (pg_stat_activity shows it).
LISTENER_APPLICATION = "a2a-trio wake-ups"

T = TypeVar("T")


@dataclass(frozen=True)
class Notification:
    """One NOTIFY: its channel, its payload and the backend that sent it."""

    channel: str
    payload: str
    pid: int


class Listener:
    """A connection that listens; ``receive`` waits trio-natively on its socket.

    The channels are fixed when it opens. :meth:`run` may use the connection
    between two waits (a heartbeat, so that an idle process holds this one
    connection only): ``receive`` gives way while it runs, and what arrives
    meanwhile is kept for it (psycopg hands it to the notify handler).
    """

    def __init__(self, conn: Connection, encoding: str) -> None:
        self._conn = conn
        self._encoding = encoding
        #: Notifications psycopg read while :meth:`run` used the connection.
        self._kept: deque[psycopg.Notify] = deque()
        conn.add_notify_handler(self._kept.append)
        #: Who uses the connection: ``receive`` (while it waits) or one ``run``.
        self._turn = trio.Lock()
        self._waiting: trio.CancelScope | None = None

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        location: PostgresLocation,
        channels: Iterable[str],
        settings: PoolSettings | None = None,
    ) -> AsyncIterator[Listener]:
        settings = settings or PoolSettings()
        conn = await trio.to_thread.run_sync(
            partial(connect, location, settings, application=LISTENER_APPLICATION)
        )
        try:
            conn.autocommit = True
            statements = [sql.SQL("LISTEN {}").format(sql.Identifier(c)) for c in channels]
            # A few LISTENs on a fresh connection: quick enough to run in place.
            await trio.to_thread.run_sync(_run_all, conn, statements)
            yield cls(conn, conn.info.encoding)
        finally:
            conn.close()

    async def receive(self) -> Notification:
        """The next notification; raises ConnectionLost if the server goes away."""
        pgconn = self._conn.pgconn
        while True:
            if self._kept:
                kept = self._kept.popleft()
                return Notification(kept.channel, kept.payload, kept.pid)
            # libpq's public, non-blocking calls: consume what the socket holds, then
            # hand out what was parsed.
            notify = pgconn.notifies()
            if notify is not None:
                return Notification(
                    channel=notify.relname.decode(self._encoding),
                    payload=notify.extra.decode(self._encoding),
                    pid=notify.be_pid,
                )
            async with self._turn:
                with trio.CancelScope() as self._waiting:
                    await trio.lowlevel.wait_readable(pgconn.socket)
                self._waiting = None
                if self._conn.closed or self._conn.broken:
                    raise ConnectionLost("the LISTEN connection was lost")
                try:
                    pgconn.consume_input()
                except psycopg.OperationalError as error:
                    raise ConnectionLost(f"the LISTEN connection was lost: {error}") from error

    async def run(self, work: Callable[[Connection], T]) -> T:
        """Run ``work(conn)`` in one transaction on this connection, in a worker thread."""
        if self._waiting is not None:
            self._waiting.cancel()  # receive gives way, then waits again after us
        async with self._turn:

            def transaction() -> T:
                try:
                    with self._conn.transaction():
                        return work(self._conn)
                except psycopg.OperationalError as error:
                    if self._conn.closed or self._conn.broken:
                        raise ConnectionLost(f"the LISTEN connection was lost: {error}") from error
                    raise

            return await trio.to_thread.run_sync(transaction)


def _run_all(conn: Connection, statements: list[sql.Composed]) -> None:
    for statement in statements:
        conn.execute(statement)

"""LISTEN on one dedicated connection and wait for notifications on its socket."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import psycopg
import trio
from psycopg import sql

from ..url import PostgresLocation
from .database import Connection, PoolSettings, connect
from .errors import ConnectionLost

#: The application_name of a listening connection (pg_stat_activity shows it).
LISTENER_APPLICATION = "a2a-trio wake-ups"


@dataclass(frozen=True)
class Notification:
    """One NOTIFY: its channel, its payload and the backend that sent it."""

    channel: str
    payload: str
    pid: int


class Listener:
    """A connection that only listens; ``receive`` waits trio-natively on its socket.

    The channels are fixed when it opens: once LISTEN has run, nothing else is ever sent
    on this connection, so no query can swallow a notification meant for ``receive``.
    """

    def __init__(self, conn: Connection, encoding: str) -> None:
        self._conn = conn
        self._encoding = encoding

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
            # libpq's public, non-blocking calls: consume what the socket holds, then
            # hand out what was parsed.
            notify = pgconn.notifies()
            if notify is not None:
                return Notification(
                    channel=notify.relname.decode(self._encoding),
                    payload=notify.extra.decode(self._encoding),
                    pid=notify.be_pid,
                )
            await trio.lowlevel.wait_readable(pgconn.socket)
            try:
                pgconn.consume_input()
            except psycopg.OperationalError as error:
                raise ConnectionLost(f"the LISTEN connection was lost: {error}") from error


def _run_all(conn: Connection, statements: list[sql.Composed]) -> None:
    for statement in statements:
        conn.execute(statement)

"""The advisory lock that gives one serving process a PostgreSQL database to itself.

Until cluster mode (issue 15: notifications between processes, leases on
executions and on push lanes) two servers on one database would each run
executions the other cannot see, as on SQLite (see :mod:`a2a_trio.store.lock`).
So a serving store holds a session-level advisory lock on a connection of its
own, kept open until the store closes. PostgreSQL lets the lock go with the
session, however the holder ends: a killed process leaves no stale lock, once
the server has noticed the closed socket.
"""

from __future__ import annotations

from contextlib import suppress

import psycopg
import trio

from ...protocol._base import iso_utc
from ..lock import DatabaseInUseError
from ..url import PostgresLocation
from .database import Connection, PoolSettings, connect

__all__ = ["LOCK_CLASS", "MIGRATING", "SERVING", "ServingLock"]

#: The first key of every advisory lock a2a-trio takes ("a2a!"); the second
#: says what for. Another application on the same database would have to pick
#: the same pair to collide.
LOCK_CLASS = int.from_bytes(b"a2a!", "big")
#: Held (for one transaction) while the schema is migrated.
MIGRATING = 1
#: Held (for the session) by the serving store.
SERVING = 2


class ServingLock:
    """A session-level advisory lock on a dedicated connection, held until released."""

    def __init__(self, location: PostgresLocation, settings: PoolSettings) -> None:
        self._location = location
        self._settings = settings
        self._conn: Connection | None = None

    async def acquire(self) -> None:
        """Take the lock, or raise :class:`DatabaseInUseError` at once. Idempotent."""
        if self._conn is None:
            self._conn = await trio.to_thread.run_sync(self._take)

    def release(self) -> None:
        """Let the database go, before this returns.

        Closing the session alone would drop the lock only once the server
        has processed the goodbye, a moment later: a server restarted at once
        could find its own lock still held. A lost connection held nothing.
        """
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with suppress(psycopg.Error):
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, SERVING))
        conn.close()

    def _take(self) -> Connection:
        conn = connect(self._location, self._settings)
        try:
            conn.autocommit = True
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, SERVING)
            ).fetchone()
            if row is None or not row[0]:
                raise DatabaseInUseError(self._refusal(_holder(conn)))
        except BaseException:
            conn.close()
            raise
        return conn

    def _refusal(self, holder: str) -> str:
        return (
            f"{self._location.display} is already served by {holder}, which holds"
            f" a2a-trio's serving lock (advisory lock {LOCK_CLASS}, {SERVING}). One server"
            " per PostgreSQL database is supported until cluster mode (issue 15): stop the"
            " other server, or give this one a database of its own (storage.url)"
        )


def _holder(conn: Connection) -> str:
    """Who holds the serving lock, as far as this role may see."""
    row = conn.execute(
        "SELECT l.pid, host(a.client_addr), a.application_name, a.backend_start"
        " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s"
        " AND l.objsubid = 2",
        (LOCK_CLASS, SERVING),
    ).fetchone()
    if row is None:  # let go between our try and this look
        return "another process"
    pid, client, application, since = row
    details = [f"PostgreSQL backend pid {pid}"]
    if client:
        details.append(f"client {client}")
    if application:
        details.append(f"application {application!r}")
    if since is not None:
        details.append(f"connected since {iso_utc(since, 'seconds')}")
    return f"another process ({', '.join(details)})"

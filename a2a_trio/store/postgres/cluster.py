"""Several processes on one PostgreSQL database: members, task leases and wake-ups.

Every statement of :class:`~a2a_trio.store.coordination.Coordination` lives
here, but those dealing with what dead members left (:mod:`.recovery`).
Liveness is judged by the database's clock alone (``now()``), so the members'
clocks may disagree: a member is alive while ``heartbeat_at + lease_seconds``
is in the database's future. Wake-ups are ``NOTIFY``s sent in the transaction
that changes what they announce, so none arrives before the change is
visible, and a rolled-back change sends none.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial

from ..coordination import (
    CANCELS,
    CHANNELS,
    DONE,
    QUEUE,
    Beat,
    Claim,
    Coordination,
    Orphan,
    QueuedExecution,
    QueuedFinish,
    QueuedOutcome,
    Report,
    Signal,
    WakeUps,
    done_payload,
)
from ..coordination import signal_payload as signal_payload
from ..fleet import FleetView
from .database import Connection, Database
from .fleet import REPORT, claim_duty, read_fleet, shared_setting, write_report
from .listener import Listener
from .recovery import LIVE, find_orphans

__all__ = ["LIVE", "SOMEONE_DEAD", "PostgresCoordination", "beat"]

#: When the lease of member ``m`` runs out, in UTC: the expression that the
#: index a2a_members_by_expiry holds (``timestamptz + interval`` is not immutable).
_EXPIRES = "((m.heartbeat_at AT TIME ZONE 'UTC') + m.lease_seconds * interval '1 second')"

#: Whether any member is dead: whether the earliest lease ran out. Through the
#: index this reads one member (once the members outgrow a page, when reading
#: them all would cost), not every member as ``EXISTS (... NOT LIVE)`` does: the
#: beats of N processes read N rows, not N².
SOMEONE_DEAD = (
    f"COALESCE((SELECT {_EXPIRES} <= (now() AT TIME ZONE 'UTC') FROM a2a_members m"
    f" ORDER BY {_EXPIRES} LIMIT 1), false)"
)

#: Wake the waiters of the leases let go in ``gone``: of those a member asked for
#: (``wanted_by``, which a waiting ``acquire`` sets), not every process for each.
_WAKE_WAITERS = """
    SELECT count(pg_notify('a2a_leases',
        CASE WHEN octet_length(payload) < 7900 THEN payload ELSE '[]' END))
    FROM (SELECT json_build_array(agent, task_id)::text AS payload FROM gone
        WHERE wanted_by IS NOT NULL) AS wake
"""

#: The leases that match ``{}`` let go, as ``gone`` (for :data:`_WAKE_WAITERS`).
_GONE = "gone AS (DELETE FROM task_leases WHERE {} RETURNING agent, task_id, wanted_by)"
_GONE_BY_TOKEN = _GONE.format("token = ANY(%s)")

#: Release leases by token and wake whoever waits for them, in one statement; and
#: delete the queued executions whose outcome their web process has heard: nothing
#: reads them again.
_RELEASE = f"""
    WITH heard AS (DELETE FROM queued_executions WHERE id = ANY(%s::bigint[])
        AND state = 'done'),
    {_GONE_BY_TOKEN}
    {_WAKE_WAITERS}
"""


#: Mark queued executions done, waking their web processes, and release leases
#: (waking their waiters), in one statement: a worker's executions that end
#: together cost one round trip.
_FINISH = f"""
    WITH f AS (SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[])
            AS f(id, answer, error, payload)),
        done AS (UPDATE queued_executions q SET state = 'done', answer = f.answer,
            error = f.error::json, updated_at = now() FROM f WHERE q.id = f.id
            RETURNING f.payload),
        {_GONE_BY_TOKEN}
    SELECT (SELECT count(pg_notify('{DONE}', payload)) FROM done), ({_WAKE_WAITERS})
"""


#: Queue executions of one agent, in the order given, waking the workers.
_ENQUEUE = """
    INSERT INTO queued_executions (agent, task_id, request, created_at, updated_at)
    SELECT %s, e.task_id, e.request::json, now(), now()
    FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS e(task_id, request, n)
    ORDER BY e.n
    RETURNING id, pg_notify(%s, %s)
"""


def new_member_id() -> str:
    """host:pid:random, so that a log line or a row says which process it was."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _PostgresWakeUps(WakeUps):
    def __init__(self, listener: Listener) -> None:
        self._listener = listener

    async def receive(self) -> Signal:
        notification = await self._listener.receive()
        return Signal.parse(notification.channel, notification.payload)


class PostgresCoordination(Coordination):
    """The members of one database, on the store's pool (and a connection to listen)."""

    def __init__(self, db: Database, *, lease_seconds: float = 10.0) -> None:
        self._db = db
        self.member = new_member_id()
        self.lease_seconds = lease_seconds
        #: The listening connection, while open: heartbeats run on it.
        self._listener: Listener | None = None

    async def join(self) -> None:
        await self._db.execute(
            "INSERT INTO a2a_members (id, host, pid, lease_seconds, started_at, heartbeat_at)"
            " VALUES (%s, %s, %s, %s, now(), now())",
            (self.member, socket.gethostname(), os.getpid(), self.lease_seconds),
        )

    async def heartbeat(self, queued_agents: list[str], report: Report | None = None) -> Beat:
        work = partial(
            beat,
            member=self.member,
            lease_seconds=self.lease_seconds,
            queued_agents=queued_agents,
            report=report,
        )
        listener = self._listener
        outcome = await (listener.run(work) if listener is not None else self._db.run(work))
        # Idle, the process holds its listening connection only.
        self._db.close_idle()
        return outcome

    async def leave(self) -> None:
        def leave(conn: Connection) -> None:
            conn.execute(_RELEASE_ALL, (self.member,))
            conn.execute("DELETE FROM lane_leases WHERE holder = %s", (self.member,))
            conn.execute("DELETE FROM a2a_members WHERE id = %s", (self.member,))

        await self._db.run(leave)

    async def acquire(self, agent: str, task_id: str, token: str, *, queue: bool = True) -> Claim:
        def acquire(conn: Connection) -> Claim:
            row = conn.execute(
                f"SELECT l.holder, {LIVE}, l.wanted_by FROM task_leases l"
                " LEFT JOIN a2a_members m ON m.id = l.holder"
                " WHERE l.agent = %s AND l.task_id = %s FOR UPDATE OF l",
                (agent, task_id),
            ).fetchone()
            if row is None:
                inserted = conn.execute(
                    "INSERT INTO task_leases (agent, task_id, holder, token, since)"
                    " VALUES (%s, %s, %s, %s, now()) ON CONFLICT (agent, task_id) DO NOTHING",
                    (agent, task_id, self.member, token),
                ).rowcount
                if inserted:
                    return Claim(True)
                # Taken between the look and the insert: by a live member, as far
                # as anyone knows yet; the caller waits for its release (which
                # wakes it: it asks for the next turn, as below).
                if queue:
                    conn.execute(
                        "UPDATE task_leases SET wanted_by = %s WHERE agent = %s"
                        " AND task_id = %s AND wanted_by IS NULL AND holder <> %s",
                        (self.member, agent, task_id, self.member),
                    )
                return Claim(False, holder="")
            holder, alive, wanted_by = row
            if holder != self.member and alive:
                if queue and wanted_by is None:  # the holder lets the next turn go to us
                    conn.execute(
                        "UPDATE task_leases SET wanted_by = %s WHERE agent = %s AND task_id = %s",
                        (self.member, agent, task_id),
                    )
                return Claim(False, holder=holder)
            if queue and holder == self.member and wanted_by not in (None, self.member):
                # Ours, but another member waits: its turn comes first (or that
                # member's work would wait as long as ours keeps coming).
                return Claim(False, holder=holder)
            conn.execute(
                "UPDATE task_leases SET holder = %s, token = %s, since = now(),"
                " wanted_by = CASE WHEN wanted_by = %s THEN NULL ELSE wanted_by END"
                " WHERE agent = %s AND task_id = %s",
                (self.member, token, self.member, agent, task_id),
            )
            return Claim(True, took_over=holder != self.member)

        return await self._db.run(acquire)

    async def release(self, tokens: list[str], *, heard: Sequence[int] = ()) -> None:
        if tokens or heard:
            await self._db.execute(_RELEASE, (list(heard), tokens))

    async def holder(self, agent: str, task_id: str) -> str | None:
        row = await self._db.fetchone(
            f"SELECT l.holder FROM task_leases l LEFT JOIN a2a_members m ON m.id = l.holder"
            f" WHERE l.agent = %s AND l.task_id = %s AND {LIVE}",
            (agent, task_id),
        )
        return None if row is None else str(row[0])

    async def request_cancel(self, agent: str, task_id: str, holder: str, owner: str) -> None:
        await self._db.execute(
            "SELECT pg_notify(%s, %s)",
            (CANCELS, signal_payload(agent, task_id, holder, owner)),
        )

    async def orphans(self, agents: list[str], *, unleased: bool = False) -> list[Orphan]:
        work = partial(
            find_orphans,
            member=self.member,
            agents=agents,
            unleased=unleased,
            lease_seconds=self.lease_seconds,
        )
        return await self._db.run(work)

    async def enqueue(self, agent: str, executions: Sequence[tuple[str, str]]) -> list[int]:
        # One statement, one round trip: the rows and their one wake-up (a NOTIFY
        # repeated in a transaction is sent once). Their ids ascend in the given order.
        task_ids, requests = [e[0] for e in executions], [e[1] for e in executions]
        params = (agent, task_ids, requests, QUEUE, signal_payload(agent))
        return sorted(int(row[0]) for row in await self._db.fetchall(_ENQUEUE, params))

    async def claim_queued(self, agents: list[str], limit: int) -> list[QueuedExecution]:
        rows = await self._db.fetchall(
            "UPDATE queued_executions SET state = 'claimed', claimed_by = %s, updated_at = now()"
            " WHERE id IN (SELECT id FROM queued_executions WHERE state = 'queued'"
            " AND agent = ANY(%s) ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)"
            " RETURNING id, agent, task_id, request::text",
            (self.member, agents, limit),
        )
        claimed = [QueuedExecution(int(r[0]), r[1], r[2], r[3]) for r in rows]
        return sorted(claimed, key=lambda execution: execution.id)

    async def mark_running(self, execution_ids: Sequence[int]) -> None:
        if execution_ids:
            await self._db.execute(
                "UPDATE queued_executions SET state = 'running', updated_at = now()"
                " WHERE id = ANY(%s)",
                (list(execution_ids),),
            )

    async def finish_queued(
        self, finishes: Sequence[QueuedFinish], *, release: Sequence[str] = ()
    ) -> None:
        if not finishes and not release:
            return
        ids = [finish.execution.id for finish in finishes]
        answers = [finish.answer for finish in finishes]
        errors = [None if f.error is None else json.dumps(f.error) for f in finishes]
        payloads = [done_payload(finish) for finish in finishes]
        await self._db.execute(_FINISH, (ids, answers, errors, payloads, list(release)))

    async def requeue(self, execution: QueuedExecution, *, restart: bool) -> None:
        def requeue(conn: Connection) -> None:
            conn.execute(
                "UPDATE queued_executions SET state = 'queued', claimed_by = NULL,"
                " updated_at = now(), request = CASE WHEN %s"
                " THEN (request::jsonb || '{\"restart\": true}')::json ELSE request END"
                " WHERE id = %s AND state <> 'done'",  # not once found dead and ended
                (restart, execution.id),
            )
            conn.execute("SELECT pg_notify(%s, %s)", (QUEUE, signal_payload(execution.agent)))

        await self._db.run(requeue)

    async def queued_outcome(self, execution_id: int) -> QueuedOutcome:
        row = await self._db.fetchone(
            "SELECT state, answer, error::text FROM queued_executions WHERE id = %s",
            (execution_id,),
        )
        if row is None:
            return QueuedOutcome(True, error={"code": -32603, "message": "The work was lost."})
        state, answer, error = row
        return QueuedOutcome(state == "done", answer, None if error is None else json.loads(error))

    async def claim_lane(self, agent: str, task_id: str, config_id: str) -> bool:
        claimed = await self._db.execute(
            "INSERT INTO lane_leases AS l (agent, task_id, config_id, holder, since)"
            " VALUES (%s, %s, %s, %s, now()) ON CONFLICT (agent, task_id, config_id)"
            " DO UPDATE SET holder = EXCLUDED.holder, since = now()"
            " WHERE l.holder = EXCLUDED.holder OR NOT EXISTS"
            f" (SELECT FROM a2a_members m WHERE m.id = l.holder AND {LIVE})",
            (agent, task_id, config_id, self.member),
        )
        return claimed > 0

    async def release_lane(self, agent: str, task_id: str, config_id: str) -> None:
        await self._db.execute(
            "DELETE FROM lane_leases WHERE agent = %s AND task_id = %s AND config_id = %s"
            " AND holder = %s",
            (agent, task_id, config_id, self.member),
        )

    async def report(self, role: str, agents: list[str], stats: dict[str, float]) -> None:
        await write_report(self._db, self.member, role, agents, stats)

    async def fleet(self) -> FleetView:
        return await read_fleet(self._db)

    async def shared_setting(self, key: str, proposed: str) -> tuple[str, bool]:
        return await shared_setting(self._db, key, proposed)

    async def claim_duty(self, duty: str) -> bool:
        return await claim_duty(self._db, duty, self.member)

    @asynccontextmanager
    async def wake_ups(self, channels: Sequence[str] = CHANNELS) -> AsyncIterator[WakeUps]:
        async with Listener.open(self._db.location, channels, self._db.settings) as listener:
            self._listener = listener
            try:
                yield _PostgresWakeUps(listener)
            finally:
                self._listener = None


def beat(
    conn: Connection,
    member: str,
    lease_seconds: float,
    queued_agents: list[str],
    report: Report | None,
) -> Beat:
    """One heartbeat of ``member``, in the caller's transaction: what it found.

    It renews its own row and asks, through indexes, whether a member is dead,
    work waits or webhooks are pending: a few rows, however many members there
    are (under a few hundred, the planner reads the table's few pages whole).
    """
    # Alive (judged on the row as it was), it is renewed with its report in the
    # same statement: one row version per beat.
    renewal, values = "heartbeat_at = now()", []
    if report is not None:
        role, agents, stats = report
        renewal += ", role = %s, agents = %s, stats = %s::json"
        values = [role, ",".join(agents), json.dumps(stats)]
    alive = (
        conn.execute(
            f"UPDATE a2a_members m SET {renewal} WHERE id = %s AND {LIVE} RETURNING true",
            (*values, member),
        ).fetchone()
        is not None
    )
    if not alive:
        # Found dead (or late: nobody may have noticed yet, but anybody could
        # have): what it held is given up, and it starts again holding nothing.
        conn.execute(_RELEASE_ALL, (member,))
        conn.execute(
            "INSERT INTO a2a_members (id, host, pid, lease_seconds, started_at,"
            " heartbeat_at) VALUES (%s, %s, %s, %s, now(), now())"
            " ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()",
            (member, socket.gethostname(), os.getpid(), lease_seconds),
        )
        if values:
            conn.execute(REPORT, (*values, member))
    # Index probes that stop at the first row found.
    found = conn.execute(
        f"SELECT {SOMEONE_DEAD},"
        " EXISTS (SELECT FROM queued_executions WHERE state = 'queued'"
        " AND agent = ANY(%s)),"
        " EXISTS (SELECT FROM push_outbox WHERE state = 'pending')",
        (queued_agents,),
    ).fetchone()
    assert found is not None
    return Beat(alive, bool(found[0]), bool(found[1]), bool(found[2]))


#: Let every lease of a member go, waking their waiters.
_RELEASE_ALL = f"WITH {_GONE.format('holder = %s')} {_WAKE_WAITERS}"

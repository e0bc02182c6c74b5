"""What dead members of a PostgreSQL cluster left: their tasks, queued executions and rows.

:func:`find_orphans` is :meth:`.cluster.PostgresCoordination.orphans`' one
transaction: it marks dead the members on this host whose process is gone
(:func:`_bury_local_dead`), finds the tasks nobody live holds, hands the queued
executions of dead workers back or ends them, deletes the queue's rows whose
outcome nobody will hear, and forgets members long dead.
"""

from __future__ import annotations

import json
import os
import socket

from ..coordination import DONE, QUEUE, Orphan
from ..queries import PAUSED_STATES, UNFINISHED_STATES, continued
from .database import Connection

__all__ = ["LIVE", "find_orphans"]

#: Whether the member ``m`` (a row of a2a_members, or NULL) is alive.
LIVE = "(m.id IS NOT NULL AND m.heartbeat_at + m.lease_seconds * interval '1 second' > now())"

_CONTINUED = continued("e.payload->>'role'")

#: At start-up: the agents' unfinished tasks without a live holder (none
#: waiting in the queue), and every lease without one. Reads every unfinished
#: task (index tasks_by_state), the logs' ends of the paused ones (a follow-up
#: under way: ``queries.continued``) and every lease: once per start, not per beat.
_UNLEASED = f"""
    SELECT t.agent, t.id FROM tasks t
    LEFT JOIN task_leases l ON l.agent = t.agent AND l.task_id = t.id
    LEFT JOIN a2a_members m ON m.id = l.holder
    WHERE (t.state = ANY(%s) OR (t.state = ANY(%s) AND {_CONTINUED}))
    AND t.agent = ANY(%s) AND NOT {LIVE}
    -- Handed back to the queue by a stopping worker: the next one runs it.
    AND NOT EXISTS (SELECT FROM queued_executions q WHERE q.agent = t.agent
        AND q.task_id = t.id AND q.state IN ('queued', 'claimed'))
    UNION
    SELECT l.agent, l.task_id FROM task_leases l
    LEFT JOIN a2a_members m ON m.id = l.holder
    WHERE l.agent = ANY(%s) AND NOT {LIVE}
    ORDER BY 1, 2
"""


def _recover_queued(conn: Connection) -> None:
    """Queued executions of dead workers: again to the queue if they had not started, else done.

    One that had started may have done anything (called a model, sent a
    mail): it is never run twice. Its task, if it made one, ends FAILED with
    its lease; its web process hears that it is done.
    """
    dead = (
        "claimed_by IN (SELECT m.id FROM a2a_members m WHERE NOT"
        f" {LIVE}) OR claimed_by NOT IN (SELECT id FROM a2a_members)"
    )
    conn.execute(
        "WITH again AS (UPDATE queued_executions SET state = 'queued', claimed_by = NULL,"
        f" updated_at = now() WHERE state = 'claimed' AND ({dead}) RETURNING agent)"
        " SELECT count(pg_notify(%s, json_build_array(agent)::text))"
        " FROM (SELECT DISTINCT agent FROM again) AS waiting",
        (QUEUE,),
    )
    stopped = json.dumps(
        {"code": -32603, "message": "The worker running this message stopped before it ended."}
    )
    conn.execute(
        "WITH ended AS (UPDATE queued_executions SET state = 'done', error = %s::json,"
        f" updated_at = now() WHERE state = 'running' AND ({dead})"
        " RETURNING json_build_array(agent, task_id, id)::text AS payload)"
        " SELECT count(pg_notify(%s,"
        " CASE WHEN octet_length(payload) < 7900 THEN payload ELSE '[]' END)) FROM ended",
        (stopped, DONE),
    )


def _bury_local_dead(conn: Connection, me: str) -> None:
    """Members on this host whose process is gone are dead now, not a lease from now.

    A process restarted after a crash (by systemd, say) then ends at once the
    tasks its predecessor left running. A pid taken again by another process
    only delays that to the lease's end.
    """
    rows = conn.execute(
        f"SELECT m.id, m.pid FROM a2a_members m WHERE m.host = %s AND m.id <> %s AND {LIVE}",
        (socket.gethostname(), me),
    ).fetchall()
    gone = [member for member, pid in rows if not _process_exists(pid)]
    if gone:
        conn.execute(
            "UPDATE a2a_members SET heartbeat_at = '-infinity' WHERE id = ANY(%s)", (gone,)
        )


def _process_exists(pid: int) -> bool:
    """Whether a process ``pid`` runs here (a zombie, killed but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (command) state ...": the command may hold spaces and parentheses.
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):  # no /proc (macOS, say): as far as we know, alive
        return True


def find_orphans(
    conn: Connection, *, member: str, agents: list[str], unleased: bool, lease_seconds: float
) -> list[Orphan]:
    """The agents' tasks whose holder died (``unleased``: and those no one holds), once
    what the dead left is dealt with (see the module's docstring)."""
    _bury_local_dead(conn, member)
    if unleased:
        rows = conn.execute(
            _UNLEASED, (UNFINISHED_STATES, PAUSED_STATES, agents, agents)
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT l.agent, l.task_id FROM a2a_members m"
            " JOIN task_leases l ON l.holder = m.id"
            f" WHERE NOT {LIVE} AND l.agent = ANY(%s) ORDER BY 1, 2",
            (agents,),
        ).fetchall()
    _recover_queued(conn)
    # Done for ten leases, a queued execution's outcome has been heard or
    # never will be (its web process died): a web process deletes those it
    # hears (Coordination.release), these are what the dead left.
    conn.execute(
        "DELETE FROM queued_executions WHERE id IN (SELECT id FROM queued_executions"
        " WHERE state = 'done' AND updated_at + 10 * %s * interval '1 second' < now()"
        " LIMIT 10000)",
        (lease_seconds,),
    )
    # Members dead for ten leases that hold nothing more are forgotten.
    conn.execute(
        "DELETE FROM a2a_members m WHERE m.heartbeat_at"
        " + 10 * m.lease_seconds * interval '1 second' < now()"
        " AND NOT EXISTS (SELECT FROM task_leases l WHERE l.holder = m.id)"
        " AND NOT EXISTS (SELECT FROM lane_leases l WHERE l.holder = m.id)"
        " AND NOT EXISTS (SELECT FROM queued_executions q WHERE q.claimed_by = m.id"
        " AND q.state IN ('claimed', 'running'))"
    )
    return [Orphan(agent, task_id) for agent, task_id in rows]

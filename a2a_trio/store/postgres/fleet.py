"""The statements of a member's report and of the deployment's view (a2a_trio.store.fleet)."""

from __future__ import annotations

import json

from ..fleet import FleetView, MemberView
from ..records import order_key
from .database import Connection, Database

__all__ = ["claim_duty", "read_fleet", "shared_setting", "write_report"]

_LIVE = "m.heartbeat_at + m.lease_seconds * interval '1 second' > now()"

_MEMBERS = f"""
    SELECT m.id, m.host, m.pid, m.role, m.agents, m.started_at,
        extract(epoch FROM now() - m.heartbeat_at), m.stats::text,
        (SELECT count(*) FROM task_leases l WHERE l.holder = m.id),
        (SELECT count(*) FROM queued_executions q
            WHERE q.claimed_by = m.id AND q.state IN ('claimed', 'running'))
    FROM a2a_members m WHERE {_LIVE} ORDER BY m.role, m.host, m.pid
"""
_QUEUED = (
    "SELECT agent, state, count(*) FROM queued_executions"
    " WHERE state IN ('queued', 'claimed', 'running') GROUP BY agent, state"
)


#: A member's report of itself: role, agents (comma-separated), counters (JSON), its id.
REPORT = "UPDATE a2a_members SET role = %s, agents = %s, stats = %s::json WHERE id = %s"


async def write_report(
    db: Database, member: str, role: str, agents: list[str], stats: dict[str, float]
) -> None:
    await db.execute(REPORT, (role, ",".join(agents), json.dumps(stats), member))


async def shared_setting(db: Database, key: str, proposed: str) -> tuple[str, bool]:
    """The value of ``key`` in a2a_settings, ``proposed`` if none was there; and whether it was."""

    def settle(conn: Connection) -> tuple[str, bool]:
        made = conn.execute(
            "INSERT INTO a2a_settings (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
            (key, proposed),
        ).rowcount
        row = conn.execute("SELECT value FROM a2a_settings WHERE key = %s", (key,)).fetchone()
        assert row is not None, "the row was inserted or was there"
        return str(row[0]), bool(made)

    return await db.run(settle)


async def claim_duty(db: Database, duty: str, member: str) -> bool:
    """Whether ``member`` does ``duty``: the first live member to ask, until it is dead."""
    row = await db.fetchone(
        "INSERT INTO a2a_settings (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE"
        " SET value = EXCLUDED.value WHERE NOT EXISTS (SELECT FROM a2a_members m"
        f" WHERE m.id = a2a_settings.value AND {_LIVE}) RETURNING value",
        (f"duty:{duty}", member),
    )
    return row is not None


async def read_fleet(db: Database) -> FleetView:
    def read(conn: Connection) -> FleetView:
        members = [
            MemberView(
                id=row[0],
                host=row[1],
                pid=int(row[2]),
                role=row[3],
                agents=[name for name in row[4].split(",") if name],
                started_at=order_key(row[5]),
                heartbeat_age=max(0.0, float(row[6])),
                stats=json.loads(row[7]) if row[7] else {},
                leases=int(row[8]),
                executions=int(row[9]),
            )
            for row in conn.execute(_MEMBERS).fetchall()
        ]
        queued = {(row[0], row[1]): int(row[2]) for row in conn.execute(_QUEUED).fetchall()}
        leases = conn.execute("SELECT count(*) FROM task_leases").fetchone()
        return FleetView(members, queued, int(leases[0]) if leases else 0)

    return await db.run(read)

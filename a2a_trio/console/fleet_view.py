"""The console's view of the whole deployment: its counters, its members, where webhooks go.

On PostgreSQL every member (web process or worker) reports its counters with
its heartbeat (:meth:`~a2a_trio.store.coordination.Coordination.report`);
:func:`deployment_counters` adds them up, this process's own read live, and
keeps each member's share. With several databases a process is a member of
each one it serves (a row, and an id, in each): :func:`processes` reads every
database's members and makes one process of the rows with the same host and
pid, naming the databases it serves. Without a cluster (SQLite) the deployment
is this process. :func:`webhook_hosts` names where dead letters were going by host
only: never the path, the query, a token or credentials.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..protocol import TaskState
from ..store import Delivery, PushConfigs
from ..store.browse import OutboxSummary
from ..store.fleet import FleetView, MemberView

if TYPE_CHECKING:
    from ..runtime.cluster import Cluster
    from ..server import A2AApp

__all__ = [
    "DatabaseFleet",
    "Process",
    "deployment_counters",
    "fleets",
    "members",
    "outbox_of",
    "processes",
    "served_address",
    "task_counts_of",
    "webhook_hosts",
]

#: The counters each member reports, summed over the deployment.
SUMMED = ("messagesPerSecond", "eventsPerSecond", "runningExecutions", "openStreams")


@dataclass(frozen=True, slots=True)
class DatabaseFleet:
    """The members of one database this process is a member of, as it reads them."""

    #: The database, as readiness and the logs name it.
    database: str
    cluster: Cluster
    view: FleetView


@dataclass(frozen=True, slots=True)
class Process:
    """One process of the deployment: its member rows of every database, made one.

    ``member`` is its row in the first database listing it (the app's own
    when it serves that), with its agents, leases and claimed executions added
    up over the databases and the latest heartbeat's age the oldest of them.
    """

    member: MemberView
    #: The databases it is a member of, the app's own first.
    databases: list[str]
    #: Whether it is this process.
    me: bool


async def fleets(app: A2AApp) -> list[DatabaseFleet]:
    """Each database's members, of every database where this process has a cluster."""
    return [
        DatabaseFleet(
            database.store.display, database.cluster, await database.cluster.coordination.fleet()
        )
        for database in app.databases.all
        if database.cluster is not None
    ]


async def processes(
    app: A2AApp, mine: dict[str, float], read: list[DatabaseFleet] | None = None
) -> list[Process]:
    """Every live process of the deployment once (rows with one host and pid are one),
    from the databases' members ``read`` if given (else read here)."""
    if read is None:
        read = await fleets(app)
    if not read:  # the deployment is this process
        alone = MemberView(
            id="",
            host=socket.gethostname(),
            pid=os.getpid(),
            role=app.role,
            agents=list(app.mounts),
            started_at=_STARTED,
            heartbeat_age=0.0,
            leases=0,
            executions=0,
            stats=mine,
        )
        return [Process(alone, [database.store.display for database in app.databases.all], True)]
    mine_ids = {fleet.cluster.member for fleet in read}
    merged: dict[tuple[str, int], Process] = {}
    for fleet in read:
        for row in fleet.view.members:
            me = row.id in mine_ids
            if me:
                row = replace(row, stats=mine)
            seen = merged.get((row.host, row.pid))
            if seen is None:
                merged[row.host, row.pid] = Process(row, [fleet.database], me)
                continue
            first = seen.member
            merged[row.host, row.pid] = Process(
                replace(
                    first,
                    role=first.role or row.role,
                    agents=[*first.agents, *(a for a in row.agents if a not in first.agents)],
                    heartbeat_age=max(first.heartbeat_age, row.heartbeat_age),
                    leases=first.leases + row.leases,
                    executions=first.executions + row.executions,
                    stats=first.stats or row.stats,
                ),
                [*seen.databases, fleet.database],
                seen.me or me,
            )
    # A database without a cluster (SQLite) has no member rows: this process
    # alone serves it, and names it among its own, in the app's order.
    order = [database.store.display for database in app.databases.all]
    own = [database.store.display for database in app.databases.all if database.cluster is None]
    return [
        replace(p, databases=sorted([*p.databases, *own], key=order.index)) if p.me else p
        for p in merged.values()
    ]


async def deployment_counters(app: A2AApp, mine: dict[str, float]) -> dict[str, Any]:
    """The summed counters of every process, with ``members``: each one's share."""
    shares = [_share(p.member, p.member.stats) for p in await processes(app, mine)]
    totals: dict[str, Any] = {name: sum(s[name] for s in shares) for name in SUMMED}
    totals["members"] = shares
    return totals


async def outbox_of(app: A2AApp) -> OutboxSummary:
    """The outboxes of every database of the app, added up (the oldest pending of all)."""
    summaries = [await database.store.outbox_summary() for database in app.databases.all]
    if len(summaries) == 1:
        return summaries[0]
    pending = [s.oldest_pending for s in summaries if s.oldest_pending is not None]
    return OutboxSummary(
        pending=sum(s.pending for s in summaries),
        failed=sum(s.failed for s in summaries),
        oldest_pending=min(pending) if pending else None,
    )


async def task_counts_of(app: A2AApp) -> dict[tuple[str, TaskState], int]:
    """Each agent's tasks by state, read from the database the agent lives in."""
    by_store = {}
    counts: dict[tuple[str, TaskState], int] = {}
    for mount in app.mounts.values():
        store = mount.host.store
        if id(store) not in by_store:
            by_store[id(store)] = await store.task_counts()
        for (agent, state), count in by_store[id(store)].items():
            if agent == mount.name:
                counts[agent, state] = count
    return counts


async def members(app: A2AApp, mine: dict[str, float]) -> list[dict[str, Any]]:
    """Every live process: host, pid, role, agents, databases, start, heartbeat age,
    what it holds."""
    return [
        {
            "id": member.id,
            "host": member.host,
            "pid": member.pid,
            "role": member.role or "web",
            "agents": member.agents,
            "databases": process.databases,
            "startedAt": member.started_at,
            "heartbeatAgeSeconds": round(member.heartbeat_age, 3),
            "runningExecutions": int(_share(member, member.stats)["runningExecutions"]),
            "executionsClaimed": member.executions,
            "leases": member.leases,
            "me": process.me,
        }
        for process in await processes(app, mine)
        for member in [process.member]
    ]


def _share(member: MemberView, stats: dict[str, float]) -> dict[str, Any]:
    share: dict[str, Any] = {"id": member.id, "host": member.host, "pid": member.pid}
    share["role"] = member.role or "web"
    for name in SUMMED:
        value = stats.get(name, 0.0)
        share[name] = value if isinstance(value, int | float) else 0.0
    return share


async def webhook_hosts(
    store: PushConfigs, deliveries: Iterable[Delivery]
) -> dict[int, str | None]:
    """The host of each delivery's webhook (None: its config is gone)."""
    hosts: dict[int, str | None] = {}
    configs: dict[tuple[str, str, str], str | None] = {}
    for delivery in deliveries:
        key = (delivery.agent, delivery.task_id, delivery.config_id)
        if key not in configs:
            config = await store.get_push_config(*key, owner=None)
            configs[key] = urlsplit(config.url).hostname if config is not None else None
        hosts[delivery.id] = configs[key]
    return hosts


def served_address() -> str | None:
    """``http://HOST:PORT`` of hypercorn's ``--bind`` when this process is its worker.

    The console's address logged at start is then one a browser can open
    (0.0.0.0 and :: become this host's name).
    """
    argv = sys.argv
    if not argv or "hypercorn" not in argv[0]:
        return None
    bind = "127.0.0.1:8000"  # hypercorn's default
    for index, arg in enumerate(argv):
        if arg in ("-b", "--bind") and index + 1 < len(argv):
            bind = argv[index + 1]
            break
        if arg.startswith("--bind="):
            bind = arg.split("=", 1)[1]
            break
    if bind.startswith(("unix:", "fd://")):
        return None
    host, _, port = bind.rpartition(":")
    if host.strip("[]") in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return f"http://{host}:{port}"


_STARTED = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())

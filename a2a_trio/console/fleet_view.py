"""The console's view of the whole deployment: its counters, its members, where webhooks go.

On PostgreSQL every member (web process or worker) reports its counters with
its heartbeat (:meth:`~a2a_trio.store.coordination.Coordination.report`);
:func:`deployment_counters` adds them up, this process's own read live, and
keeps each member's share. Without a cluster (SQLite) the deployment is this
process. :func:`webhook_hosts` names where dead letters were going by host
only: never the path, the query, a token or credentials.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..protocol import TaskState
from ..store import Delivery, PushConfigs
from ..store.browse import OutboxSummary
from ..store.fleet import MemberView

if TYPE_CHECKING:
    from ..server import A2AApp

__all__ = [
    "deployment_counters",
    "members",
    "outbox_of",
    "served_address",
    "task_counts_of",
    "webhook_hosts",
]

#: The counters each member reports, summed over the deployment.
SUMMED = ("messagesPerSecond", "eventsPerSecond", "runningExecutions", "openStreams")


async def deployment_counters(app: A2AApp, mine: dict[str, float]) -> dict[str, Any]:
    """The summed counters of every member, with ``members``: each one's share."""
    me = _me(app)
    shares = [_share(m, mine if m.id == me else m.stats) for m in await _members(app, mine)]
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
    """Every live member: host, pid, role, agents, start, heartbeat age, what it holds."""
    me = _me(app)
    return [
        {
            "id": member.id,
            "host": member.host,
            "pid": member.pid,
            "role": member.role or "web",
            "agents": member.agents,
            "startedAt": member.started_at,
            "heartbeatAgeSeconds": round(member.heartbeat_age, 3),
            "runningExecutions": int(
                _share(member, mine if member.id == me else member.stats)["runningExecutions"]
            ),
            "executionsClaimed": member.executions,
            "leases": member.leases,
            "me": member.id == me,
        }
        for member in await _members(app, mine)
    ]


async def _members(app: A2AApp, mine: dict[str, float]) -> list[MemberView]:
    cluster = app.cluster
    if cluster is None:  # the deployment is this process
        return [
            MemberView(
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
        ]
    return (await cluster.coordination.fleet()).members


def _me(app: A2AApp) -> str:
    return app.cluster.member if app.cluster is not None else ""


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

"""Liveness and readiness, for load balancers and orchestrators (docs/deployment.md).

``GET /_a2a/health/live`` answers 200 while the process serves HTTP at all.
``GET /_a2a/health/ready`` answers 200 when this process can take work: every
agent's host runs, the database answers at this version's schema, its
writes are not refused for lack of space, and (with several processes on
PostgreSQL) the wake-up connection listens; else 503 with the check that
failed. Both are public and say nothing of tasks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import trio

from ..runtime.cluster import Cluster
from ..store import Store
from .mount import AgentMount

__all__ = ["HEALTH_PATH", "liveness", "readiness"]

HEALTH_PATH = "/_a2a/health"
#: How long the database may take to answer the readiness check.
CHECK_TIMEOUT = 2.0


def liveness() -> tuple[int, str]:
    """(status, JSON body) of the liveness check: alive whenever it answers."""
    return 200, json.dumps({"status": "alive"})


async def readiness(
    mounts: Mapping[str, AgentMount], databases: Sequence[tuple[Store, Cluster | None]]
) -> tuple[int, str]:
    """(status, JSON body) of the readiness check: each check "ok" or why not.

    It checks the hosts of ``mounts`` and each of ``databases``: its store
    and, when this process is one of several on it, its ``cluster``
    membership. The first database's checks are named ``database``,
    ``storage`` and ``listener``; another's carry its name after a space
    (``database host:5432/db``).
    """
    checks: dict[str, str] = {}
    stopped = [name for name, mount in mounts.items() if not mount.host.running]
    checks["agents"] = f"not running: {', '.join(sorted(stopped))}" if stopped else "ok"
    for index, (store, cluster) in enumerate(databases):
        suffix = f" {store.display}" if index else ""
        checks.update(
            {f"{name}{suffix}": outcome for name, outcome in (await _database(store, cluster))}
        )
    ready = all(outcome == "ok" for outcome in checks.values())
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    return (200 if ready else 503), json.dumps(body)


async def _database(store: Store, cluster: Cluster | None) -> list[tuple[str, str]]:
    checks: list[tuple[str, str]] = []
    try:
        with trio.fail_after(CHECK_TIMEOUT):
            await store.check()
    except trio.TooSlowError:
        checks.append(("database", f"no answer within {CHECK_TIMEOUT:g} s"))
    except Exception as error:
        checks.append(("database", str(error) or type(error).__name__))
    else:
        checks.append(("database", "ok"))
    # Reads (the check above) still answer on a full disk; writes do not.
    full = store.space.full
    checks.append(("storage", f"writes refused for lack of space ({full})" if full else "ok"))
    if cluster is not None:
        checks.append(("listener", "ok" if cluster.listening else "not listening"))
    return checks

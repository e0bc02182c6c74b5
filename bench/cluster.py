"""Several processes on one PostgreSQL: ``python -m bench.cluster [options]``.

In one run, each configuration started fresh on a new database of its own
(``<prefix><uuid hex>``, created before and dropped after):

1. **Cross-process latency, a2a-trio.** Two :mod:`bench.cluster_server`
   processes, A and B, on one database. The harness sends ``tick N ...`` to A
   (SendMessage, ``returnImmediately``) and subscribes to the task on B
   (SubscribeToTask, JSON-RPC SSE, httpx). A's executor enqueues N WORKING
   updates ``--interval-ms`` apart, each carrying ``time.time()`` taken just
   before it is enqueued; B's frames are stamped with ``time.time()`` when their
   ``data:`` line is read. Latency = arrival - stamp: the enqueue, A's commit
   (and NOTIFY), B's wake-up and read from the log, and the SSE frame to the
   client. The clock is the same (one machine). A second subscription, on A
   itself, shows the same path without the second process ("on A": enqueue,
   commit, local fan-out) and, per tick, what B adds (B - A). Ticks enqueued
   before both streams' first frames are left out; a tick after a stream's
   opening snapshot that never arrives is reported as missing.
2. **The same for a2a-sdk 1.3's cluster mode**: two
   :mod:`bench.reference_cluster_server` replicas (``VersionedDatabaseTaskStore``
   + ``DatabaseTaskEventStream`` with its default 0.5 s poll) on one database.
3. **Throughput**: SendMessage (JSON-RPC, blocking, the echo agent; wrk with
   ``bench/lua/a2a.lua`` as in ``python -m bench``) against one process and
   against two processes on one database. Each process has its own port and
   its own wrk (16 connections split evenly: 8 + 8), as a round-robin load
   balancer would split them; the wrk instances run at once and their verified
   responses are added. The CPU each request costs is the servers' CPU time
   (``utime + stime`` from ``/proc/PID/stat``, summed over the configuration's
   processes) during the measured runs, divided by the verified responses;
   PostgreSQL's is that of the backends connected to the configuration's
   database (``pg_stat_activity``), measured the same way.

A configuration is a list of :class:`Member` commands (:func:`running_members`
starts any such list on one database); the "2 web processes + 1 worker"
row is one more entry in :data:`THROUGHPUT_CONFIGURATIONS` whose worker member
has ``web=False`` (started, watched and measured, but given no wrk).

Pinning as in ``python -m bench``: servers on the first core; wrk, this
harness and PostgreSQL on the second (``--no-pin``: nothing pinned). Only
127.0.0.1 is contacted; every phase is bounded.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import math
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import trio

from .common import (
    JSONRPC_PATH,
    PROTOCOL_VERSION,
    RESULTS_DIR,
    VERSION_HEADER,
    cpu_seconds,
    parse_tick,
    raise_nofile_limit,
)
from .conversations import (
    ConversationSettings,
    DatabaseProbe,
    render_conversations,
    run_conversations,
)
from .postgres import DEFAULT_PG_URL, LocalPostgres, PostgresError
from .run import _cpu_model, _git_state, choose_cores, log, pinned_to, postgres_pinned
from .servers import ServerKind, ServerProcess, ServerStartError, free_port, spawn
from .wrk import WrkCase, run_wrk, wrk_version

__all__ = ["Member", "main", "running_members"]

DEFAULT_DB_PREFIX = "bench_cluster_"
#: Each wait for a stream's end or a server's answer is bounded by this.
STREAM_BOUND_S = 60.0
TERMINAL_STATES = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
#: Connections for the throughput case, split evenly over the web processes.
CONNECTIONS = 16

TRIO_KIND = ServerKind(
    "a2a-trio", "bench.cluster_server", store="postgres", description="bench.cluster_server"
)
REFERENCE_KIND = ServerKind(
    "reference",
    "bench.reference_cluster_server",
    store="postgres",
    description="bench.reference_cluster_server",
)


@dataclass(frozen=True, slots=True)
class Member:
    """One process of a configuration: what to run, and whether clients talk to it."""

    name: str
    kind: ServerKind
    #: True: serves HTTP on its port (waited for by its card, given a wrk).
    web: bool = True
    extra_args: tuple[str, ...] = ()

    def command(self, port: int, database: str) -> list[str]:
        return [*self.kind.command(port, database), *self.extra_args]


def _launch(member: Member, database: str, workdir: Path, core: int | None) -> ServerProcess:
    port = free_port()
    log_path = workdir / f"{member.name}-{uuid.uuid4().hex[:8]}.log"
    env = {**os.environ, "A2A_TRIO_DATABASE": database}
    process, handle = spawn(member.command(port, database), env, log_path, core)
    server = ServerProcess(member.kind, port, process, log_path, handle)
    try:
        if member.web:
            server.wait_until_ready()
        else:
            time.sleep(1.0)
            if not server.alive():
                raise ServerStartError(f"{member.name} exited:\n{server.log_tail()}")
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running_members(
    members: Sequence[Member],
    postgres: LocalPostgres,
    workdir: Path,
    core: int | None,
    prefix: str,
) -> Iterator[tuple[list[ServerProcess], str]]:
    """Start ``members`` one after another on a new database; stop them and drop it after.

    One at a time, so that the first creates the tables before the next starts.
    Yields the started processes and the database's name.
    """
    name = postgres.create_database(prefix)
    database = postgres.url_for(name)
    started: list[ServerProcess] = []
    try:
        for member in members:
            started.append(_launch(member, database, workdir, core))
        if postgres.table_count(name) == 0:
            raise ServerStartError(f"the servers created no table in {name}")
        yield started, name
    finally:
        for server in started:
            server.stop()
        try:
            postgres.drop_database(name)
        except PostgresError as error:
            log(f"could not drop {name}: {error}")


# --- statistics ---------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of one figure over the rounds."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


# --- cross-process latency ------------------------------------------------------------------


def _message(text: str) -> dict[str, Any]:
    return {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "parts": [{"text": text}],
    }


def _status_text(result: dict[str, Any]) -> tuple[str | None, str]:
    """(state, message text) of a status update frame, or (None, "")."""
    update = result.get("statusUpdate") or result.get("task")
    if update is None:
        return None, ""
    status = update["status"]
    parts = (status.get("message") or {}).get("parts") or [{}]
    return status.get("state"), str(parts[0].get("text", ""))


@dataclass
class Subscription:
    """What one SubscribeToTask stream received: when, and each tick's arrival."""

    started: float | None = None
    arrivals: dict[int, float] = field(default_factory=dict)
    stamps: dict[int, float] = field(default_factory=dict)
    last_state: str | None = None
    #: The tick in the status of the snapshot the stream began with (0: none yet).
    snapshot_tick: int = 0

    def missing(self, events: int) -> list[int]:
        """Ticks after the snapshot's that never arrived."""
        return sorted(set(range(self.snapshot_tick + 1, events + 1)) - set(self.arrivals))


async def _subscribe(http: httpx.AsyncClient, url: str, task_id: str, into: Subscription) -> None:
    """Read the task's SSE frames from ``url`` until it ends; note each tick's arrival."""
    body = {"jsonrpc": "2.0", "id": "sub", "method": "SubscribeToTask", "params": {"id": task_id}}
    async with http.stream(
        "POST", url + JSONRPC_PATH, json=body, headers={"Accept": "text/event-stream"}
    ) as response:
        if response.status_code != 200:
            raise RuntimeError(f"SubscribeToTask answered {response.status_code}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            arrived = time.time()
            data = json.loads(line[5:])
            if "error" in data:
                raise RuntimeError(f"SubscribeToTask failed: {data['error']}")
            if into.started is None:
                into.started = arrived
            into.last_state, text = _status_text(data["result"])
            tick = parse_tick(text)
            if "task" in data["result"]:
                # The snapshot a subscription starts with: ticks up to its own are
                # not streamed (they were recorded before the subscription).
                into.snapshot_tick = tick[0] if tick is not None else 0
            elif tick is not None:
                number, stamp = tick
                if number in into.arrivals:
                    raise RuntimeError(f"tick {number} arrived twice on {url}")
                into.arrivals[number] = arrived
                into.stamps[number] = stamp
            if into.last_state in TERMINAL_STATES:
                return


def _figures(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": percentile(values, 50),
        "p99_ms": percentile(values, 99),
        "max_ms": max(values),
    }


async def _one_round(
    sender: str, subscriber: str, events: int, interval_ms: int, delay_ms: int
) -> dict[str, Any]:
    """Send ``tick`` to A; subscribe on B (remote) and on A (local) at once."""
    headers = {VERSION_HEADER: PROTOCOL_VERSION}
    async with httpx.AsyncClient(trust_env=False, timeout=30, headers=headers) as http:
        body = {
            "jsonrpc": "2.0",
            "id": "send",
            "method": "SendMessage",
            "params": {
                "message": _message(f"tick {events} {interval_ms} {delay_ms}"),
                "configuration": {"returnImmediately": True},
            },
        }
        answer = (await http.post(sender + JSONRPC_PATH, json=body)).json()
        if "error" in answer:
            raise RuntimeError(f"SendMessage on the sender failed: {answer['error']}")
        task_id = answer["result"]["task"]["id"]
        remote, local = Subscription(), Subscription()
        with trio.fail_after(STREAM_BOUND_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_subscribe, http, subscriber, task_id, remote)
                nursery.start_soon(_subscribe, http, sender, task_id, local)
    for where, subscription in (("B", remote), ("A", local)):
        if subscription.last_state != "TASK_STATE_COMPLETED":
            raise RuntimeError(f"the stream on {where} ended in {subscription.last_state}")
    assert remote.started is not None and local.started is not None
    # Only ticks enqueued once both streams were open count.
    since = max(remote.started, local.started)
    measured = sorted(n for n, stamp in remote.stamps.items() if stamp >= since)
    both = [n for n in measured if n in local.arrivals]
    latencies = [(remote.arrivals[n] - remote.stamps[n]) * 1000 for n in measured]
    local_latencies = [(local.arrivals[n] - local.stamps[n]) * 1000 for n in both]
    extra = [(remote.arrivals[n] - local.arrivals[n]) * 1000 for n in both]
    return {
        "task": task_id,
        "events": events,
        "measured": len(measured),
        "before_subscription": len(remote.stamps) - len(measured),
        "snapshot_tick": remote.snapshot_tick,
        "snapshot_tick_local": local.snapshot_tick,
        "missing": len(remote.missing(events)),
        "missing_local": len(local.missing(events)),
        "missing_ticks": remote.missing(events),
        "missing_ticks_local": local.missing(events),
        **_figures(latencies),
        "local": _figures(local_latencies),
        "remote_minus_local": _figures(extra),
        "latencies_ms": [round(value, 3) for value in latencies],
        "local_latencies_ms": [round(value, 3) for value in local_latencies],
        "remote_minus_local_ms": [round(value, 3) for value in extra],
    }


def measure_latency(
    servers: Sequence[ServerProcess], settings: argparse.Namespace
) -> dict[str, Any]:
    """Rounds of ``tick`` sent to ``servers[0]``, received on ``servers[1]``."""
    sender, subscriber = servers[0], servers[1]
    rounds = []
    for number in range(1, settings.rounds + 1):
        result = trio.run(
            _one_round,
            sender.url,
            subscriber.url,
            settings.events,
            settings.interval_ms,
            settings.delay_ms,
        )
        rounds.append(result)
        log(
            f"  round {number}/{settings.rounds}: {result['measured']} events, "
            f"p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, "
            f"max {result['max_ms']:.2f} ms, missing {result['missing']}; on A itself: "
            f"p50 {result['local']['p50_ms']:.2f} ms, p99 {result['local']['p99_ms']:.2f} ms; "
            f"B - A: p50 {result['remote_minus_local']['p50_ms']:.2f} ms"
        )
        for server in servers:
            if not server.alive():
                raise RuntimeError(f"a server exited:\n{server.log_tail()}")
    pooled = [value for result in rounds for value in result["latencies_ms"]]
    pooled_local = [value for result in rounds for value in result["local_latencies_ms"]]
    pooled_extra = [value for result in rounds for value in result["remote_minus_local_ms"]]
    return {
        "status": "ok",
        "rounds": rounds,
        "p50_ms": spread([result["p50_ms"] for result in rounds]),
        "p99_ms": spread([result["p99_ms"] for result in rounds]),
        "pooled": {
            "events": len(pooled),
            "p50_ms": percentile(pooled, 50),
            "p99_ms": percentile(pooled, 99),
            "max_ms": max(pooled),
        },
        "local": {
            "p50_ms": spread([result["local"]["p50_ms"] for result in rounds]),
            "p99_ms": spread([result["local"]["p99_ms"] for result in rounds]),
            "pooled": {"events": len(pooled_local), **_figures(pooled_local)},
        },
        "remote_minus_local": {
            "p50_ms": spread([result["remote_minus_local"]["p50_ms"] for result in rounds]),
            "p99_ms": spread([result["remote_minus_local"]["p99_ms"] for result in rounds]),
            "pooled": {"events": len(pooled_extra), **_figures(pooled_extra)},
        },
        "missing": sum(result["missing"] + result["missing_local"] for result in rounds),
    }


# --- throughput and CPU ---------------------------------------------------------------------


def postgres_cpu(backends: Callable[[], list[int]]) -> dict[int, float]:
    """CPU seconds so far of each backend serving the configuration's database, by PID."""
    found = {}
    for pid in backends():
        with contextlib.suppress(OSError):
            found[pid] = cpu_seconds(pid)
    return found


#: What PostgreSQL counted for one database: its transactions, and the rows its
#: tables updated, HOT (no index touched) or not, with the queue table's apart.
_COUNTERS = """
    SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
        coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0),
        coalesce(sum(n_tup_upd) FILTER (WHERE relname = 'queued_executions'), 0),
        coalesce(sum(n_tup_hot_upd) FILTER (WHERE relname = 'queued_executions'), 0)
    FROM pg_stat_user_tables
"""
COUNTER_NAMES = ("transactions", "updates", "hot_updates", "queue_updates", "queue_hot_updates")


def postgres_counters(url: str) -> dict[str, int]:
    """PostgreSQL's counters for the database at ``url`` (as its backends last reported)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(_COUNTERS).fetchone()
    assert row is not None
    return {name: int(value or 0) for name, value in zip(COUNTER_NAMES, row, strict=True)}


def _counted(before: dict[str, int], after: dict[str, int], good: int) -> dict[str, float]:
    """Transactions per request, and the share of row updates that were HOT."""
    delta = {name: after[name] - before[name] for name in COUNTER_NAMES}
    return {
        "transactions_per_request": delta["transactions"] / good if good else float("nan"),
        "hot_share": delta["hot_updates"] / delta["updates"] if delta["updates"] else 0.0,
        "queue_hot_share": (
            delta["queue_hot_updates"] / delta["queue_updates"] if delta["queue_updates"] else 0.0
        ),
    }


def _wrk_all(
    servers: Sequence[ServerProcess], duration_s: int, core: int | None
) -> list[dict[str, Any]]:
    """One wrk per web server at once, ``CONNECTIONS`` split evenly between them."""
    connections = CONNECTIONS // len(servers)
    case = WrkCase(f"send-jsonrpc-c{connections}", "jsonrpc", connections, "SendMessage")
    with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
        futures = [
            pool.submit(run_wrk, case, server.url, duration_s, uuid.uuid4().hex[:8], core)
            for server in servers
        ]
        return [future.result() for future in futures]


def measure_throughput(
    servers: Sequence[ServerProcess],
    web: Sequence[bool],
    settings: argparse.Namespace,
    backends: Callable[[], list[int]],
    counters: Callable[[], dict[str, int]] | None = None,
) -> dict[str, Any]:
    targets = [server for server, is_web in zip(servers, web, strict=True) if is_web]
    _wrk_all(targets, settings.warmup, settings.client_core)
    runs = []
    for number in range(1, settings.runs + 1):
        counted_before = counters() if counters is not None else None
        pg_before = postgres_cpu(backends)
        before = [cpu_seconds(server.pid) for server in servers]
        results = _wrk_all(targets, settings.duration, settings.client_core)
        after = [cpu_seconds(server.pid) for server in servers]
        pg_after = postgres_cpu(backends)
        if counters is not None:
            time.sleep(1.5)  # the backends report their counters within a second or so
        # A backend forked meanwhile counts from zero; one that exited meanwhile is lost.
        pg_cpu = sum(late - pg_before.get(pid, 0.0) for pid, late in pg_after.items())
        good = sum(int(result["good"]) for result in results)
        bad = sum(int(result["bad"]) for result in results)
        cpu = sum(late - early for early, late in zip(before, after, strict=True))
        run = {
            "good_rps": sum(float(result["good_rps"]) for result in results),
            "good": good,
            "bad": bad,
            "p50_ms": max(float(result["p50_ms"]) for result in results),
            "p99_ms": max(float(result["p99_ms"]) for result in results),
            "cpu_s": cpu,
            "cpu_per_process_s": [late - early for early, late in zip(before, after, strict=True)],
            "cpu_ms_per_request": cpu * 1000 / good if good else float("nan"),
            "postgres_cpu_s": pg_cpu,
            "postgres_cpu_ms_per_request": pg_cpu * 1000 / good if good else float("nan"),
            "wrk": results,
        }
        if counters is not None and counted_before is not None:
            run.update(_counted(counted_before, counters(), good))
        runs.append(run)
        log(
            f"  run {number}/{settings.runs}: {run['good_rps']:.0f} req/s, "
            f"p50 {run['p50_ms']:.2f} ms, p99 {run['p99_ms']:.2f} ms, bad {bad}, "
            f"CPU {run['cpu_ms_per_request']:.2f} ms/request "
            f"({', '.join(f'{value:.1f}' for value in run['cpu_per_process_s'])} s), "
            f"PostgreSQL {run['postgres_cpu_ms_per_request']:.2f} ms/request"
        )
        for server in servers:
            if not server.alive():
                raise RuntimeError(f"a server exited:\n{server.log_tail()}")
    return {
        "status": "ok",
        "runs": runs,
        "good_rps": spread([run["good_rps"] for run in runs]),
        "p50_ms": spread([run["p50_ms"] for run in runs]),
        "p99_ms": spread([run["p99_ms"] for run in runs]),
        "cpu_ms_per_request": spread([run["cpu_ms_per_request"] for run in runs]),
        "postgres_cpu_ms_per_request": spread([run["postgres_cpu_ms_per_request"] for run in runs]),
        "total_cpu_ms_per_request": spread(
            [run["cpu_ms_per_request"] + run["postgres_cpu_ms_per_request"] for run in runs]
        ),
        "bad": sum(run["bad"] for run in runs),
        **{
            name: spread([run[name] for run in runs])
            for name in ("transactions_per_request", "hot_share", "queue_hot_share")
            if all(name in run for run in runs)
        },
    }


# --- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Configuration:
    """A named list of processes on one database, and what is measured on it."""

    name: str
    title: str
    members: tuple[Member, ...]
    measure: str  # "latency", "throughput" or "conversation"
    extra: dict[str, str] = field(default_factory=dict)


def conversation_configurations(baseline: Path | None) -> list[Configuration]:
    """Conversations over 3 processes, each turn to another one (and the same on ``baseline``)."""
    kinds = [("", TRIO_KIND)]
    if baseline is not None:
        kinds.insert(0, ("@base", dataclasses.replace(TRIO_KIND, code=str(baseline.resolve()))))
    return [
        Configuration(
            f"conversation-3-processes{tag}",
            "a2a-trio, 3 processes on one database: conversations of 1, 10, 100 turns, c=16,"
            " each turn to the next process" + (f" (a2a_trio from {baseline})" if tag else ""),
            tuple(Member(f"trio-{n}", kind) for n in (1, 2, 3)),
            "conversation",
        )
        for tag, kind in kinds
    ]


def configurations(poll_s: float | None, baseline: Path | None = None) -> list[Configuration]:
    poll = () if poll_s is None else ("--poll", str(poll_s))
    return [
        Configuration(
            "latency-a2a-trio",
            "a2a-trio, 2 processes: event recorded on A -> SSE frame from B",
            (Member("trio-a", TRIO_KIND), Member("trio-b", TRIO_KIND)),
            "latency",
        ),
        Configuration(
            "latency-reference",
            "a2a-sdk 1.3 cluster mode, 2 replicas "
            f"(poll {'0.5 s, its default' if poll_s is None else f'{poll_s} s'}): "
            "event recorded on A -> SSE frame from B",
            (
                Member("ref-a", REFERENCE_KIND, extra_args=poll),
                Member("ref-b", REFERENCE_KIND, extra_args=poll),
            ),
            "latency",
        ),
        *throughput_configurations(baseline),
        *conversation_configurations(baseline),
    ]


def throughput_configurations(baseline: Path | None) -> list[Configuration]:
    """:data:`THROUGHPUT_CONFIGURATIONS`, each followed by itself on ``baseline`` (if given).

    Interleaved, so that a before/after comparison is measured in one run.
    """
    if baseline is None:
        return list(THROUGHPUT_CONFIGURATIONS)
    base = str(baseline.resolve())
    chosen = []
    for config in THROUGHPUT_CONFIGURATIONS:
        members = tuple(
            dataclasses.replace(m, kind=dataclasses.replace(m.kind, code=base))
            for m in config.members
        )
        chosen += [
            config,
            dataclasses.replace(
                config,
                name=f"{config.name}@base",
                title=f"{config.title} (a2a_trio from {baseline})",
                members=members,
            ),
        ]
    return chosen


THROUGHPUT_CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration(
        "send-1-process",
        "a2a-trio, 1 process: SendMessage, c=16",
        (Member("trio-1", TRIO_KIND),),
        "throughput",
    ),
    Configuration(
        "send-2-processes",
        "a2a-trio, 2 processes on one database: SendMessage, c=8 + 8",
        (Member("trio-1", TRIO_KIND), Member("trio-2", TRIO_KIND)),
        "throughput",
    ),
    Configuration(
        "send-2-web-1-worker",
        "a2a-trio, 2 web processes (agent queued) + 1 worker: SendMessage, c=8 + 8",
        (
            Member("web-1", TRIO_KIND, extra_args=("queued",)),
            Member("web-2", TRIO_KIND, extra_args=("queued",)),
            Member("worker", TRIO_KIND, web=False, extra_args=("worker",)),
        ),
        "throughput",
    ),
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cluster",
        description="Several processes on one PostgreSQL: cross-process latency against "
        "a2a-sdk 1.3's cluster mode, and SendMessage throughput and CPU per request.",
    )
    parser.add_argument("--events", type=int, default=300, help="ticks per round (300)")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds (3)")
    parser.add_argument("--interval-ms", type=int, default=20, help="between ticks (20)")
    parser.add_argument(
        "--delay-ms", type=int, default=1000, help="before the first tick, to subscribe (1000)"
    )
    parser.add_argument("--runs", type=int, default=3, help="measured wrk runs (3)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (10)")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up (3)")
    parser.add_argument(
        "--reference-poll", type=float, help="the reference's poll interval (default: its own)"
    )
    parser.add_argument(
        "--only", help="comma-separated configuration names (default: all); see --list"
    )
    parser.add_argument("--list", action="store_true", help="list the configurations")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to cores")
    parser.add_argument("--no-pin-postgres", action="store_true", help="leave PostgreSQL alone")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help=f"default {DEFAULT_PG_URL}")
    parser.add_argument(
        "--db-prefix",
        default=DEFAULT_DB_PREFIX,
        help=f"name prefix of the databases created and dropped (default {DEFAULT_DB_PREFIX})",
    )
    parser.add_argument("--out", type=Path, help="the JSON result (default bench/results/)")
    parser.add_argument(
        "--conversation-turns", type=int, default=3200, help="turns per conversation length"
    )
    parser.add_argument(
        "--conversation-history", type=int, help="historyLength of every turn (default: none)"
    )
    parser.add_argument(
        "--conversation-slices",
        type=int,
        default=1,
        help="run each conversation length in N parts, the lengths taking turns (default 1)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a directory holding another a2a_trio package: the throughput and conversation "
        "configurations run with it too, each as NAME@base right after NAME",
    )
    args = parser.parse_args(argv)
    args.server_core, args.client_core = choose_cores(args.no_pin)
    return args


def collect_meta(args: argparse.Namespace, postgres: LocalPostgres) -> dict[str, str]:
    from importlib import metadata

    meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    for package in ("a2a-trio", "a2a-sdk", "trio", "hypercorn", "uvicorn", "asyncpg"):
        try:
            meta[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            meta[package] = "not installed"
    meta["a2a-trio"] += f" (git {_git_state()})"
    meta["wrk"] = wrk_version()
    meta["cpu"] = f"{_cpu_model()}, {os.cpu_count()} logical cores"
    meta["load average before"] = " ".join(f"{value:.2f}" for value in os.getloadavg())
    meta["pinning"] = (
        "no"
        if args.server_core is None
        else f"servers on core {args.server_core}; wrk and the harness on core {args.client_core}"
    )
    meta.update(postgres.describe())
    return meta


def render(document: dict[str, Any]) -> str:
    lines = ["# Several processes on one PostgreSQL", ""]
    lines += [f"- {key}: {value}" for key, value in document["meta"].items()]
    lines += [
        "",
        "## Cross-process latency",
        "",
        "Each tick: `time.time()` when A's executor enqueues it -> its SSE frame read by a "
        "client of B (the figure), and of A itself (same process); B - A is what the "
        "second process adds. Medians of the rounds' percentiles (min-max over rounds).",
        "",
        "| configuration | ticks | A -> B p50 ms | A -> B p99 ms | max | on A p50 / p99 "
        "| B - A p50 / p99 | missing |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, entry in document["results"].items():
        if entry.get("measure") != "latency":
            continue
        if entry["status"] != "ok":
            lines.append(f"| {name} | failed: {entry['error'].splitlines()[0]} |||||||")
            continue
        p50, p99, pooled = entry["p50_ms"], entry["p99_ms"], entry["pooled"]
        local, extra = entry["local"], entry["remote_minus_local"]
        lines.append(
            f"| {name} | {pooled['events']}"
            f" | {p50['median']:.2f} ({p50['min']:.2f}-{p50['max']:.2f})"
            f" | {p99['median']:.2f} ({p99['min']:.2f}-{p99['max']:.2f})"
            f" | {pooled['max_ms']:.2f}"
            f" | {local['p50_ms']['median']:.2f} / {local['p99_ms']['median']:.2f}"
            f" | {extra['p50_ms']['median']:.2f} / {extra['p99_ms']['median']:.2f}"
            f" | {entry['missing']} |"
        )
    lines += [
        "",
        "## SendMessage throughput (JSON-RPC, blocking, c=16 in all)",
        "",
        "| configuration | req/s (median, min-max) | p50 ms | p99 ms "
        "| server CPU ms / request | PostgreSQL CPU ms / request | total CPU ms / request "
        "| transactions / request | HOT updates (queue table) | bad |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, entry in document["results"].items():
        if entry.get("measure") != "throughput":
            continue
        if entry["status"] != "ok":
            lines.append(f"| {name} | failed: {entry['error'].splitlines()[0]} |||||||")
            continue
        rps, cpu = entry["good_rps"], entry["cpu_ms_per_request"]
        total = _total_cpu(entry)
        lines.append(
            f"| {name} | {rps['median']:.0f} ({rps['min']:.0f}-{rps['max']:.0f})"
            f" | {entry['p50_ms']['median']:.2f} | {entry['p99_ms']['median']:.2f}"
            f" | {cpu['median']:.2f} ({cpu['min']:.2f}-{cpu['max']:.2f})"
            f" | {entry['postgres_cpu_ms_per_request']['median']:.2f}"
            f" | {total['median']:.2f} ({total['min']:.2f}-{total['max']:.2f})"
            f" | {_median(entry, 'transactions_per_request', '{:.2f}')}"
            f" | {_median(entry, 'hot_share', '{:.0%}')}"
            f" ({_median(entry, 'queue_hot_share', '{:.0%}')}) | {entry['bad']} |"
        )
    lines += _queued_ratios(document["results"])
    conversations = {
        name: entry
        for name, entry in document["results"].items()
        if entry.get("measure") == "conversation"
    }
    if conversations:
        lines += ["", "## Conversations", "", *render_conversations(conversations)]
    return "\n".join(lines) + "\n"


def _median(entry: dict[str, Any], name: str, form: str) -> str:
    """The median of a figure in ``form``, or "-" (an older document, or not measured)."""
    figure = entry.get(name)
    return form.format(figure["median"]) if isinstance(figure, dict) else "-"


def _total_cpu(entry: dict[str, Any]) -> dict[str, float]:
    """Servers' plus PostgreSQL's CPU per request (from the runs, for older documents too)."""
    if "total_cpu_ms_per_request" in entry:
        total: dict[str, float] = entry["total_cpu_ms_per_request"]
        return total
    return spread(
        [run["cpu_ms_per_request"] + run["postgres_cpu_ms_per_request"] for run in entry["runs"]]
    )


def _queued_ratios(results: dict[str, Any]) -> list[str]:
    """A queued message's CPU over an inline one's (all processes and PostgreSQL), per code."""
    lines = []
    for tag in ("", "@base"):
        queued = results.get(f"send-2-web-1-worker{tag}", {})
        inline = results.get(f"send-2-processes{tag}", {})
        if queued.get("status") != "ok" or inline.get("status") != "ok":
            continue
        over = _total_cpu(queued)["median"] / _total_cpu(inline)["median"]
        lines.append(
            f"\nA queued message costs {over:.2f}x an inline message's CPU"
            f" (servers and PostgreSQL, medians){' on the baseline' if tag else ''}."
        )
    return lines


def run_configuration(
    config: Configuration,
    args: argparse.Namespace,
    postgres: LocalPostgres,
    workdir: Path,
) -> dict[str, Any]:
    log(f"[{config.name}] {config.title}")
    entry: dict[str, Any] = {"measure": config.measure, "title": config.title}
    try:
        with running_members(
            config.members, postgres, workdir, args.server_core, args.db_prefix
        ) as (servers, database):

            def backends() -> list[int]:
                return postgres.backend_pids(database)

            if config.measure == "latency":
                entry.update(measure_latency(servers, args))
            elif config.measure == "conversation":
                settings = ConversationSettings(
                    total_turns=args.conversation_turns,
                    history_length=args.conversation_history,
                    slices=args.conversation_slices,
                )
                ports, pids = [s.port for s in servers], [s.pid for s in servers]
                url = postgres.url_for(database)
                probe = DatabaseProbe(
                    partial(postgres_cpu, backends),
                    lambda: postgres_counters(url)["transactions"],
                )
                result = run_conversations(ports, pids, settings, secrets.token_hex(4), probe)
                entry.update({"status": "ok", "result": result})
            else:
                web = [member.web for member in config.members]
                url = postgres.url_for(database)
                entry.update(
                    measure_throughput(
                        servers, web, args, backends, partial(postgres_counters, url)
                    )
                )
    except Exception as error:
        entry.update({"status": "failed", "error": f"{type(error).__name__}: {error}"})
        log(f"  FAILED: {entry['error'].splitlines()[0]}")
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = configurations(args.reference_poll, args.baseline)
    if args.list:
        for config in chosen:
            print(f"{config.name:20} {config.title}")
        return 0
    if args.only:
        names = {name.strip() for name in args.only.split(",")}
        unknown = names - {config.name for config in chosen}
        if unknown:
            raise SystemExit(f"unknown configuration(s) {sorted(unknown)}; see --list")
        chosen = [config for config in chosen if config.name in names]
    raise_nofile_limit()
    try:
        postgres = LocalPostgres(args.pg_url)
        meta = collect_meta(args, postgres)
    except PostgresError as error:
        raise SystemExit(str(error)) from None
    document: dict[str, Any] = {
        "meta": meta,
        "settings": {
            key: (str(value) if isinstance(value, Path) else value)
            for key, value in vars(args).items()
        },
        "results": {},
    }
    postgres_core = None if args.no_pin_postgres else args.client_core
    with (
        pinned_to(args.client_core),
        postgres_pinned(postgres, postgres_core, document["meta"]),
        tempfile.TemporaryDirectory(prefix="a2a-bench-cluster-") as tmp,
    ):
        for config in chosen:
            document["results"][config.name] = run_configuration(config, args, postgres, Path(tmp))
    markdown = render(document)
    print(markdown)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "cluster-latest.md").write_text(markdown)
    out = args.out or RESULTS_DIR / "cluster-latest.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2, default=str) + "\n")
    log(f"wrote {out} and {RESULTS_DIR / 'cluster-latest.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

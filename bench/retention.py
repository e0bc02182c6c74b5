"""Pruning under load: ``python -m bench.retention [options]``.

For each backend (``--backends``, default ``sqlite,postgresql``), on a new
database of its own (a file in a temporary directory; a PostgreSQL database
created on ``--pg-url``'s server and dropped after):

1. ``a2a-trio serve`` (the bench agent at the root, 127.0.0.1 only) answers
   one SendMessage: the template task, which is then copied ``--tasks``
   times (100,000 by default) with its events, finished a year ago
   (:mod:`bench.retention_seed`);
2. **without pruning**: the server starts again, wrk drives SendMessage
   (JSON-RPC, ``--connections``) for ``--warmup`` seconds, then ``--duration``
   seconds measured;
3. **with pruning**: the same, with ``[retention] max_age = "1d"`` and the
   first run due just as the measured window opens, so that the old tasks
   are pruned while wrk drives the server.

It prints p50/p99/req/s of both windows, the tasks removed, how long the
run took and whether it ended inside the window (a run longer than the
window was measured under load only in part: raise ``--duration``). Every
phase is bounded in time; only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from a2a_trio.store.retention import DEFAULT_BATCH

from .common import REPO
from .retention_seed import seed_old_tasks
from .wrk import WrkCase, run_wrk

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
AGENT = "bench"
CONFIG = """
[storage]
url = "{url}"

[[agents]]
name = "bench"
executor = "bench.trio_server:BenchExecutor"
card = "bench.trio_server:bench_card"
"""
RETENTION = """
[retention]
max_age = "1d"
interval = "{interval}s"
batch = {batch}
pause = "{pause}s"
share = {share}
"""
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
LONG_AGO = datetime(2025, 1, 1, tzinfo=UTC)
RUN_LINE = re.compile(r"retention: removed .*")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(config: Path, log: Path) -> Iterator[str]:
    """``a2a-trio serve`` on ``config`` until the block ends; yields its URL once ready."""
    port = free_port()
    env = {**os.environ, "A2A_TRIO_CONFIG": str(config), "PYTHONPATH": str(REPO)}
    env.pop("A2A_TRIO_DATABASE", None)
    command = [sys.executable, "-m", "a2a_trio.cli", "serve", "--bind", f"127.0.0.1:{port}"]
    with log.open("ab") as output:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/_a2a/health/ready", timeout=1, trust_env=False).is_success:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)


def template_task(url: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"text": "template"}],
            }
        },
    }
    answer = httpx.post(
        f"{url}/jsonrpc", json=body, headers={"A2A-Version": "1.0"}, timeout=10, trust_env=False
    ).json()
    return str(answer["result"]["task"]["id"])


def query(database: str, statement: str) -> list[tuple[Any, ...]]:
    if database.startswith("sqlite:///"):
        with closing(sqlite3.connect(database.removeprefix("sqlite:///"))) as conn:
            return conn.execute(statement).fetchall()
    with psycopg.connect(database, autocommit=True) as conn:
        return conn.execute(statement).fetchall()


@contextmanager
def database_for(backend: str, directory: Path, pg_url: str) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{directory / 'a2a.db'}"
        return
    name = f"a2a_retention_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield pg_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def load(url: str, args: argparse.Namespace) -> dict[str, Any]:
    case = WrkCase("send", "jsonrpc", args.connections, "SendMessage")
    run_wrk(case, url, args.warmup, uuid.uuid4().hex[:8], None)
    return run_wrk(case, url, args.duration, uuid.uuid4().hex[:8], None)


def old_tasks(database: str) -> int:
    return int(query(database, "SELECT count(*) FROM tasks WHERE id LIKE '%-old-%'")[0][0])


def measure(backend: str, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    with database_for(backend, directory, args.pg_url) as database:
        plain = directory / f"{backend}.toml"
        plain.write_text(CONFIG.format(url=database))
        log = directory / f"{backend}.log"
        with serving(plain, log) as url:
            template = template_task(url)
        started = time.monotonic()
        seed_old_tasks(database, AGENT, template, args.tasks, at=LONG_AGO)
        seeded = time.monotonic() - started
        print(f"{backend}: seeded {old_tasks(database)} old tasks in {seeded:.1f} s", flush=True)
        with serving(plain, log) as url:
            without = load(url, args)
        pruning = directory / f"{backend}-retention.toml"
        # The first run is due an interval after the start: as the measured window opens.
        interval = args.warmup + 1
        pruning.write_text(
            CONFIG.format(url=database)
            + RETENTION.format(
                interval=interval, batch=args.batch, pause=args.pause, share=args.share
            )
        )
        before = old_tasks(database)
        lines_before = len(RUN_LINE.findall(log.read_text()))
        with serving(pruning, log) as url:
            window_opens = datetime.now(UTC) + timedelta(seconds=args.warmup)
            with_pruning = load(url, args)
            window_closes = datetime.now(UTC)
        removed = before - old_tasks(database)
        runs = query(
            database,
            "SELECT started_at, finished_at, batches, largest_batch, tasks FROM retention_runs"
            " WHERE tasks > 0 ORDER BY id",
        )
        lines = RUN_LINE.findall(log.read_text())[lines_before:]
        return {
            "backend": backend,
            "without": without,
            "with": with_pruning,
            "removed": removed,
            "runs": runs,
            "log": [line for line in lines if not line.startswith("retention: removed 0 tasks")],
            "window": (window_opens, window_closes),
        }


def report(result: dict[str, Any]) -> None:
    without, with_pruning = result["without"], result["with"]
    print(f"\n== {result['backend']} ==")
    print(f"{'':18}{'p50 ms':>10}{'p99 ms':>10}{'req/s':>10}{'bad':>6}{'errors':>8}")
    for name, run in (("without pruning", without), ("with pruning", with_pruning)):
        errors = sum(run["errors"].values())
        print(
            f"{name:18}{run['p50_ms']:>10.2f}{run['p99_ms']:>10.2f}{run['good_rps']:>10.0f}"
            f"{run['bad']:>6}{errors:>8}"
        )
    ratio = with_pruning["p99_ms"] / without["p99_ms"] if without["p99_ms"] else float("inf")
    print(f"p99 with / without: {ratio:.2f}x (acceptance: at most 2x)")
    opens, closes = result["window"]
    print(f"measured window with pruning: {opens:%H:%M:%S} -> {closes:%H:%M:%S} UTC")
    print(f"old tasks removed: {result['removed']}")
    for line in result["log"]:
        print(f"  log: {line}")
    for started, finished, batches, largest, tasks in result["runs"]:
        print(
            f"  run: {tasks} tasks in {batches} batches (largest {largest}),"
            f" {started} -> {finished}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--duration", type=int, default=60, help="measured seconds per window")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--pause", type=float, default=0.05)
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--pg-url", default=SERVER, help="a PostgreSQL server on 127.0.0.1")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed")
    with tempfile.TemporaryDirectory(prefix="a2a-retention-") as directory:
        for backend in args.backends.split(","):
            report(measure(backend, args, Path(directory)))


if __name__ == "__main__":
    main()

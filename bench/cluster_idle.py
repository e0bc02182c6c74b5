"""What idle processes cost PostgreSQL: ``python -m bench.cluster_idle [options]``.

For each count of web processes (``--web``, default 1 2 4 8), on a new
database of its own (created before, dropped after), holding ``--tasks``
finished tasks (100,000 by default) with a vacuum backlog:

1. one web process starts and migrates the schema; the harness then writes
   the finished tasks (one event each) and as many task leases, taken and let
   go, as the executions that finished them would have; autovacuum is off for
   those two tables, so that their dead rows stay (the backlog a long
   transaction or a busy autovacuum leaves);
2. the other web processes (``hypercorn --worker-class trio a2a_trio:app``)
   and ``--workers`` queue workers (``a2a-trio worker``) start on one
   configuration naming an echo agent with ``execution = "queued"``;
3. after ``--settle`` seconds (more than ``storage.pool_idle``, 30 s, so
   that connections used at start-up are closed), the database's counters (``pg_stat_database``:
   ``xact_commit``, ``tup_returned + tup_fetched``) are read twice,
   ``--window`` seconds apart, from a connection to another database (the
   harness's own reads are not counted), and the connections to the database
   (``pg_stat_activity``) counted in the middle.

``--python`` and ``--repo`` choose the code that runs (another checkout and
its virtualenv, for a before/after table). Only 127.0.0.1 is contacted;
every phase is bounded.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
CONFIG = """
[storage]
url = "{url}"

[[agents]]
name = "echo"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"
execution = "queued"
"""
POPULATE = [
    "ALTER TABLE tasks SET (autovacuum_enabled = false)",
    "ALTER TABLE task_leases SET (autovacuum_enabled = false)",
    """
    INSERT INTO tasks (agent, id, owner, context_id, state, created_at, updated_at, last_seq,
        snapshot)
    SELECT 'echo', 'old-' || n, 'anonymous', 'c-' || n, 'TASK_STATE_COMPLETED', now(), now(), 1,
        json_build_object('id', 'old-' || n, 'contextId', 'c-' || n,
            'status', json_build_object('state', 'TASK_STATE_COMPLETED'))
    FROM generate_series(1, %(tasks)s) AS n
    """,
    """
    INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)
    SELECT 'echo', 'old-' || n, 1, 'task', '{}'::json, now()
    FROM generate_series(1, %(tasks)s) AS n
    """,
    """
    INSERT INTO task_leases (agent, task_id, holder, token, since)
    SELECT 'echo', 'old-' || n, 'gone', 'token-' || n, now()
    FROM generate_series(1, %(tasks)s) AS n
    """,
    "DELETE FROM task_leases WHERE holder = 'gone'",
    # What autovacuum would otherwise do inside the window (statistics only:
    # the dead rows stay).
    "ANALYZE tasks, task_events, task_leases",
]


def counters(admin: psycopg.Connection[tuple[object, ...]], name: str) -> tuple[int, int]:
    row = admin.execute(
        "SELECT xact_commit, tup_returned + tup_fetched FROM pg_stat_database WHERE datname = %s",
        (name,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])  # type: ignore[call-overload]


def connections(admin: psycopg.Connection[tuple[object, ...]], name: str) -> int:
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)
    ).fetchone()
    assert row is not None
    return int(row[0])  # type: ignore[call-overload]


def wait_ready(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/_a2a/health/ready", timeout=1).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(log.read_text())


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def measure(args: argparse.Namespace, web: int, directory: Path) -> tuple[float, int, float]:
    name = f"a2a_idle_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = SERVER.rsplit("/", 1)[0] + "/" + name
    config = directory / f"{name}.toml"
    config.write_text(CONFIG.format(url=url))
    env = {**os.environ, "A2A_TRIO_CONFIG": str(config), "PYTHONPATH": str(args.repo)}
    processes: list[subprocess.Popen[bytes]] = []
    try:

        def start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
            process = subprocess.Popen(
                command,
                cwd=args.repo,
                env=env,
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            processes.append(process)
            return process

        def start_web(n: int) -> None:
            port = free_port()
            log = directory / f"{name}-web{n}.log"
            command = [args.python, "-m", "hypercorn", "--worker-class", "trio"]
            process = start([*command, "-b", f"127.0.0.1:{port}", "a2a_trio:app"], log)
            wait_ready(port, process, log)

        start_web(0)
        with psycopg.connect(url, autocommit=True) as db:
            for statement in POPULATE:
                db.execute(statement, {"tasks": args.tasks})  # type: ignore[arg-type]
        for n in range(1, web):
            start_web(n)
        for n in range(args.workers):
            command = [args.python, "-m", "a2a_trio.cli", "worker", "--config", str(config)]
            start(command, directory / f"{name}-worker{n}.log")
        time.sleep(args.settle)
        with psycopg.connect(SERVER, autocommit=True) as admin:
            commits0, rows0 = counters(admin, name)
            began = time.monotonic()
            time.sleep(args.window / 2)
            held = connections(admin, name)
            time.sleep(args.window / 2)
            commits1, rows1 = counters(admin, name)
            took = time.monotonic() - began
        return (commits1 - commits0) / took, held, (rows1 - rows0) / took
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        with psycopg.connect(SERVER, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--web", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--settle", type=float, default=45.0)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    args.tasks = min(args.tasks, 1_000_000)  # bounded
    print(f"code: {args.repo}; {args.tasks} finished tasks; + {args.workers} workers")
    print("| web processes | commits/s | connections | rows read/s |")
    print("| ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as directory:
        for web in args.web:
            commits, held, read = measure(args, web, Path(directory))
            print(f"| {web} | {commits:.1f} | {held} | {read:.0f} |", flush=True)


if __name__ == "__main__":
    main()

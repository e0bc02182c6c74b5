"""PostgreSQL statements per queued message: ``python -m bench.cluster_statements [N] [C]``.

Starts one web process with the bench agent queued and one queue worker
(:mod:`bench.cluster_server`) on a database of its own with
``log_statement = 'all'`` (``ALTER DATABASE``: nothing else is logged), sends
``N`` blocking SendMessages (default 400), ``C`` at a time (default 8) after
a warm-up, and counts the statements the server's log shows for that
database in the window, by statement (``BEGIN``, ``COMMIT`` and savepoints
counted), with the transactions (``pg_stat_database``) and the queue table's
row updates, HOT or not (``pg_stat_user_tables``).

A counting tool, not a benchmark. It reads PostgreSQL's log file (``--log``,
default the Debian cluster's), so it needs a local server whose log this
user can read; the database is dropped afterwards.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import time
import uuid

import httpx
import psycopg
import trio

from .common import JSONRPC_PATH, PROTOCOL_VERSION, REPO, VERSION_HEADER
from .postgres import DEFAULT_PG_URL
from .servers import free_port

DEFAULT_LOG = "/var/log/postgresql/postgresql-15-main.log"
_STATS = (
    "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),"
    " coalesce(sum(n_tup_upd), 0), coalesce(sum(n_tup_hot_upd), 0)"
    " FROM pg_stat_user_tables WHERE relname = 'queued_executions'"
)


def _body() -> dict[str, object]:
    message = {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": "hi"}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def _send(port: int, count: int, concurrency: int) -> None:
    headers = {VERSION_HEADER: PROTOCOL_VERSION}
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
        left = [count]

        async def client() -> None:
            while left[0] > 0:
                left[0] -= 1
                answer = (await http.post(JSONRPC_PATH, json=_body())).json()
                if "result" not in answer:
                    raise RuntimeError(f"SendMessage failed: {answer}")

        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(client)


def _statements(text: str, database: str) -> collections.Counter[str]:
    """Each statement logged for ``database``, by its first 70 characters."""
    counted: collections.Counter[str] = collections.Counter()
    lines = text.splitlines()
    for number, line in enumerate(lines):
        found = re.search(r"@(\S+) LOG:  (?:statement|execute [^:]*): (.*)", line)
        if found is None or found.group(1) != database:
            continue
        statement = found.group(2).strip()
        following = number + 1
        while not statement and following < len(lines) and lines[following].startswith("\t"):
            statement = lines[following].strip()  # a statement beginning with a newline
            following += 1
        if not statement.startswith("SELECT (SELECT xact_commit"):
            counted[re.sub(r"\s+", " ", statement)[:70]] += 1
    return counted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("messages", nargs="?", type=int, default=400)
    parser.add_argument("concurrency", nargs="?", type=int, default=8)
    parser.add_argument("--log", default=DEFAULT_LOG, help=f"PostgreSQL's log ({DEFAULT_LOG})")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args(argv)
    database = f"bench_statements_{os.getpid()}"
    url = args.pg_url.rsplit("/", 1)[0] + "/" + database
    with psycopg.connect(args.pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
        conn.execute(f"ALTER DATABASE {database} SET log_statement = 'all'")
    port = free_port()
    python, module = sys.executable, "bench.cluster_server"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": REPO}
    processes = [subprocess.Popen([python, "-m", module, str(port), url, "queued"], **quiet)]
    try:
        for _ in range(120):
            try:
                httpx.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.5)
        processes.append(subprocess.Popen([python, "-m", module, "0", url, "worker"], **quiet))
        time.sleep(2)
        trio.run(_send, port, 50, args.concurrency)  # warm-up
        time.sleep(1)
        start = os.path.getsize(args.log)
        with psycopg.connect(url, autocommit=True) as conn:
            before = conn.execute(_STATS).fetchone()
        began = time.monotonic()
        trio.run(_send, port, args.messages, args.concurrency)
        took = time.monotonic() - began
        time.sleep(1.5)  # the backends report their counters within a second or so
        with psycopg.connect(url, autocommit=True) as conn:
            after = conn.execute(_STATS).fetchone()
        with open(args.log, errors="replace") as log:
            log.seek(start)
            counted = _statements(log.read(), database)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
        with psycopg.connect(args.pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    assert before is not None and after is not None
    n = args.messages
    transactions, updates, hot = (late - early for early, late in zip(before, after, strict=True))
    print(
        f"{n} blocking SendMessages at c={args.concurrency} in {took:.1f} s:"
        f" {sum(counted.values()) / n:.2f} statements a message,"
        f" {transactions / n:.2f} transactions a message;"
        f" queued_executions: {updates} row updates, {hot} HOT"
    )
    for statement, count in counted.most_common(20):
        print(f"  {count / n:6.2f}  {statement}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

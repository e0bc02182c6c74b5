"""Two ways to drive psycopg 3 from trio, measured: ``python -m bench.pg_driver [URL]``.

(a) psycopg's sync connection behind ``trio.to_thread.run_sync``, one hop per round
    of work (the whole transaction runs in the worker thread);
(b) psycopg's own generators (the ones its AsyncConnection runs on asyncio) driven
    by ``trio.lowlevel.wait_readable``/``wait_writable`` on the connection's socket.
    (b) calls private psycopg methods (``Cursor._execute_gen``,
    ``Connection._exec_command``); it exists only to be measured.

A round is BEGIN; three INSERTs with jsonb payloads; COMMIT; then one SELECT by key.
Prints p50/p99 latency per round at concurrency 1 and 16, and process CPU per round.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import trio
from psycopg.types.json import Jsonb
from psycopg.waiting import Ready, Wait

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/postgres"
ROUNDS = 2000
PAYLOAD = {"kind": "status-update", "state": "TASK_STATE_WORKING", "text": "x" * 200}
INSERT = "INSERT INTO bench_events (task, seq, payload) VALUES (%s, %s, %s)"
SELECT = "SELECT payload FROM bench_events WHERE task = %s AND seq = %s"


def setup() -> None:
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_events")
        conn.execute(
            "CREATE TABLE bench_events (task text, seq bigint, payload jsonb,"
            " at timestamptz DEFAULT now(), PRIMARY KEY (task, seq))"
        )


def sync_round(conn: psycopg.Connection[Any]) -> None:
    task = str(uuid.uuid4())
    with conn.transaction(), conn.cursor() as cur:
        for seq in range(3):
            cur.execute(INSERT, (task, seq, Jsonb(PAYLOAD)))
    with conn.cursor() as cur:
        cur.execute(SELECT, (task, 1))
        assert cur.fetchone() is not None


async def drive(conn: psycopg.Connection[Any], gen: Any) -> Any:
    """Run one psycopg generator to its end, waiting on the socket the trio way."""
    fileno = conn.pgconn.socket
    try:
        wait = next(gen)
        while True:
            if wait == Wait.W:
                await trio.lowlevel.wait_writable(fileno)
                wait = gen.send(Ready.W)
            else:
                await trio.lowlevel.wait_readable(fileno)
                wait = gen.send(Ready.R)
    except StopIteration as stop:
        return stop.value


async def nonblocking_round(conn: psycopg.Connection[Any]) -> None:
    task = str(uuid.uuid4())
    await drive(conn, conn._exec_command(b"BEGIN"))
    cur = conn.cursor()
    for seq in range(3):
        await drive(conn, cur._execute_gen(INSERT, (task, seq, Jsonb(PAYLOAD))))
    await drive(conn, conn._exec_command(b"COMMIT"))
    await drive(conn, cur._execute_gen(SELECT, (task, 1)))
    assert cur.fetchone() is not None


async def measure(
    name: str, concurrency: int, round_on: Callable[[psycopg.Connection[Any]], Awaitable[None]]
) -> None:
    conns = [psycopg.connect(URL, autocommit=True) for _ in range(concurrency)]
    latencies: list[float] = []
    per_worker = ROUNDS // concurrency

    async def worker(conn: psycopg.Connection[Any]) -> None:
        for _ in range(per_worker):
            start = time.perf_counter()
            await round_on(conn)
            latencies.append(time.perf_counter() - start)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for conn in conns:
            nursery.start_soon(worker, conn)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    for conn in conns:
        conn.close()
    latencies.sort()
    n = len(latencies)
    print(
        f"| {name} | {concurrency} | {latencies[n // 2] * 1e3:.2f} |"
        f" {latencies[int(n * 0.99)] * 1e3:.2f} | {n / wall:.0f} | {cpu / n * 1e6:.0f} |"
    )


async def main() -> None:
    setup()

    async def threaded(conn: psycopg.Connection[Any]) -> None:
        await trio.to_thread.run_sync(sync_round, conn)

    print("| driver | concurrency | p50 ms | p99 ms | rounds/s | CPU µs/round |")
    print("|---|---|---|---|---|---|")
    for concurrency in (1, 16):
        # The thread limiter defaults to 40 tokens: enough for 16 workers.
        await measure("(a) sync + to_thread", concurrency, threaded)
        await measure("(b) generators + wait_readable", concurrency, nonblocking_round)


if __name__ == "__main__":
    trio.run(main)

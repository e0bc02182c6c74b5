"""The PostgreSQL store's ``record`` measured: ``python -m bench.pg_store [URL]``.

A round is what the recorder hands the store for a new task: one share
creating it with three events (the task, WORKING, COMPLETED), about 300 bytes
each, without webhooks. It runs with ``push`` off, and on (the store then also
asks whether the task has webhook configs; it has none). The rounds go to a
scratch database created for the run and dropped after it.

Prints p50/p99 latency per ``record`` at concurrency 1 and 16, and the
process's CPU per round (the trio thread and the worker threads together).
"""

from __future__ import annotations

import sys
import time
import uuid
from datetime import UTC, datetime

import psycopg
import trio
from psycopg import sql

from a2a_trio.protocol.models import (
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_trio.store.postgres import PoolSettings, PostgresStore
from a2a_trio.store.rounds import EventWrite, NewTask, Round, Share
from a2a_trio.store.url import PostgresLocation, parse_database_url

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/postgres"
ROUNDS = 2000


def new_task_round(push: bool) -> Round:
    task_id = str(uuid.uuid4())
    history = [Message(message_id=f"{task_id}-m", role=Role.USER, parts=[Part(text="x" * 120)])]
    snapshots = [
        Task(
            id=task_id,
            context_id="ctx",
            status=TaskStatus(state=state, timestamp=datetime.now(UTC)),
            history=history,
        )
        for state in (TaskState.SUBMITTED, TaskState.WORKING, TaskState.COMPLETED)
    ]
    events = [EventWrite(1, "task", StreamResponse(task=snapshots[0]).to_json(), snapshots[0])]
    for seq, snapshot in enumerate(snapshots[1:], start=2):
        update = TaskStatusUpdateEvent(task_id=task_id, context_id="ctx", status=snapshot.status)
        events.append(
            EventWrite(seq, "status", StreamResponse(status_update=update).to_json(), snapshot)
        )
    return Round([Share("bench", task_id, new=NewTask("owner"), events=events)], push=push)


async def measure(store: PostgresStore, concurrency: int, push: bool) -> None:
    rounds = [new_task_round(push) for _ in range(ROUNDS)]
    latencies: list[float] = []

    async def worker(mine: list[Round]) -> None:
        for round in mine:
            start = time.perf_counter()
            [outcome] = await store.record(round)
            latencies.append(time.perf_counter() - start)
            assert outcome.error is None, outcome.error

    cpu0, wall0 = time.process_time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for worker_number in range(concurrency):
            nursery.start_soon(worker, rounds[worker_number::concurrency])
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    latencies.sort()
    n = len(latencies)
    print(
        f"| {'on' if push else 'off'} | {concurrency} | {latencies[n // 2] * 1e3:.2f} |"
        f" {latencies[int(n * 0.99)] * 1e3:.2f} | {n / wall:.0f} | {cpu / n * 1e6:.0f} |"
    )


async def main() -> None:
    server = parse_database_url(URL, key="URL")
    assert isinstance(server, PostgresLocation), "a postgresql:// URL"
    name = f"bench_a2a_store_{uuid.uuid4().hex[:8]}"
    conninfo = psycopg.conninfo.make_conninfo("", **server.conninfo_kwargs())
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        location = PostgresLocation(server.host, server.port, name, server.user, server.password)
        store = PostgresStore(location, pool=PoolSettings(size=16))
        await store.open()
        try:
            for _ in range(200):  # warm up: connections, prepared statements
                await store.record(new_task_round(True))
            print("| push | concurrency | p50 ms | p99 ms | rounds/s | CPU µs/round |")
            print("|---|---|---|---|---|---|")
            for concurrency in (1, 16):
                for push in (False, True):
                    await measure(store, concurrency, push)
        finally:
            await store.aclose()
    finally:
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    trio.run(main)

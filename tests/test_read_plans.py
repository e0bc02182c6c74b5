"""The reads on a follow-up's path probe their keys, however many tasks are stored.

The store's connections keep one plan per statement (``plan_cache_mode``, see
store/postgres/database.py), made when the statement is first prepared. Made
while ``tasks`` was small, a plan that joined the asked keys with the table
scanned all of it: kept as the table grew, each follow-up's read cost grew
with the tasks stored (a hash join beat ten probes of the key up to a few
thousand tasks). Here each read is prepared on a store connection while the
tables hold a few hundred tasks, the tables then grow, and the plan the
connection kept must not scan ``tasks`` or ``task_events`` whole.

A plan made while ``tasks`` holds a few hundred rows or fewer may still scan
it (one probe by key is then estimated dearer); PostgreSQL's autovacuum
analyzes a growing table long before that costs much, and new statistics make
every connection plan again.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from a2a_trio.store.postgres.database import connect
from a2a_trio.store.postgres.pool_settings import PoolSettings
from a2a_trio.store.postgres.reading import TASKS_SINCE
from a2a_trio.store.postgres.task_reads import TASKS_BY_KEY, TASKS_LEASED
from a2a_trio.store.url import PostgresLocation

from .postgres import database_of_tasks
from .writes import AGENT

KINDS = ["task", "status", "artifact", "message"]

#: Each read, with arguments asking for tasks t-0 and t-1 (and, for the lease, holder
#: h), and the column of its rows that holds a task's id.
READS: dict[str, tuple[str, tuple[Any, ...], int]] = {
    "leased": (
        TASKS_LEASED,
        (
            json.dumps(
                [[AGENT, "t-0", "alice", "h", "token-0"], [AGENT, "t-1", "alice", "h", "token-1"]]
            ),
            json.dumps([[AGENT, "t-0"], [AGENT, "t-1"]]),
        ),
        1,
    ),
    "by key": (TASKS_BY_KEY, (json.dumps([[AGENT, "t-0"], [AGENT, "t-1"]]),), 1),
    "since": (TASKS_SINCE, (["t-0", "t-1"], AGENT, ["t-0", "t-1"], [0, 0], AGENT, KINDS), 0),
}

#: Tasks (of three events each) when the plans are made, and added after.
PLANNED, GROWN = 500, 10_000


@pytest.fixture
async def small(postgres: PostgresLocation) -> AsyncIterator[PostgresLocation]:
    async with database_of_tasks(postgres, 2) as (location, _):
        yield location


@pytest.fixture
def connection(small: PostgresLocation) -> Iterator[psycopg.Connection[Any]]:
    conn = connect(small, PoolSettings(), autocommit=True)
    try:
        grow(conn, "planned", PLANNED)
        conn.execute("ANALYZE tasks")
        conn.execute("ANALYZE task_events")
        yield conn
    finally:
        conn.close()


def grow(conn: psycopg.Connection[Any], prefix: str, count: int) -> None:
    """Add ``count`` tasks of Bob's, each with three events."""
    conn.execute(
        "INSERT INTO tasks (agent, id, owner, context_id, state, created_at, updated_at,"
        " last_seq, snapshot) SELECT %s, %s || n, 'bob', 'c-' || n,"
        " 'TASK_STATE_INPUT_REQUIRED', now(), now(), 3, '{}'::json"
        " FROM generate_series(1, %s) AS n",
        (AGENT, prefix, count),
    )
    conn.execute(
        "INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)"
        " SELECT %s, %s || n, s, 'status', '{}'::json, now()"
        " FROM generate_series(1, %s) AS n, generate_series(1, 3) AS s",
        (AGENT, prefix, count),
    )


def scans(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(node type, relation) of every node of a plan in EXPLAIN's JSON."""
    yield plan["Node Type"], plan.get("Relation Name", "")
    for child in plan.get("Plans", ()):
        yield from scans(child)


@pytest.mark.parametrize("read", sorted(READS))
async def test_a_read_prepared_while_the_tables_were_small_probes_them_once_grown(
    connection: psycopg.Connection[Any], read: str
) -> None:
    query, args, id_column = READS[read]
    found = connection.execute(query, args, prepare=True).fetchall()
    connection.execute("DELETE FROM task_leases")  # the leased read's
    assert {row[id_column] for row in found} == {"t-0", "t-1"}
    [(name,)] = connection.execute(
        "SELECT name FROM pg_prepared_statements WHERE NOT from_sql"
    ).fetchall()
    grow(connection, "grown", GROWN)
    cursor = psycopg.ClientCursor(connection)
    placeholders = ", ".join(["%s"] * len(args))
    with connection.transaction(force_rollback=True):
        [(explained,)] = cursor.execute(
            f"EXPLAIN (FORMAT JSON) EXECUTE {name}({placeholders})", args
        ).fetchall()
    nodes = list(scans(explained[0]["Plan"]))
    whole = [(kind, table) for kind, table in nodes if kind == "Seq Scan"]
    assert not [table for _, table in whole if table in ("tasks", "task_events")], nodes

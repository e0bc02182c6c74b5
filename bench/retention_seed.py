"""Old finished tasks in bulk, copied from one real task by SQL (bench/retention.py, the tests).

:func:`seed_old_tasks` copies a task the server recorded (its row and its
event log) ``count`` times under new ids, last updated ``at``: a database
holding a hundred thousand finished tasks in seconds, in the store's own
schema, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime

import psycopg
from psycopg.conninfo import make_conninfo

from a2a_trio.store.records import order_key
from a2a_trio.store.url import PostgresLocation, SqliteLocation, parse_database_url

__all__ = ["seed_old_tasks"]

_TASKS = """
    INSERT INTO tasks (agent, id, owner, context_id, state, created_at, updated_at, last_seq,
        snapshot)
    SELECT t.agent, t.id || '-old-' || n.i, t.owner, t.context_id, t.state, {at}, {at},
        t.last_seq, t.snapshot
    FROM tasks t, ({numbers}) n WHERE t.agent = {mark} AND t.id = {mark}
"""
_EVENTS = """
    INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)
    SELECT e.agent, e.task_id || '-old-' || n.i, e.seq, e.kind, e.payload, {at}
    FROM task_events e, ({numbers}) n WHERE e.agent = {mark} AND e.task_id = {mark}
"""
_SQLITE_NUMBERS = (
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) SELECT i FROM c"
)
_POSTGRES_NUMBERS = "SELECT generate_series(1, %s) AS i"


def seed_old_tasks(database: str, agent: str, template: str, count: int, *, at: datetime) -> int:
    """Copy task ``template`` of ``agent`` with its events ``count`` times, updated ``at``.

    The copies are ``<template>-old-1`` ... ``-old-<count>``; returns how many
    events were written with them. One transaction.
    """
    location = parse_database_url(database)
    moment = order_key(at)
    if isinstance(location, SqliteLocation):
        with closing(sqlite3.connect(location.path)) as conn, conn:
            parts = {"at": "?", "numbers": _SQLITE_NUMBERS, "mark": "?"}
            # The parameters in the order the statement reads them: at twice, count, keys.
            conn.execute(_TASKS.format(**parts), (moment, moment, count, agent, template))
            cursor = conn.execute(_EVENTS.format(**parts), (moment, count, agent, template))
            return int(cursor.rowcount)
    assert isinstance(location, PostgresLocation)
    conninfo = make_conninfo("", **location.conninfo_kwargs())
    with psycopg.connect(conninfo) as pg:
        parts = {"at": "%s::timestamptz", "numbers": _POSTGRES_NUMBERS, "mark": "%s"}
        pg.execute(_TASKS.format(**parts), (moment, moment, count, agent, template))
        written = pg.execute(_EVENTS.format(**parts), (moment, count, agent, template)).rowcount
        pg.execute("ANALYZE tasks")
        pg.execute("ANALYZE task_events")
        return int(written)

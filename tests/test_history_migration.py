"""A database written before the history left the task row is moved forward on open.

At the previous schema version a task's row held its history (each turn wrote it
whole); the migration drops that copy, and the task reads its history from the log
it always kept. Each backend is put at the previous version with a task of several
turns, as the earlier a2a-trio wrote it, then opened by this one.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import sqlite_utils

from a2a_trio.protocol import Limits
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
from a2a_trio.store import SqliteStore, Store
from a2a_trio.store import schema as sqlite_schema
from a2a_trio.store.postgres import schema as postgres_schema
from a2a_trio.store.url import PostgresLocation

from .postgres import admin_connect, opened_store, postgres_url
from .writes import AGENT, ALICE, following, record, status_event

TASK = "t-talk"
CONTEXT = "ctx-talk"


def said(n: int, role: Role) -> Message:
    return Message(
        message_id=f"m-{n}",
        role=role,
        parts=[Part(text=f"turn {n}")],
        task_id=TASK,
        context_id=CONTEXT,
    )


def asking(n: int) -> TaskStatus:
    return TaskStatus(state=TaskState.INPUT_REQUIRED, message=said(n, Role.AGENT))


#: Three turns: the opening message, then (question, answer) twice, then a question.
SPOKEN = [said(0, Role.USER), said(1, Role.AGENT), said(2, Role.USER), said(3, Role.AGENT)]


def old_rows() -> tuple[str, list[tuple[int, str, str]]]:
    """The task's snapshot as the earlier version stored it (history inside), and its log."""
    opening = Task(id=TASK, context_id=CONTEXT, status=TaskStatus(state=TaskState.SUBMITTED))
    log = [(1, "task", StreamResponse(task=opening.model_copy(update={"history": SPOKEN[:1]})))]
    events: list[tuple[int, str, str]] = [(1, "task", log[0][2].to_json())]
    for seq, item in [(2, asking(1)), (3, SPOKEN[2]), (4, asking(3))]:
        if isinstance(item, Message):
            events.append((seq, "message", item.to_json()))
        else:
            update = TaskStatusUpdateEvent(task_id=TASK, context_id=CONTEXT, status=item)
            events.append((seq, "status", StreamResponse(status_update=update).to_json()))
    snapshot = Task(id=TASK, context_id=CONTEXT, status=asking(3), history=SPOKEN)
    return snapshot.to_json(), events


async def check_moved_forward(store: Store) -> None:
    stored = await store.get_task(AGENT, TASK, owner=ALICE)
    assert stored is not None
    assert stored.task.history is None and stored.last_seq == 4
    assert stored.task.status == asking(3)
    assert await store.history(AGENT, TASK, limits=Limits()) == SPOKEN
    # The next turn follows the log as before.
    working = stored.task.model_copy(update={"status": TaskStatus(state=TaskState.WORKING)})
    [outcome] = await record(store, following(TASK, status_event(5, working)))
    assert outcome.error is None
    assert await store.history(AGENT, TASK, limits=Limits()) == SPOKEN


# --- SQLite -------------------------------------------------------------------------------


def sqlite_at_previous_version(path: Path) -> None:
    here = sqlite_schema.MIGRATIONS.index(sqlite_schema._history_out_of_the_row)
    db = sqlite_utils.Database(path)
    for step in sqlite_schema.MIGRATIONS[:here]:
        step(db)
    db.execute(f"PRAGMA user_version = {here}")
    snapshot, events = old_rows()
    at = "2026-01-01T00:00:00.000000Z"
    db.execute(
        "INSERT INTO tasks (agent, id, owner, context_id, state, created_at, updated_at,"
        " last_seq, snapshot) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [AGENT, TASK, ALICE, CONTEXT, "TASK_STATE_INPUT_REQUIRED", at, at, 4, snapshot],
    )
    for seq, kind, payload in events:
        db.execute(
            "INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [AGENT, TASK, seq, kind, payload, at],
        )
    db.conn.commit()
    db.close()


async def test_a_sqlite_database_of_the_previous_version_moves_its_history_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    sqlite_at_previous_version(path)
    store = SqliteStore(path)
    await store.open()
    try:
        await check_moved_forward(store)
    finally:
        await store.aclose()
    with closing(sqlite3.connect(path)) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        [(snapshot,)] = conn.execute("SELECT snapshot FROM tasks").fetchall()
    assert version == sqlite_schema.SCHEMA_VERSION
    assert "history" not in json.loads(snapshot)


# --- PostgreSQL ---------------------------------------------------------------------------


def postgres_at_previous_version(location: PostgresLocation) -> None:
    here = postgres_schema.MIGRATIONS.index(postgres_schema._HISTORY_OUT_OF_THE_ROW)
    snapshot, events = old_rows()
    with admin_connect(location) as conn, conn.transaction():
        for steps in postgres_schema.MIGRATIONS[:here]:
            for statement in steps:
                conn.execute(statement)
        conn.execute(
            "CREATE TABLE a2a_schema (one boolean PRIMARY KEY DEFAULT true CHECK (one),"
            " version integer NOT NULL)"
        )
        conn.execute("INSERT INTO a2a_schema (version) VALUES (%s)", (here,))
        conn.execute(
            "INSERT INTO tasks (agent, id, owner, context_id, state, created_at, updated_at,"
            " last_seq, snapshot) VALUES (%s, %s, %s, %s, %s, now(), now(), 4, %s)",
            (AGENT, TASK, ALICE, CONTEXT, "TASK_STATE_INPUT_REQUIRED", snapshot),
        )
        for seq, kind, payload in events:
            conn.execute(
                "INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)"
                " VALUES (%s, %s, %s, %s, %s, now())",
                (AGENT, TASK, seq, kind, payload),
            )


async def test_a_postgres_database_of_the_previous_version_moves_its_history_out(
    empty_database: PostgresLocation,
) -> None:
    postgres_at_previous_version(empty_database)
    async with opened_store(postgres_url(empty_database)) as store:
        await check_moved_forward(store)
    with admin_connect(empty_database) as conn:
        version = conn.execute("SELECT version FROM a2a_schema").fetchone()
        snapshot = conn.execute("SELECT snapshot::text FROM tasks").fetchone()
    assert version is not None and version[0] == postgres_schema.SCHEMA_VERSION
    assert snapshot is not None and "history" not in json.loads(str(snapshot[0]))

"""The SQLite schema, versioned and migrated forward on open."""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

from .retention import RUN_COUNTS

__all__ = ["SCHEMA_VERSION", "migrate"]


def _v1(db: sqlite_utils.Database) -> None:
    db["tasks"].create(  # type: ignore[union-attr]
        {
            "agent": str,
            "id": str,
            "owner": str,
            "context_id": str,
            "state": str,
            "created_at": str,
            "updated_at": str,
            "last_seq": int,
            "snapshot": str,
        },
        pk=("agent", "id"),
        not_null={"agent", "id", "owner", "state", "created_at", "updated_at", "last_seq"},
        if_not_exists=True,
    )
    tasks = db.table("tasks")
    tasks.create_index(
        ["agent", "owner", "updated_at", "id"], index_name="tasks_by_owner", if_not_exists=True
    )
    tasks.create_index(
        ["agent", "owner", "context_id"], index_name="tasks_by_context", if_not_exists=True
    )
    tasks.create_index(["state", "updated_at"], index_name="tasks_by_state", if_not_exists=True)
    # The append-only log: one row per recorded event, seq counts per task from 1.
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS task_events (
            agent TEXT NOT NULL,
            task_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (agent, task_id, seq)
        ) WITHOUT ROWID
        """
    )
    db["push_configs"].create(  # type: ignore[union-attr]
        {
            "agent": str,
            "task_id": str,
            "id": str,
            "owner": str,
            "url": str,
            "token": str,
            "auth_scheme": str,
            "auth_credentials": str,
            "created_at": str,
        },
        pk=("agent", "task_id", "id"),
        not_null={"agent", "task_id", "id", "owner", "url", "created_at"},
        if_not_exists=True,
    )


def _v2(db: sqlite_utils.Database) -> None:
    # The push outbox: one row per (event, webhook config), written in the same
    # transaction as the event. A lane (agent, task, config) is delivered in id order.
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS push_outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            notification_id TEXT NOT NULL UNIQUE,
            agent TEXT NOT NULL,
            task_id TEXT NOT NULL,
            config_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            payload TEXT NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending',
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,
            last_error TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )
        """
    )
    db.execute(
        "CREATE INDEX IF NOT EXISTS push_outbox_lanes"
        " ON push_outbox (state, agent, task_id, config_id, id)"
    )
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS push_attempts (
            outbox_id INTEGER NOT NULL,
            attempt INTEGER NOT NULL,
            at TEXT NOT NULL,
            status INTEGER,
            error TEXT,
            duration_ms REAL NOT NULL,
            PRIMARY KEY (outbox_id, attempt)
        ) WITHOUT ROWID
        """
    )


def _v3(db: sqlite_utils.Database) -> None:
    # What a SendMessage started, by its messageId and a digest of its content,
    # so that a client's retry gets the original answer (spec 3.3.1).
    db.execute(
        """
        CREATE TABLE IF NOT EXISTS message_receipts (
            agent TEXT NOT NULL,
            owner TEXT NOT NULL,
            message_id TEXT NOT NULL,
            digest TEXT NOT NULL,
            task_id TEXT,
            seq INTEGER NOT NULL DEFAULT 0,
            answer TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (agent, owner, message_id, digest)
        ) WITHOUT ROWID
        """
    )
    db.execute(
        "CREATE INDEX IF NOT EXISTS message_receipts_by_age ON message_receipts (created_at)"
    )


def _v4(db: sqlite_utils.Database) -> None:
    # The protocol version a push config was created in: its webhooks carry
    # the body that version's receivers read (a2a_trio.store.tasks._queue).
    columns = {row[1] for row in db.execute("PRAGMA table_info(push_configs)").fetchall()}
    if "protocol" not in columns:  # ADD COLUMN has no IF NOT EXISTS
        db.execute("ALTER TABLE push_configs ADD COLUMN protocol TEXT NOT NULL DEFAULT '1.0'")


def _history_out_of_the_row(db: sqlite_utils.Database) -> None:
    # A task's history lives in its event log only (a2a_trio.store.history):
    # every row sheds the copy it kept, so no turn rewrites it again. A row
    # that is not valid JSON keeps it (its reader shows a stand-in anyway).
    db.execute(
        "UPDATE tasks SET snapshot = json_remove(snapshot, '$.history')"
        " WHERE json_valid(snapshot) AND json_type(snapshot, '$.history') IS NOT NULL"
    )


def _retention_runs(db: sqlite_utils.Database) -> None:
    # The retention runs' records (``lease`` is 'held' while one runs: one at
    # a time; a2a_trio.store.retention), and the outbox by task, which a
    # prune batch deletes by.
    db.execute(
        f"""
        CREATE TABLE IF NOT EXISTS retention_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            holder TEXT NOT NULL,
            lease TEXT UNIQUE,
            started_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            finished_at TEXT,
            outcome TEXT,
            {", ".join(f"{name} INTEGER NOT NULL DEFAULT 0" for name in RUN_COUNTS)}
        )
        """
    )
    db.execute("CREATE INDEX IF NOT EXISTS push_outbox_by_task ON push_outbox (agent, task_id, id)")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [
    _v1,
    _v2,
    _v3,
    _v4,
    _history_out_of_the_row,
    _retention_runs,  # retention runs, one at a time (a2a_trio.store.retention)
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite_utils.Database) -> int:
    """Bring the database to :data:`SCHEMA_VERSION`; returns the version found.

    Each step is idempotent (``IF NOT EXISTS``) and ``user_version`` moves
    only after it, so a start killed halfway finishes the step next time.
    """
    found = int(db.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise RuntimeError(
            f"database schema version {found} is newer than this a2a-trio "
            f"understands ({SCHEMA_VERSION}); upgrade a2a-trio"
        )
    for version in range(found, SCHEMA_VERSION):
        MIGRATIONS[version](db)
        db.execute(f"PRAGMA user_version = {version + 1}")
    return found

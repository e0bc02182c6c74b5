"""A round written on SQLite: tasks, their log, receipts, and the webhooks it queues.

:func:`write_round` is the one unit of work behind
:meth:`SqliteStore.record <a2a_trio.store.sqlite.SqliteStore.record>`, run
inside the transaction :class:`.database.Database` opens for it, on the trio
thread or a worker thread; each share all or nothing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from ...protocol import TaskPushNotificationConfig, utcnow
from ...protocol.limits import Limits
from ...protocol.versions import LEGACY_VERSION
from ..history import HISTORY_KINDS, FetchRows, read_history
from ..outbox_caps import OutboxCaps, cap_parameters, cap_statement
from ..records import STREAMED_KINDS, order_key
from ..rounds import Round, Share, ShareOutcome, StaleTask, v0_3_webhook_body
from ..secrets import SecretBox
from ..space import is_disk_full

__all__ = ["WrittenRound", "history_rows", "insert_push_config", "round_chars", "write_round"]


# Not frozen, as the records of a round are not: made for each request (see store.rounds).
@dataclass(slots=True)
class WrittenRound:
    """What :func:`write_round` did: one outcome per share, and the characters it wrote."""

    outcomes: list[ShareOutcome]
    #: Characters of events and snapshots written (a gauge of WAL growth).
    chars: int


def write_round(
    conn: sqlite3.Connection, round: Round, box: SecretBox, caps: OutboxCaps
) -> WrittenRound:
    """Write every share of ``round`` inside the caller's transaction, each all or nothing.

    A share that cannot be stored is rolled back to its savepoint and its
    outcome holds the error; a full disk is raised (no share can be stored).
    """
    now = order_key(utcnow())
    # Usually every share can be stored: all of them under one savepoint. One
    # for each share would copy each page the shares before it had touched into
    # SQLite's sub-journal, a temporary file: five more writes a SendMessage at c=16.
    conn.execute("SAVEPOINT round")
    try:
        stored = [_write_one(conn, share, now, round, box, caps) for share in round.shares]
    except Exception as error:
        if is_disk_full(error):
            raise  # no share of the round can be stored: the transaction fails
        conn.execute("ROLLBACK TO round")
        conn.execute("RELEASE round")
        return _write_each(conn, round, box, caps, now)
    conn.execute("RELEASE round")
    return WrittenRound([ShareOutcome(queued) for queued, _ in stored], sum(c for _, c in stored))


def _write_each(
    conn: sqlite3.Connection, round: Round, box: SecretBox, caps: OutboxCaps, now: str
) -> WrittenRound:
    """A share could not be stored: each in a savepoint of its own, so that the others are."""
    outcomes: list[ShareOutcome] = []
    chars = 0
    for share in round.shares:
        conn.execute("SAVEPOINT share")
        try:
            queued, written = _write_one(conn, share, now, round, box, caps)
        except Exception as error:
            if is_disk_full(error):
                raise
            conn.execute("ROLLBACK TO share")
            conn.execute("RELEASE share")
            outcomes.append(ShareOutcome(error=error))
            continue
        conn.execute("RELEASE share")
        outcomes.append(ShareOutcome(queued))
        chars += written
    return WrittenRound(outcomes, chars)


def _write_one(
    conn: sqlite3.Connection, share: Share, now: str, round: Round, box: SecretBox, caps: OutboxCaps
) -> tuple[int, int]:
    """Write ``share``: the notifications it queued and the characters it wrote."""
    snapshot = share.events[-1].snapshot.to_json() if share.events else ""
    queued = _write_share(conn, share, snapshot, now, round, box, caps)
    return queued, len(snapshot) + sum(len(e.payload) for e in share.events)


def _write_share(
    conn: sqlite3.Connection,
    share: Share,
    text: str,
    now: str,
    round: Round,
    box: SecretBox,
    caps: OutboxCaps,
) -> int:
    """Write one share (inside its savepoint), snapshot as ``text``; the notifications queued."""
    agent, task_id, events = share.agent, share.task_id, share.events
    if events:
        snapshot = events[-1].snapshot
        values = (
            snapshot.status.state.value,
            order_key(snapshot.status.timestamp or utcnow()),
            events[-1].seq,
            text,
            agent,
            task_id,
        )
        # The task row first: it refuses a share that does not follow it
        # (StaleTask) or a task created twice (its key), before the log is touched.
        new = share.new
        if new is None:
            cursor = conn.execute(
                "UPDATE tasks SET state = ?, updated_at = ?, last_seq = ?, snapshot = ?"
                " WHERE agent = ? AND id = ? AND last_seq = ?",
                (*values, share.base_seq),
            )
            if cursor.rowcount != 1:
                raise StaleTask(f"task {task_id!r} of agent {agent!r} is not at {share.base_seq}")
        else:
            conn.execute(
                "INSERT INTO tasks (state, updated_at, last_seq, snapshot, agent, id,"
                " owner, context_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, new.owner, snapshot.context_id, now),
            )
            if new.push_config is not None:
                insert_push_config(conn, agent, new.owner, new.push_config, new.push_protocol, box)
        conn.executemany(
            "INSERT INTO task_events (agent, task_id, seq, kind, payload, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(agent, task_id, e.seq, e.kind, e.payload, now) for e in events],
        )
    for receipt in share.receipts:
        conn.execute(
            "INSERT OR IGNORE INTO message_receipts (agent, owner, message_id, digest,"
            " task_id, seq, answer, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                agent,
                receipt.owner,
                receipt.message_id,
                receipt.digest,
                receipt.task_id,
                receipt.seq,
                receipt.answer,
                now,
            ),
        )
    return _queue(conn, share, now, round.limits, caps) if round.push else 0


def _queue(
    conn: sqlite3.Connection, share: Share, now: str, limits: Limits, caps: OutboxCaps
) -> int:
    """Queue the share's streamed events for each webhook config of its task.

    A config created over 1.0 gets the event as recorded; one created
    over 0.3 gets :func:`~a2a_trio.store.rounds.v0_3_webhook_body`.
    """
    streamed = [e for e in share.events if e.kind in STREAMED_KINDS]
    if not streamed:
        return 0
    key = (share.agent, share.task_id)
    # Even a share that creates its task asks: a config may be saved before
    # its task exists (store_contract: ..._saved_before_its_task_is_created_...).
    protocols = {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT protocol FROM push_configs WHERE agent = ? AND task_id = ?", key
        )
    }
    if not protocols:
        return 0
    queued = 0
    insert = (
        "INSERT INTO push_outbox (notification_id, agent, task_id, config_id, seq, payload,"
        " created_at, updated_at) SELECT lower(hex(randomblob(16))), agent, task_id, id,"
        " ?, ?, ?, ? FROM push_configs WHERE agent = ? AND task_id = ? AND protocol {} ?"
        " ORDER BY created_at, id"
    )
    for event in streamed:
        if protocols - {LEGACY_VERSION}:
            cursor = conn.execute(
                insert.format("!="), (event.seq, event.payload, now, now, *key, LEGACY_VERSION)
            )
            queued += int(cursor.rowcount)
        if LEGACY_VERSION in protocols:
            history = read_history(history_rows(conn, *key), event.seq, limits)
            body = v0_3_webhook_body(event.snapshot, history)
            cursor = conn.execute(
                insert.format("="), (event.seq, body, now, now, *key, LEGACY_VERSION)
            )
            queued += int(cursor.rowcount)
    if queued:
        conn.execute(cap_statement("?", "?"), cap_parameters(caps, *key, now=now))
    return queued


def insert_push_config(
    conn: sqlite3.Connection,
    agent: str,
    owner: str,
    config: TaskPushNotificationConfig,
    protocol: str,
    box: SecretBox,
) -> None:
    """Insert or replace one webhook config, its token and credentials sealed by ``box``."""
    auth = config.authentication
    conn.execute(
        "INSERT OR REPLACE INTO push_configs (agent, task_id, id, owner, url, token,"
        " auth_scheme, auth_credentials, created_at, protocol)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            agent,
            config.task_id,
            config.id,
            owner,
            config.url,
            box.seal(config.token),
            auth.scheme if auth else None,
            box.seal(auth.credentials) if auth else None,
            order_key(utcnow()),
            protocol,
        ),
    )


_HISTORY_ROWS = (
    "SELECT seq, kind, payload FROM task_events WHERE agent = ? AND task_id = ? AND seq < ?"
    " AND kind IN (?, ?, ?) ORDER BY seq DESC LIMIT ?"
)


def history_rows(conn: sqlite3.Connection, agent: str, task_id: str) -> FetchRows:
    """How :func:`~a2a_trio.store.history.read_history` reads the task's log on ``conn``."""

    def fetch(below: int, limit: int) -> list[Any]:
        args = (agent, task_id, below, *HISTORY_KINDS, limit)
        return conn.execute(_HISTORY_ROWS, args).fetchall()

    return fetch


def round_chars(round: Round) -> int:
    """About how much a round writes: its payloads (snapshots grow with them)."""
    return sum(len(event.payload) for share in round.shares for event in share.events)

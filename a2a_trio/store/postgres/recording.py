"""A round of the recorder written to PostgreSQL: one transaction, a savepoint per share.

:func:`write_round` is a plain function of a connection, run by
:meth:`~a2a_trio.store.postgres.Database.run` in a worker thread: the whole
round is one thread hop and one commit, whatever it holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import errors as pg_errors

from ...protocol import TaskPushNotificationConfig
from ...protocol.versions import LEGACY_VERSION
from ..records import STREAMED_KINDS
from ..rounds import Round, Share, ShareOutcome, StaleTask, v0_3_webhook_body
from ..secrets import SecretBox
from .database import Connection
from .times import utc

__all__ = ["insert_push_config", "write_round"]

#: The keys that refuse a share which does not follow its stored task.
_LOG_KEYS = frozenset({"task_events_key", "tasks_key"})

_EVENTS = "task_events (agent, task_id, seq, kind, payload, created_at)"
_EVENT_VALUES = "(%s, %s, %s, %s, %s::json, now())"
_RECEIPTS = "message_receipts (agent, owner, message_id, digest, task_id, seq, answer, created_at)"
_RECEIPT_VALUES = "(%s, %s, %s, %s, %s, %s, %s, now())"
_ROWS_PER_STATEMENT = 1000

# One statement per event queues it for every config of the task, in the
# order the SQLite store queues: 1.0 configs before 0.3 ones, oldest first. A
# lane is delivered in id order, and executemany runs the statements in order.
_QUEUE = """
    INSERT INTO push_outbox
        (notification_id, agent, task_id, config_id, seq, payload, created_at, updated_at)
    SELECT replace(gen_random_uuid()::text, '-', ''), agent, task_id, id, %(seq)s,
        CASE WHEN protocol = %(legacy)s THEN %(legacy_body)s::json ELSE %(payload)s::json END,
        now(), now()
    FROM push_configs WHERE agent = %(agent)s AND task_id = %(task_id)s
    ORDER BY protocol = %(legacy)s, created_at, id
"""


def write_round(conn: Connection, round: Round, box: SecretBox) -> list[ShareOutcome]:
    """Write every share in its own savepoint (inside the caller's transaction)."""
    outcomes: list[ShareOutcome] = []
    for share in round.shares:
        try:
            with conn.transaction():  # nested: a savepoint, rolled back alone on an error
                queued = _write_share(conn, share, round.push, box)
        except Exception as error:
            if not _of_the_share(error):
                raise
            outcomes.append(ShareOutcome(error=_stale_if_forked(error, share)))
        else:
            outcomes.append(ShareOutcome(queued))
    return outcomes


def _of_the_share(error: Exception) -> bool:
    """Whether the error comes from the share's own data, so the round can go on.

    Data exceptions (22: a value PostgreSQL cannot hold), integrity violations
    (23: a taken key) and program limits (54: an id too long for an index) are
    the share's; anything else (a lost connection, a cancelled statement, a
    deadlock, a failed transaction) is the round's, and nothing of it commits.
    """
    if isinstance(error, psycopg.Error):
        return (error.sqlstate or "")[:2] in ("22", "23", "54")
    return True


def _stale_if_forked(error: Exception, share: Share) -> Exception:
    """A taken sequence (or task) is the share not following its task: StaleTask."""
    if isinstance(error, pg_errors.UniqueViolation) and error.diag.constraint_name in _LOG_KEYS:
        what = "exists already" if share.new is not None else f"is past {share.base_seq}"
        stale = StaleTask(f"task {share.task_id!r} of agent {share.agent!r} {what}")
        stale.__cause__ = error
        return stale
    return error


def _write_share(conn: Connection, share: Share, push: bool, box: SecretBox) -> int:
    """Write one share; returns the notifications it queued."""
    agent, task_id, events = share.agent, share.task_id, share.events
    if events:
        snapshot = events[-1].snapshot
        row = {
            "agent": agent,
            "id": task_id,
            "state": snapshot.status.state.value,
            "updated_at": utc(snapshot.status.timestamp) if snapshot.status.timestamp else None,
            "last_seq": events[-1].seq,
            "snapshot": snapshot.to_json(),
        }
        log = [(agent, task_id, e.seq, e.kind, e.payload) for e in events]
        new = share.new
        if new is None:
            updated = conn.execute(
                "UPDATE tasks SET state = %(state)s,"
                " updated_at = coalesce(%(updated_at)s::timestamptz, now()),"
                " last_seq = %(last_seq)s, snapshot = %(snapshot)s::json"
                " WHERE agent = %(agent)s AND id = %(id)s AND last_seq = %(base_seq)s",
                {**row, "base_seq": share.base_seq},
            ).rowcount
            if updated != 1:
                raise StaleTask(f"task {task_id!r} of agent {agent!r} is not at {share.base_seq}")
            _insert(conn, _EVENTS, _EVENT_VALUES, log)
        else:
            # The log's key refuses a task that exists before anything else is written.
            _insert(conn, _EVENTS, _EVENT_VALUES, log)
            if new.push_config is not None:
                insert_push_config(conn, agent, new.owner, new.push_config, new.push_protocol, box)
            conn.execute(
                "INSERT INTO tasks (agent, id, owner, context_id, state, created_at, updated_at,"
                " last_seq, snapshot) VALUES (%(agent)s, %(id)s, %(owner)s, %(context_id)s,"
                " %(state)s, now(), coalesce(%(updated_at)s::timestamptz, now()),"
                " %(last_seq)s, %(snapshot)s::json)",
                {**row, "owner": new.owner, "context_id": snapshot.context_id},
            )
    if share.receipts:
        receipts = [
            (agent, r.owner, r.message_id, r.digest, r.task_id, r.seq, r.answer)
            for r in share.receipts
        ]
        _insert(conn, _RECEIPTS, _RECEIPT_VALUES, receipts, "ON CONFLICT DO NOTHING")
    return _queue(conn, share) if push else 0


def _insert(
    conn: Connection, into: str, values: str, rows: Sequence[Sequence[object]], then: str = ""
) -> None:
    """Insert rows with as few statements as PostgreSQL allows: one for any usual share.

    Not executemany: that pipelines, and psycopg logs every pipeline a refused
    share aborts (a task created twice) as an error. A statement takes at most
    65,535 parameters, hence the chunks.
    """
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        chunk = rows[start : start + _ROWS_PER_STATEMENT]
        conn.execute(
            f"INSERT INTO {into} VALUES {', '.join([values] * len(chunk))} {then}",
            [value for row in chunk for value in row],
        )


def _queue(conn: Connection, share: Share) -> int:
    """Queue the share's streamed events for each webhook config of its task.

    A config created over 1.0 gets the event as recorded; one created over 0.3
    gets :func:`~a2a_trio.store.rounds.v0_3_webhook_body`, worked out only
    when the task has such a config.
    """
    streamed = [e for e in share.events if e.kind in STREAMED_KINDS]
    if not streamed:
        return 0
    protocols = {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT protocol FROM push_configs WHERE agent = %s AND task_id = %s",
            (share.agent, share.task_id),
        )
    }
    if not protocols:
        return 0
    legacy = LEGACY_VERSION in protocols
    with conn.cursor() as cursor:
        cursor.executemany(
            _QUEUE,
            [
                {
                    "agent": share.agent,
                    "task_id": share.task_id,
                    "seq": e.seq,
                    "payload": e.payload,
                    "legacy": LEGACY_VERSION,
                    "legacy_body": v0_3_webhook_body(e.snapshot) if legacy else None,
                }
                for e in streamed
            ],
        )
        return max(cursor.rowcount, 0)


def insert_push_config(
    conn: Connection,
    agent: str,
    owner: str,
    config: TaskPushNotificationConfig,
    protocol: str,
    box: SecretBox,
) -> None:
    """Insert or replace a config (a replaced one counts as new: it moves to the end)."""
    auth = config.authentication
    conn.execute(
        "INSERT INTO push_configs (agent, task_id, id, owner, url, token, auth_scheme,"
        " auth_credentials, created_at, protocol) VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
        " clock_timestamp(), %s) ON CONFLICT (agent, task_id, id) DO UPDATE SET"
        " owner = EXCLUDED.owner, url = EXCLUDED.url, token = EXCLUDED.token,"
        " auth_scheme = EXCLUDED.auth_scheme, auth_credentials = EXCLUDED.auth_credentials,"
        " created_at = EXCLUDED.created_at, protocol = EXCLUDED.protocol",
        (
            agent,
            config.task_id,
            config.id,
            owner,
            config.url,
            box.seal(config.token),
            auth.scheme if auth else None,
            box.seal(auth.credentials) if auth else None,
            protocol,
        ),
    )

"""A round of the recorder written to PostgreSQL: one transaction, each share all or nothing.

:func:`write_round` is a plain function of a connection, run by
:meth:`~a2a_trio.store.postgres.Database.run` in a worker thread: the whole
round is one thread hop and one commit, whatever it holds.

Most rounds hold one share (one task had events). Such a share needs no
savepoint, which would cost two more round trips (~0.12 ms and ~80 µs of
CPU on the development machine, an eighth of the round): the transaction is
its all-or-nothing, and :class:`RefusedShare` carries its error out of the
rolled-back transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from ...protocol import Task, TaskPushNotificationConfig
from ...protocol.limits import Limits
from ...protocol.versions import LEGACY_VERSION
from ..coordination import (
    DONE,
    EVENTS,
    LEASES,
    CarriedRound,
    done_payload,
    events_payload,
)
from ..history import HISTORY_KINDS, read_history
from ..records import READ_BACK_KINDS, STREAMED_KINDS
from ..rounds import LeaseHeld, Round, Share, ShareOutcome, StaleTask, v0_3_webhook_body
from ..secrets import SecretBox
from .database import Connection
from .times import utc

Cursor = psycopg.Cursor[tuple[Any, ...]]

__all__ = ["HISTORY_ROWS", "RefusedShare", "insert_push_config", "write_round"]

#: The history rows :func:`~a2a_trio.store.history.read_history` reads (a page, newest first).
HISTORY_ROWS = (
    "SELECT seq, kind, payload::text FROM task_events WHERE agent = %s AND task_id = %s"
    " AND seq < %s AND kind = ANY(%s::text[]) ORDER BY seq DESC LIMIT %s"
)

#: The keys that refuse a share which does not follow its stored task.
_LOG_KEYS = frozenset({"task_events_key", "tasks_key"})
#: The key that refuses a share taking a lease somebody holds (see Share.lease).
_LEASE_KEY = "task_leases_pkey"

_EVENTS = "task_events (agent, task_id, seq, kind, payload, created_at)"
_EVENT_VALUES = "(%s, %s, %s, %s, %s::json, now())"
_RECEIPTS = "message_receipts (agent, owner, message_id, digest, task_id, seq, answer, created_at)"
_RECEIPT_VALUES = "(%s, %s, %s, %s, %s, %s, %s, now())"
_ROWS_PER_STATEMENT = 1000
#: The protocols of the written task's webhook configs, in a RETURNING clause.
_CONFIG_PROTOCOLS = (
    "ARRAY(SELECT DISTINCT protocol FROM push_configs"
    " WHERE push_configs.agent = tasks.agent AND push_configs.task_id = tasks.id)"
)

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


class RefusedShare(Exception):
    """The only share of a round cannot be stored: its transaction is to roll back."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def write_round(conn: Connection, round: Round, box: SecretBox) -> list[ShareOutcome]:
    """Write every share in its own savepoint (inside the caller's transaction).

    Raises :class:`RefusedShare` for a round of one share that cannot be
    stored, so that the caller's transaction rolls back: its outcome is
    ``ShareOutcome(error=refused.error)``.
    """
    if len(round.shares) == 1:
        [share] = round.shares
        try:
            return [ShareOutcome(_write_share(conn, share, round.push, box, round.limits))]
        except Exception as error:
            if not _of_the_share(error):
                raise
            raise RefusedShare(_stale_if_forked(error, share)) from None
    # Tasks' rows (and their leases) locked in one order by every process: two
    # rounds that write the same tasks wait for each other, never in a cycle
    # (a continuation writes its task before it holds the task's lease).
    order = sorted(range(len(round.shares)), key=lambda n: _lock_order(round.shares[n]))
    ordered = dataclasses.replace(round, shares=[round.shares[n] for n in order])
    outcomes = [_NOT_WRITTEN] * len(order)
    for n, outcome in zip(order, _write_ordered(conn, ordered, box), strict=True):
        outcomes[n] = outcome
    return outcomes


def _lock_order(share: Share) -> tuple[str, str]:
    return share.agent, share.task_id


_NOT_WRITTEN = ShareOutcome()


def _write_ordered(conn: Connection, round: Round, box: SecretBox) -> list[ShareOutcome]:
    try:
        # Usually every share can be stored: all of them at once, one savepoint
        # for the lot rather than one each (two round trips a share).
        with conn.transaction():
            return _write_together(conn, round, box)
    except Exception as error:
        if not _of_the_share(error):
            raise
    # One could not: each share on its own savepoint, so that the others commit.
    outcomes: list[ShareOutcome] = []
    for share in round.shares:
        try:
            with conn.transaction():  # nested: a savepoint, rolled back alone on an error
                queued = _write_share(conn, share, round.push, box, round.limits)
        except Exception as error:
            if not _of_the_share(error):
                raise
            outcomes.append(ShareOutcome(error=_stale_if_forked(error, share)))
        else:
            outcomes.append(ShareOutcome(queued))
    return outcomes


def _write_together(conn: Connection, round: Round, box: SecretBox) -> list[ShareOutcome]:
    """Every share of the round, their statements pipelined: one round trip for all.

    Raises what the first share that cannot be stored raised (the caller
    then writes the shares one by one). Webhook rows are queued after, for
    the tasks that have configs.
    """
    if any(len(share.events) > _ROWS_PER_STATEMENT for share in round.shares):
        return [
            ShareOutcome(_write_share(conn, s, round.push, box, round.limits)) for s in round.shares
        ]
    sent: list[Cursor | None] = []
    with conn.pipeline():
        for share in round.shares:
            sent.append(_send_log(conn, share, box, round.push) if share.events else None)
            if share.receipts:
                _insert_receipts(conn, share)
    outcomes = []
    for share, cursor in zip(round.shares, sent, strict=True):
        protocols = _logged(share, cursor, round.push) if cursor is not None else set()
        queued = _queue(conn, share, protocols, round.limits) if protocols else 0
        outcomes.append(ShareOutcome(queued))
    return outcomes


def _of_the_share(error: Exception) -> bool:
    """Whether the error comes from the share's own data, so the round can go on.

    Data exceptions (SQLSTATE class 22: a value PostgreSQL cannot hold, such as
    a NUL in an id, which psycopg refuses before sending), integrity violations
    (23: a taken key) and program limits (54: an id too long for an index) are
    the share's; anything else (a lost connection, a cancelled statement, a
    deadlock, a failed transaction) is the round's, and nothing of it commits.
    """
    if isinstance(error, psycopg.DataError | psycopg.IntegrityError):
        return True
    if isinstance(error, psycopg.Error):
        return (error.sqlstate or "").startswith("54")
    return True


def _stale_if_forked(error: Exception, share: Share) -> Exception:
    """A taken sequence (or task) is the share not following its task: StaleTask.

    A taken lease (the share was to take it, see ``Share.lease``): LeaseHeld.
    """
    if not isinstance(error, pg_errors.UniqueViolation):
        return error
    if share.lease is not None and error.diag.constraint_name == _LEASE_KEY:
        held = LeaseHeld(f"task {share.task_id!r} of agent {share.agent!r} is leased")
        held.__cause__ = error
        return held
    if error.diag.constraint_name in _LOG_KEYS:
        what = "exists already" if share.new is not None else f"is past {share.base_seq}"
        stale = StaleTask(f"task {share.task_id!r} of agent {share.agent!r} {what}")
        stale.__cause__ = error
        return stale
    return error


def _write_share(conn: Connection, share: Share, push: bool, box: SecretBox, limits: Limits) -> int:
    """Write one share; returns the notifications it queued."""
    protocols: set[str] = set()
    if share.events:
        protocols = _write_log(conn, share, box, push)
    if share.receipts:
        _insert_receipts(conn, share)
    return _queue(conn, share, protocols, limits) if protocols else 0


def _insert_receipts(conn: Connection, share: Share) -> None:
    receipts = [
        (share.agent, r.owner, r.message_id, r.digest, r.task_id, r.seq, r.answer)
        for r in share.receipts
    ]
    _insert(conn, _RECEIPTS, _RECEIPT_VALUES, receipts, "ON CONFLICT DO NOTHING")


def _write_log(conn: Connection, share: Share, box: SecretBox, push: bool) -> set[str]:
    """The share's events and its task row: one statement (up to 1,000 events).

    One statement, not one per table: a round trip is an eighth of a round's
    time and CPU. For a new task the log's key refuses a task that exists
    before its push config is written; an existing task moves only from the
    share's base sequence, or no event is logged and the share is stale.

    With ``push``, the same statement returns the protocols of the task's
    webhook configs (the share's own included), so that a task without any,
    the usual case, costs no query more.
    """
    cursor = _send_log(conn, share, box, push)
    if len(share.events) > _ROWS_PER_STATEMENT:
        _insert(conn, _EVENTS, _EVENT_VALUES, _log_rows(share)[_ROWS_PER_STATEMENT:])
    return _logged(share, cursor, push)


def _log_rows(share: Share) -> list[tuple[object, ...]]:
    return [(share.agent, share.task_id, e.seq, e.kind, e.payload) for e in share.events]


def _send_log(conn: Connection, share: Share, box: SecretBox, push: bool) -> Cursor:
    """Send the statement of :func:`_write_log` (and a new task's push config)."""
    agent, task_id, events = share.agent, share.task_id, share.events
    snapshot = events[-1].snapshot
    timestamp = snapshot.status.timestamp
    stored = snapshot.to_json()
    state, at = snapshot.status.state.value, utc(timestamp) if timestamp else None
    task = (state, at, events[-1].seq, stored)
    first = _log_rows(share)[:_ROWS_PER_STATEMENT]
    values = ", ".join([_EVENT_VALUES] * len(first))
    logged = [value for event in first for value in event]
    configs = _CONFIG_PROTOCOLS if push else "NULL"
    new = share.new
    # Wakes the other processes' readers of the task, once this commits (a
    # NOTIFY repeated in one transaction is sent once). The base lets a feed
    # that never saw the task read exactly this round back from the log; what
    # the wake-up carries (share.carry) spares it that read.
    carried = None
    if share.carry:
        written: list[tuple[int, str, str]] = [
            (e.seq, e.kind, e.payload) for e in events if e.kind in READ_BACK_KINDS
        ]
        carried = CarriedRound(share.base_seq, stored, written)
    moved = events_payload(agent, task_id, events[-1].seq, share.base_seq, carried)
    if new is None:
        # The lease taken or let go with the events (see Share.lease and
        # .release): no round trip of its own. A held lease refuses the insert
        # (the share is LeaseHeld); a release wakes whoever waits for it.
        lease, leased, released, unleased = "", [], "", []
        if share.lease is not None:
            lease = (
                ", leased AS (INSERT INTO task_leases (agent, task_id, holder, token, since)"
                " SELECT %s, %s, %s, %s, now() WHERE EXISTS (SELECT FROM moved))"
            )
            leased = [agent, task_id, *share.lease]
        if share.release is not None:
            lease += ", gone AS (DELETE FROM task_leases WHERE token = %s RETURNING agent, task_id)"
            released = (
                f", (SELECT count(pg_notify('{LEASES}', json_build_array(agent, task_id)::text))"
                " FROM gone)"
            )
            unleased = [share.release]
        ended, row, done, wake = _ends(share, " AND EXISTS (SELECT FROM moved)")
        return conn.execute(
            "WITH moved AS (UPDATE tasks SET state = %s,"
            " updated_at = coalesce(%s::timestamptz, now()), last_seq = %s, snapshot = %s::json"
            f" WHERE agent = %s AND id = %s AND last_seq = %s RETURNING {configs}){lease}{ended}"
            f" INSERT INTO {_EVENTS} SELECT * FROM (VALUES {values}) AS event"
            " WHERE EXISTS (SELECT FROM moved)"
            f" RETURNING (SELECT * FROM moved), pg_notify('{EVENTS}', %s){released}{done}",
            [
                *(*task, agent, task_id, share.base_seq, *leased, *unleased, *row),
                *(*logged, moved, *wake),
            ],
        )
    assert share.lease is None and share.release is None, "a new task's lease is new.lease"
    lease, leased = "", []
    if new.lease is not None:
        lease = (
            ", leased AS (INSERT INTO task_leases (agent, task_id, holder, token, since)"
            " VALUES (%s, %s, %s, %s, now()))"
        )
        leased = [agent, task_id, *new.lease]
    ended, row, done, wake = _ends(share, "")
    cursor = conn.execute(
        f"WITH logged AS (INSERT INTO {_EVENTS} VALUES {values}){lease}{ended}"
        " INSERT INTO tasks (state, updated_at, last_seq, snapshot, agent, id, owner,"
        " context_id, created_at)"
        " VALUES (%s, coalesce(%s::timestamptz, now()), %s, %s::json, %s, %s, %s, %s, now())"
        f" RETURNING {configs}, pg_notify('{EVENTS}', %s){done}",
        [
            *(*logged, *leased, *row, *task, agent, task_id, new.owner),
            *(snapshot.context_id, moved, *wake),
        ],
    )
    if new.push_config is not None:
        insert_push_config(conn, agent, new.owner, new.push_config, new.push_protocol, box)
    return cursor


def _ends(share: Share, only_if: str) -> tuple[str, list[object], str, list[object]]:
    """End the share's queued execution (``share.ends``) with its events: its row
    done, its web process woken as :meth:`Coordination.finish_queued` would.

    A CTE and its parameter (the row), a RETURNING column and its parameter
    (the wake-up); all empty for a share without one.
    """
    finish = share.ends
    if finish is None:
        return "", [], "", []
    ended = (
        ", ended AS (UPDATE queued_executions SET state = 'done', answer = NULL, error = NULL,"
        f" updated_at = now() WHERE id = %s{only_if} RETURNING id)"
    )
    done = f", (SELECT count(pg_notify('{DONE}', %s)) FROM ended)"
    return ended, [finish.execution.id], done, [done_payload(finish)]


def _logged(share: Share, cursor: Cursor, push: bool) -> set[str]:
    """Check what :func:`_send_log` did; the protocols of the task's webhook configs."""
    new = share.new
    if new is None and cursor.rowcount != min(len(share.events), _ROWS_PER_STATEMENT):
        raise StaleTask(
            f"task {share.task_id!r} of agent {share.agent!r} is not at {share.base_seq}"
        )
    row = cursor.fetchone()
    protocols = set(row[0] or ()) if push and row is not None else set()
    if push and new is not None and new.push_config is not None:
        protocols.add(new.push_protocol)
    return protocols


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


def _queue(conn: Connection, share: Share, protocols: set[str], limits: Limits) -> int:
    """Queue the share's streamed events for each webhook config of its task.

    A config created over 1.0 gets the event as recorded; one created over 0.3
    (``protocols`` says whether there is one) gets
    :func:`~a2a_trio.store.rounds.v0_3_webhook_body`, worked out only then.
    """
    streamed = [e for e in share.events if e.kind in STREAMED_KINDS]
    if not streamed:
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
                    "legacy_body": _v0_3_body(conn, share, e.seq, e.snapshot, limits)
                    if legacy
                    else None,
                }
                for e in streamed
            ],
        )
        return max(cursor.rowcount, 0)


def _v0_3_body(conn: Connection, share: Share, seq: int, snapshot: Task, limits: Limits) -> str:
    """A 0.3 webhook's body: the task after event ``seq``, its history read from the log."""

    def fetch(below: int, limit: int) -> list[tuple[Any, ...]]:
        args = (share.agent, share.task_id, below, list(HISTORY_KINDS), limit)
        return conn.execute(HISTORY_ROWS, args).fetchall()

    return v0_3_webhook_body(snapshot, read_history(fetch, seq, limits))


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

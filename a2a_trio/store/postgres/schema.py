"""The PostgreSQL schema, versioned and migrated forward on open.

The tables mirror SQLite's (:mod:`a2a_trio.store.schema`) in PostgreSQL's own
types. Three choices shape them:

- Text that goes back out verbatim is ``json``, not ``jsonb``. The event log's
  payloads are relayed as stored (an SSE resume must send the bytes the live
  stream sent), and ``jsonb`` reorders keys, drops duplicates and rewrites
  whitespace; it also refuses ``\\u0000``, which the protocol accepts in any
  string and SQLite stores. ``json`` keeps the text as written and still checks
  that it is JSON; its operators (``->``, ``->>``) serve ad-hoc queries, and a
  cast to ``jsonb`` serves heavier ones. Snapshots are ``json`` too: a task that
  SQLite stores must store here.
- Identifiers are ``COLLATE "C"``: byte order, which for UTF-8 is code point
  order, as SQLite's BINARY. ListTasks then orders ties by id the same way on
  both backends, and no locale upgrade of the host can reorder an index.
- Times are ``timestamptz`` (microseconds, as SQLite's order keys); the store
  turns them back into the same strings on the way out.

Each version's statements run in one transaction (PostgreSQL's DDL is
transactional) under an advisory lock, so a start killed halfway leaves the
previous version, and processes starting together on an empty database
migrate it once.
"""

from __future__ import annotations

from ..retention import RUN_COUNTS
from .database import Connection

#: The advisory lock held (for one transaction) while the schema is migrated:
#: "a2a!" and 1. Another application on the database would have to pick the
#: same pair to collide.
LOCK_CLASS = int.from_bytes(b"a2a!", "big")
MIGRATING = 1

__all__ = ["LOCK_CLASS", "MIGRATING", "SCHEMA_VERSION", "migrate", "schema_version"]

_V1 = (
    # What this database is for: the development secret key, when none is configured.
    """
    CREATE TABLE a2a_settings (
        key text COLLATE "C" PRIMARY KEY,
        value text NOT NULL
    )
    """,
    """
    CREATE TABLE tasks (
        agent text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        owner text COLLATE "C" NOT NULL,
        context_id text COLLATE "C",
        state text NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        last_seq bigint NOT NULL,
        snapshot json NOT NULL,
        CONSTRAINT tasks_key PRIMARY KEY (agent, id)
    )
    """,
    # ListTasks: the owner's tasks, newest first, then by context or by state.
    "CREATE INDEX tasks_by_owner ON tasks (agent, owner, updated_at DESC, id DESC)",
    "CREATE INDEX tasks_by_context ON tasks (agent, owner, context_id, updated_at DESC, id DESC)",
    "CREATE INDEX tasks_by_owner_state ON tasks (agent, owner, state, updated_at DESC, id DESC)",
    # Unfinished tasks at start-up; finished ones by age for prune.
    "CREATE INDEX tasks_by_state ON tasks (state, updated_at)",
    # The append-only log: one row per recorded event, seq counts per task from 1.
    # Its key refuses a task created twice and a share that forks the log.
    """
    CREATE TABLE task_events (
        agent text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        kind text NOT NULL,
        payload json NOT NULL,
        created_at timestamptz NOT NULL,
        CONSTRAINT task_events_key PRIMARY KEY (agent, task_id, seq)
    )
    """,
    # token and auth_credentials are sealed (Fernet): see a2a_trio.store.secrets.
    # protocol is the version the config was created in; its webhooks carry that body.
    """
    CREATE TABLE push_configs (
        agent text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        id text COLLATE "C" NOT NULL,
        owner text COLLATE "C" NOT NULL,
        url text NOT NULL,
        token text,
        auth_scheme text,
        auth_credentials text,
        created_at timestamptz NOT NULL,
        protocol text NOT NULL DEFAULT '1.0',
        PRIMARY KEY (agent, task_id, id)
    )
    """,
    # The push outbox: one row per (event, webhook config), written in the same
    # transaction as the event. A lane (agent, task, config) is delivered in id order.
    """
    CREATE TABLE push_outbox (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        notification_id text COLLATE "C" NOT NULL UNIQUE,
        agent text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        config_id text COLLATE "C" NOT NULL,
        seq bigint NOT NULL,
        payload json NOT NULL,
        state text NOT NULL DEFAULT 'pending'
            CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at double precision NOT NULL DEFAULT 0,
        last_error text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
    )
    """,
    # Only pending rows are looked up by lane; delivered ones pile up until prune.
    "CREATE INDEX push_outbox_lanes ON push_outbox (agent, task_id, config_id, id)"
    " WHERE state = 'pending'",
    "CREATE INDEX push_outbox_by_task ON push_outbox (agent, task_id, id)",
    """
    CREATE TABLE push_attempts (
        outbox_id bigint NOT NULL,
        attempt integer NOT NULL,
        at timestamptz NOT NULL,
        status integer,
        error text,
        duration_ms double precision NOT NULL,
        PRIMARY KEY (outbox_id, attempt)
    )
    """,
    # What a SendMessage started, by its messageId and a digest of its content,
    # so that a client's retry gets the original answer (spec 3.3.1).
    """
    CREATE TABLE message_receipts (
        agent text COLLATE "C" NOT NULL,
        owner text COLLATE "C" NOT NULL,
        message_id text COLLATE "C" NOT NULL,
        digest text COLLATE "C" NOT NULL,
        task_id text COLLATE "C",
        seq bigint NOT NULL DEFAULT 0,
        answer text,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (agent, owner, message_id, digest)
    )
    """,
    "CREATE INDEX message_receipts_by_age ON message_receipts (created_at)",
)

# Several processes on one database (docs/deployment.md, "Several processes"):
# who serves it, and which of them holds each task. A member is alive while
# its heartbeat is younger than its lease; leases die with their holder.
_V2 = (
    """
    CREATE TABLE a2a_members (
        id text COLLATE "C" PRIMARY KEY,
        host text NOT NULL,
        pid integer NOT NULL,
        lease_seconds double precision NOT NULL,
        started_at timestamptz NOT NULL,
        heartbeat_at timestamptz NOT NULL
    )
    """,
    """
    CREATE TABLE task_leases (
        agent text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        holder text COLLATE "C" NOT NULL,
        token text COLLATE "C" NOT NULL UNIQUE,
        since timestamptz NOT NULL,
        -- Another member waits for it: the holder does not take it again meanwhile.
        wanted_by text COLLATE "C",
        PRIMARY KEY (agent, task_id)
    )
    """,
    "CREATE INDEX task_leases_by_holder ON task_leases (holder)",
    # One member at a time delivers a webhook lane, in order.
    """
    CREATE TABLE lane_leases (
        agent text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        config_id text COLLATE "C" NOT NULL,
        holder text COLLATE "C" NOT NULL,
        since timestamptz NOT NULL,
        PRIMARY KEY (agent, task_id, config_id)
    )
    """,
    "CREATE INDEX lane_leases_by_holder ON lane_leases (holder)",
    # Executions of queued agents, waiting for a worker (state queued), taken
    # by one (claimed: nothing ran yet), running, then done with the direct
    # answer or the error the web process hands its client.
    """
    CREATE TABLE queued_executions (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        agent text COLLATE "C" NOT NULL,
        task_id text COLLATE "C" NOT NULL,
        request json NOT NULL,
        state text NOT NULL DEFAULT 'queued'
            CHECK (state IN ('queued', 'claimed', 'running', 'done')),
        claimed_by text COLLATE "C",
        answer text,
        error json,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
    )
    """,
    "CREATE INDEX queued_executions_waiting ON queued_executions (agent, id)"
    " WHERE state = 'queued'",
    "CREATE INDEX queued_executions_taken ON queued_executions (claimed_by)"
    " WHERE state IN ('claimed', 'running')",
)

_HISTORY_OUT_OF_THE_ROW = (
    # A task's history lives in its event log only (a2a_trio.store.history):
    # every row sheds the copy it kept, so no turn rewrites it again. Through
    # jsonb, which refuses \u0000: such a row keeps it, and its reader drops it.
    "UPDATE tasks SET snapshot = (snapshot::jsonb - 'history')::json"
    " WHERE json_typeof(snapshot -> 'history') IS NOT NULL"
    r" AND position('\u0000' in snapshot::text) = 0",
)

# What each member reports of itself with its heartbeat (role, agents,
# counters), for the console's members view and deployment-wide counters.
_MEMBERS_REPORT = (
    "ALTER TABLE a2a_members ADD COLUMN role text NOT NULL DEFAULT '',"
    " ADD COLUMN agents text NOT NULL DEFAULT '', ADD COLUMN stats json",
)

# When each member's lease runs out, in order: a heartbeat asks for the
# earliest only (a2a_trio.store.postgres.cluster.SOMEONE_DEAD) instead of
# reading every member, which made the beats of N processes read N² rows.
# ``timestamptz + interval`` is not immutable; in UTC the same instant is.
_MEMBERS_BY_EXPIRY = (
    "CREATE INDEX a2a_members_by_expiry ON a2a_members"
    " (((heartbeat_at AT TIME ZONE 'UTC') + lease_seconds * interval '1 second'))",
)

# The retention runs' records: ``lease`` is 'held' while one runs (unique: one
# at a time; a2a_trio.store.retention).
_RETENTION_RUNS = (
    f"""
    CREATE TABLE retention_runs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        holder text COLLATE "C" NOT NULL,
        lease text UNIQUE,
        started_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        finished_at timestamptz,
        outcome text,
        {", ".join(f"{name} bigint NOT NULL DEFAULT 0" for name in RUN_COUNTS)}
    )
    """,
)

MIGRATIONS: list[tuple[str, ...]] = [
    _V1,
    _V2,
    _HISTORY_OUT_OF_THE_ROW,
    _MEMBERS_REPORT,  # members report role, agents and counters (the console)
    _MEMBERS_BY_EXPIRY,  # a heartbeat reads one member's expiry, not every member
    _RETENTION_RUNS,  # retention runs, one at a time (a2a_trio.store.retention)
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: Connection) -> int:
    """Bring the database to :data:`SCHEMA_VERSION`; returns the version found.

    Runs in the caller's transaction: the advisory lock taken first is held
    until it ends, so a second process waits here and then finds the work done.
    """
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, MIGRATING))
    _refuse_other_encodings(conn)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS a2a_schema ("
        " one boolean PRIMARY KEY DEFAULT true CHECK (one), version integer NOT NULL)"
    )
    found = schema_version(conn)
    if found > SCHEMA_VERSION:
        raise RuntimeError(
            f"database schema version {found} is newer than this a2a-trio "
            f"understands ({SCHEMA_VERSION}); upgrade a2a-trio"
        )
    for version in range(found, SCHEMA_VERSION):
        for statement in MIGRATIONS[version]:
            conn.execute(statement)
    if found < SCHEMA_VERSION:
        conn.execute(
            "INSERT INTO a2a_schema (version) VALUES (%s)"
            " ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version",
            (SCHEMA_VERSION,),
        )
    return found


def _refuse_other_encodings(conn: Connection) -> None:
    """Any encoding but UTF8 refuses (or, as SQL_ASCII, mangles) text the protocol accepts."""
    row = conn.execute("SELECT current_setting('server_encoding')").fetchone()
    encoding = row[0] if row else "unknown"
    if isinstance(encoding, bytes):  # what psycopg hands back from a SQL_ASCII database
        encoding = encoding.decode("ascii", "replace")
    if encoding != "UTF8":
        raise RuntimeError(
            f"the database's encoding is {encoding}, not UTF8:"
            " create it with ENCODING 'UTF8' for a2a-trio"
        )


def schema_version(conn: Connection) -> int:
    """The version the database is at (0: none of a2a-trio's tables yet)."""
    table = conn.execute("SELECT to_regclass('a2a_schema')").fetchone()
    if table is None or table[0] is None:
        return 0
    row = conn.execute("SELECT version FROM a2a_schema").fetchone()
    return 0 if row is None else int(row[0])

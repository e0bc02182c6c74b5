"""A fresh PostgreSQL database for the test run, found at A2A_TRIO_TEST_POSTGRES.

Where no server answers, the tests that need one are skipped with the reason (pytest's
``-ra`` summary shows it); under ``CI=true`` that is a failure instead, so CI cannot go
green by skipping them.

A test that touches storage takes ``database``: a URL, once for a SQLite file of its
own and once for the run's PostgreSQL database emptied of the previous test's rows, so
every such test runs on both backends (issue 14).
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, closing, contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from a2a_trio.store import SqliteStore, Store
from a2a_trio.store.factory import store_at
from a2a_trio.store.postgres import PostgresStore
from a2a_trio.store.url import PostgresLocation, SqliteLocation, parse_database_url

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
#: Every backend a storage test runs on; the ids in the tests' names.
BACKENDS = ("sqlite", "postgresql")
#: The tables that hold data (not the schema version, not the development key).
DATA_TABLES = (
    "tasks, task_events, push_configs, push_outbox, push_attempts, message_receipts,"
    " a2a_members, task_leases, lane_leases, queued_executions, retention_runs"
)


def _server() -> PostgresLocation:
    location = parse_database_url(
        os.environ.get("A2A_TRIO_TEST_POSTGRES", DEFAULT_SERVER), key="A2A_TRIO_TEST_POSTGRES"
    )
    assert isinstance(location, PostgresLocation), "A2A_TRIO_TEST_POSTGRES is not PostgreSQL"
    return location


def admin_connect(location: PostgresLocation) -> psycopg.Connection[tuple[object, ...]]:
    """A plain autocommit connection, for set-up and for playing the other client."""
    conninfo = make_conninfo("", **location.conninfo_kwargs())
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresLocation]:
    """Where the run's own database is; created now, dropped when the run ends."""
    server = _server()
    try:
        admin_connect(server).close()
    except psycopg.OperationalError as error:
        # One line, so the -ra summary shows all of it.
        detail = " ".join(str(error).split())
        reason = f"no PostgreSQL at {server.display} (A2A_TRIO_TEST_POSTGRES): {detail}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with fresh_database(server, prefix="a2a_trio_test") as location:
        yield location


@contextmanager
def fresh_database(
    server: PostgresLocation, *options: str, prefix: str | None = None
) -> Iterator[PostgresLocation]:
    """A new database on ``server``, without a2a-trio's tables; dropped afterwards.

    Named ``prefix`` (by default ``server``'s own database) and a random
    suffix; ``options`` go to CREATE DATABASE (an encoding, say).
    """
    name = f"{prefix or server.dbname}_{uuid.uuid4().hex[:12]}"
    with admin_connect(server) as admin:
        create = sql.SQL("CREATE DATABASE {} " + " ".join(options))
        admin.execute(create.format(sql.Identifier(name)))
    try:
        yield dataclasses.replace(server, dbname=name)
    finally:
        # A connection of its own: a test may have restarted the server meanwhile.
        # FORCE ends connections a failed test left behind (PostgreSQL 13+).
        with admin_connect(server) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@asynccontextmanager
async def database_of_tasks(
    server: PostgresLocation, count: int
) -> AsyncIterator[tuple[PostgresLocation, PostgresStore]]:
    """A new database whose store holds Alice's tasks ``t-0`` to ``t-{count - 1}``:
    the database and its store, open while in use."""
    from .store_contract import make_task  # it imports the writes, which need no database
    from .writes import create

    with fresh_database(server) as location:
        store = PostgresStore(location)
        await store.open()
        try:
            for n in range(count):
                await create(store, make_task(f"t-{n}"))
            yield location, store
        finally:
            await store.aclose()


@pytest.fixture
def empty_database(postgres: PostgresLocation) -> Iterator[PostgresLocation]:
    """A database of the test's own, without a2a-trio's tables."""
    with fresh_database(postgres) as location:
        yield location


# --- a database for every backend ------------------------------------------------------------


def sqlite_url(path: Path) -> str:
    """``sqlite:////abs/path``: an absolute path after the URL's three slashes."""
    return f"sqlite:///{path.resolve()}"


def postgres_url(location: PostgresLocation) -> str:
    """The ``postgresql://`` URL of ``location`` (the password and libpq options kept)."""
    who = ""
    if location.user is not None:
        who = quote(location.user, safe="")
        if location.password is not None:
            who += ":" + quote(location.password, safe="")
        who += "@"
    host = f"[{location.host}]" if ":" in location.host else location.host
    url = f"postgresql://{who}{host}:{location.port}/{quote(location.dbname, safe='')}"
    return f"{url}?{urlencode(location.options)}" if location.options else url


#: The identity columns' sequences of the data tables back to their start, as
#: TRUNCATE ... RESTART IDENTITY does.
_RESTART_IDENTITIES = f"""
DO $$ DECLARE sequence text; BEGIN
    FOR sequence IN
        SELECT pg_get_serial_sequence(attrelid::regclass::text, attname) FROM pg_attribute
        WHERE attrelid = ANY('{{{DATA_TABLES.replace(" ", "")}}}'::regclass[])
        AND attidentity <> ''
    LOOP
        EXECUTE format('ALTER SEQUENCE %s RESTART', sequence);
    END LOOP;
END $$
"""


def empty_data_tables(location: PostgresLocation) -> None:
    """Delete every row a previous test left; nothing to do before the first store migrated.

    DELETE, not TRUNCATE: the few rows a test leaves go in a tenth of the time
    TRUNCATE takes to make (and flush) new files for eleven tables, and this
    runs before every PostgreSQL test.
    """
    deletes = "; ".join(f"DELETE FROM {table.strip()}" for table in DATA_TABLES.split(","))
    # Before the first store migrated a new database, there are no tables to empty.
    with (
        admin_connect(location) as admin,
        suppress(psycopg.errors.UndefinedTable),
        admin.transaction(),
    ):
        # A store a test failed to close holds no lock between its statements; should
        # something hold one all the same, fail here rather than hang the run.
        admin.execute("SET LOCAL lock_timeout = '10s'")
        # Seen by the next connection at once; only the flush to disk is not awaited.
        admin.execute("SET LOCAL synchronous_commit = off")
        admin.execute(deletes)
        admin.execute(_RESTART_IDENTITIES)


def database_for(backend: str, directory: Path, request: pytest.FixtureRequest) -> str:
    """An empty database of ``backend`` as a URL: a new file in ``directory``, or the run's."""
    if backend == "sqlite":
        return sqlite_url(directory / "a2a.db")
    assert backend == "postgresql", backend
    location: PostgresLocation = request.getfixturevalue("postgres")
    empty_data_tables(location)
    return postgres_url(location)


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database as a URL, once per backend (``[sqlite]`` and ``[postgresql]``)."""
    return database_for(request.param, tmp_path, request)


@asynccontextmanager
async def opened_store(database: str) -> AsyncIterator[Store]:
    """A store on ``database``, open for the block (closed however the block ends)."""
    store = store_at(database)
    await store.open()
    try:
        yield store
    finally:
        await store.aclose()


def is_postgres(database: str) -> bool:
    """Whether the URL names a PostgreSQL database (else a SQLite file)."""
    return isinstance(parse_database_url(database), PostgresLocation)


def rows(database: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run ``query`` on the database as an operator would; ``?`` marks a parameter."""
    location = parse_database_url(database)
    if isinstance(location, SqliteLocation):
        with closing(sqlite3.connect(location.path)) as conn:
            return conn.execute(query, params).fetchall()
    with admin_connect(location) as admin:
        return admin.execute(query.replace("?", "%s"), params).fetchall()


def execute(database: str, statement: str, *params: Any) -> None:
    """Run one statement on the database and commit it; ``?`` marks a parameter."""
    location = parse_database_url(database)
    if isinstance(location, SqliteLocation):
        with closing(sqlite3.connect(location.path)) as conn, conn:
            conn.execute(statement, params)
        return
    with admin_connect(location) as admin:
        admin.execute(statement.replace("?", "%s"), params)


@contextmanager
def postgres_changes(
    location: PostgresLocation, do: Sequence[str], undo: Sequence[str]
) -> Iterator[None]:
    """Run the ``do`` statements on PostgreSQL for the block, then ``undo`` them.

    The run's database is shared by every test: a trigger or a renamed table must
    not outlive the test that made it.
    """
    try:
        with admin_connect(location) as admin:
            for statement in do:
                admin.execute(statement)
        yield
    finally:
        with admin_connect(location) as admin:
            admin.execute("SET lock_timeout = '10s'")
            for statement in undo:
                admin.execute(statement)


@contextmanager
def broken(
    store: Store,
    *,
    sqlite: str,
    postgresql: tuple[Sequence[str], Sequence[str]],
    sqlite_undo: str = "",
) -> Iterator[None]:
    """A real fault in the store's database for the block: SQL of its own backend.

    ``sqlite`` is a script run on the store's own connection (a pragma such as
    ``foreign_keys`` is the connection's), ``sqlite_undo`` the script that ends
    the fault (none: the file goes with the test); ``postgresql`` is (do, undo)
    statements, undone in any case (the database is the run's).
    """
    if isinstance(store, PostgresStore):
        with postgres_changes(store.location, *postgresql):
            yield
    else:
        assert isinstance(store, SqliteStore), store
        store.connect().db.conn.executescript(sqlite)
        yield
        if sqlite_undo:
            store.connect().db.conn.executescript(sqlite_undo)


def raising_trigger(
    name: str, table: str, when: str, *, deferred: bool = False, on: str = "INSERT"
) -> tuple[list[str], list[str]]:
    """A trigger that fails an ``on`` (insert) of ``table`` where ``when`` holds: (do, undo).

    The error is a check violation (SQLSTATE 23514), an error of the written data
    as SQLite's ``RAISE(ABORT, ...)`` is; ``deferred`` raises it at COMMIT instead.
    """
    function = (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" RAISE EXCEPTION '{name}' USING ERRCODE = 'check_violation'; END $$"
    )
    if deferred:
        trigger = (
            f"CREATE CONSTRAINT TRIGGER {name} AFTER {on} ON {table}"
            f" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ({when})"
            f" EXECUTE FUNCTION {name}()"
        )
    else:
        trigger = (
            f"CREATE TRIGGER {name} BEFORE {on} ON {table}"
            f" FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION {name}()"
        )
    undo = [f"DROP TRIGGER IF EXISTS {name} ON {table}", f"DROP FUNCTION IF EXISTS {name}()"]
    return [function, trigger], undo


#: A process that serves the database at ``argv[1]`` (holds it as a server's
#: store does) until killed.
_HOLDER = """
import sys, trio
from a2a_trio.store.factory import store_at
async def main():
    store = store_at(sys.argv[1])  # held here: a collected store lets the database go
    await store.open(exclusive=True)
    print("holding", flush=True)
    await trio.sleep_forever()
trio.run(main)
"""


@contextmanager
def served_elsewhere(database: str) -> Iterator[subprocess.Popen[str]]:
    """Another process serving ``database`` (a URL) for the block; killed at its end."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, database], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "holding\n"
        yield holder
    finally:
        holder.kill()
        holder.wait(10)

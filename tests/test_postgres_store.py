"""The PostgreSQL store against a real server: the store contract, then what only it has.

The contract (tests/store_contract.py) runs here on a fresh PostgreSQL
database; below it are the schema and its migrations, serving from several stores, the
development key and the errors, which differ from SQLite's by nature.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import trio
from cryptography.fernet import Fernet

from a2a_trio.protocol import InvalidParamsError, TaskState
from a2a_trio.store import SecretKeyError
from a2a_trio.store.postgres import Database, DatabaseUnavailable, PoolSettings, PostgresStore
from a2a_trio.store.postgres.keys import DEVELOPMENT_KEY
from a2a_trio.store.postgres.schema import SCHEMA_VERSION
from a2a_trio.store.records import encode_page_token
from a2a_trio.store.rounds import StaleTask
from a2a_trio.store.url import PostgresLocation

from .postgres import (
    admin_connect,
    empty_data_tables,
    fresh_database,
    postgres_url,
    served_elsewhere,
)
from .store_contract import *  # noqa: F403  (the contract runs against this backend)
from .store_contract import HOOK, make_task, push_config
from .writes import AGENT, ALICE, create, creating, record


@pytest.fixture
async def store(postgres: PostgresLocation) -> AsyncIterator[PostgresStore]:
    """A store on the run's database, emptied of the previous test's rows."""
    opened = PostgresStore(postgres)
    await opened.open()
    try:
        empty_data_tables(postgres)
        yield opened
    finally:
        await opened.aclose()


def query(location: PostgresLocation, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with admin_connect(location) as admin:
        return admin.execute(statement, params).fetchall()


def stored_version(location: PostgresLocation) -> int:
    [(version,)] = query(location, "SELECT version FROM a2a_schema")
    return int(version)


def schema_listing(location: PostgresLocation) -> list[tuple[Any, ...]]:
    """Every column and index of the public schema, to compare before and after."""
    columns = query(
        location,
        "SELECT table_name, column_name, data_type, is_nullable, column_default,"
        " collation_name FROM information_schema.columns WHERE table_schema = 'public'"
        " ORDER BY table_name, column_name",
    )
    indexes = query(
        location,
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    )
    return columns + indexes


# --- the schema and its migrations ---------------------------------------------------------


async def test_a_new_database_is_migrated_to_the_current_version(
    empty_database: PostgresLocation,
) -> None:
    store = PostgresStore(empty_database)
    await store.open()
    await store.aclose()
    assert stored_version(empty_database) == SCHEMA_VERSION
    tables = {
        row[0]
        for row in query(
            empty_database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        )
    }
    assert tables == {
        "a2a_schema",
        "a2a_settings",
        "tasks",
        "task_events",
        "push_configs",
        "push_outbox",
        "push_attempts",
        "message_receipts",
        "a2a_members",
        "task_leases",
        "lane_leases",
        "queued_executions",
        "retention_runs",
    }


async def test_stored_text_keeps_its_bytes_and_times_their_zone(
    empty_database: PostgresLocation,
) -> None:
    store = PostgresStore(empty_database)
    await store.open()
    await store.aclose()
    types = dict(
        ((table, column), kind)
        for table, column, kind in query(
            empty_database,
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public'",
        )
    )
    assert types["task_events", "payload"] == "json"
    assert types["tasks", "snapshot"] == "json"
    assert types["push_outbox", "payload"] == "json"
    assert types["tasks", "updated_at"] == "timestamp with time zone"
    assert types["push_outbox", "id"] == "bigint"
    assert types["push_outbox", "next_attempt_at"] == "double precision"


async def test_reopening_a_current_database_changes_nothing(
    empty_database: PostgresLocation,
) -> None:
    first = PostgresStore(empty_database)
    await first.open()
    await create(first, make_task("t-1"))
    await first.aclose()
    before = schema_listing(empty_database)
    second = PostgresStore(empty_database)
    await second.open()
    try:
        assert await second.get_task(AGENT, "t-1", owner=ALICE) is not None
    finally:
        await second.aclose()
    assert schema_listing(empty_database) == before
    assert stored_version(empty_database) == SCHEMA_VERSION


async def test_a_database_from_a_newer_version_is_refused(
    empty_database: PostgresLocation,
) -> None:
    store = PostgresStore(empty_database)
    await store.open()
    await store.aclose()
    query(empty_database, "UPDATE a2a_schema SET version = version + 1 RETURNING version")
    with pytest.raises(
        RuntimeError,
        match=(
            f"database schema version {SCHEMA_VERSION + 1} is newer than this a2a-trio"
            rf" understands \({SCHEMA_VERSION}\); upgrade a2a-trio"
        ),
    ):
        await PostgresStore(empty_database).open()


async def test_stores_opening_an_empty_database_together_migrate_it_once(
    empty_database: PostgresLocation,
) -> None:
    stores = [PostgresStore(empty_database) for _ in range(4)]
    async with trio.open_nursery() as nursery:
        for store in stores:
            nursery.start_soon(store.open)
    try:
        await stores[0].save_push_config(AGENT, ALICE, push_config())
        for store in stores:  # one development key for all
            assert await store.get_push_config(AGENT, "t-1", "c-1", owner=None) == push_config()
    finally:
        for store in stores:
            await store.aclose()
    assert stored_version(empty_database) == SCHEMA_VERSION
    assert len(query(empty_database, "SELECT * FROM a2a_settings")) == 1


#: Opens (and so migrates) the database named by argv, then closes.
OPENER = """
import sys, trio
from a2a_trio.store.postgres import PostgresStore
from a2a_trio.store.url import PostgresLocation
host, port, dbname, user = sys.argv[1:5]
store = PostgresStore(PostgresLocation(host, int(port), dbname, user or None))
async def main():
    await store.open()
    await store.aclose()
trio.run(main)
print("opened")
"""


def location_argv(location: PostgresLocation) -> list[str]:
    return [location.host, str(location.port), location.dbname, location.user or ""]


async def test_processes_opening_an_empty_database_together_both_succeed(
    empty_database: PostgresLocation,
) -> None:
    results: list[subprocess.CompletedProcess[bytes]] = []

    async def open_in_a_process() -> None:
        command = [sys.executable, "-c", OPENER, *location_argv(empty_database)]
        results.append(await trio.run_process(command, capture_stdout=True, check=False))

    async with trio.open_nursery() as nursery:
        for _ in range(2):
            nursery.start_soon(open_in_a_process)
    assert [(r.returncode, r.stdout) for r in results] == [(0, b"opened\n")] * 2
    assert stored_version(empty_database) == SCHEMA_VERSION


async def test_a_database_not_in_utf8_is_refused(postgres: PostgresLocation) -> None:
    options = ("ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'",)
    with (
        fresh_database(postgres, *options) as ascii_database,
        pytest.raises(RuntimeError, match="encoding is SQL_ASCII, not UTF8"),
    ):
        await PostgresStore(ascii_database).open()


# --- serving: any number of processes on one database -------------------------------------


async def test_several_stores_serve_one_database_at_once(postgres: PostgresLocation) -> None:
    first, second = PostgresStore(postgres), PostgresStore(postgres)
    await first.open(exclusive=True)
    try:
        await second.open(exclusive=True)
        try:
            await create(first, make_task("t-shared"))
            assert await second.get_task(AGENT, "t-shared", owner=ALICE) is not None
            assert first.coordination is not None and second.coordination is not None
            assert first.coordination.member != second.coordination.member
        finally:
            await second.aclose()
    finally:
        await first.aclose()


async def test_a_reader_reads_and_prunes_a_database_being_served(
    postgres: PostgresLocation,
) -> None:
    server = PostgresStore(postgres)
    await server.open(exclusive=True)
    reader = PostgresStore(postgres)
    await reader.open()
    try:
        await create(server, make_task("t-read", state=TaskState.COMPLETED))
        assert await reader.get_task(AGENT, "t-read", owner=ALICE) is not None
        assert (await reader.prune(datetime.now(UTC)))["tasks"] >= 1
        assert await server.get_task(AGENT, "t-read", owner=ALICE) is None
    finally:
        await reader.aclose()
        await server.aclose()


async def test_serving_a_database_another_process_serves_is_allowed(
    postgres: PostgresLocation,
) -> None:
    with served_elsewhere(postgres_url(postgres)):
        store = PostgresStore(postgres)
        await store.open(exclusive=True)
        await store.aclose()


# --- connecting, keys, secrets ----------------------------------------------------------------

NOWHERE = PostgresLocation(host="127.0.0.1", port=1, dbname="a2a", password="s3cret")


async def test_an_unreachable_database_is_unavailable_without_the_password() -> None:
    store = PostgresStore(NOWHERE, pool=PoolSettings(connect_timeout=2))
    assert store.display == "127.0.0.1:1/a2a"
    with pytest.raises(DatabaseUnavailable) as raised:
        await store.open(exclusive=True)
    message = str(raised.value)
    assert "127.0.0.1:1/a2a" in message
    assert "s3cret" not in message and "s3cret" not in repr(store.location)


async def test_a_missing_database_is_unavailable(postgres: PostgresLocation) -> None:
    missing = dataclasses.replace(postgres, dbname="a2a_trio_no_such_db", password="s3cret")
    with pytest.raises(DatabaseUnavailable, match="a2a_trio_no_such_db") as raised:
        await PostgresStore(missing).open()
    assert "s3cret" not in str(raised.value)


async def test_a_malformed_key_is_refused_before_connecting() -> None:
    with pytest.raises(SecretKeyError, match="32 url-safe base64-encoded bytes"):
        await PostgresStore(NOWHERE, secret_key="too short").open()


async def test_a_store_that_is_not_open_says_so(postgres: PostgresLocation) -> None:
    store = PostgresStore(postgres)
    with pytest.raises(RuntimeError, match=f"the store for {postgres.display} is not open"):
        await store.list_tasks(AGENT, ALICE)
    await store.aclose()  # closing what never opened is harmless


async def test_a_closed_store_can_be_opened_again(postgres: PostgresLocation) -> None:
    store = PostgresStore(postgres)
    await store.open()
    await store.aclose()
    await store.aclose()
    await store.open()
    try:
        assert await store.get_task(AGENT, "nope", owner=None) is None
    finally:
        await store.aclose()


async def test_push_secrets_are_sealed_in_the_database(
    store: PostgresStore, postgres: PostgresLocation
) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    [row] = query(postgres, "SELECT push_configs::text FROM push_configs")
    assert HOOK in row[0]
    assert "opaque-verification-token-7f3a" not in row[0]
    assert "bearer-credentials-91c2" not in row[0]


async def test_a_development_key_is_made_once_and_kept_in_the_database(
    empty_database: PostgresLocation,
) -> None:
    first = PostgresStore(empty_database)
    await first.open()
    await first.save_push_config(AGENT, ALICE, push_config())
    await first.aclose()
    [(key,)] = query(
        empty_database, "SELECT value FROM a2a_settings WHERE key = %s", (DEVELOPMENT_KEY,)
    )
    Fernet(key)  # a usable Fernet key
    second = PostgresStore(empty_database)
    await second.open()
    try:
        assert await second.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
    finally:
        await second.aclose()
    assert query(empty_database, "SELECT value FROM a2a_settings") == [(key,)]


async def test_a_configured_key_is_used_and_no_development_key_is_made(
    empty_database: PostgresLocation,
) -> None:
    key = Fernet.generate_key()
    first = PostgresStore(empty_database, secret_key=key)
    await first.open()
    await first.save_push_config(AGENT, ALICE, push_config())
    await first.aclose()
    assert query(empty_database, "SELECT * FROM a2a_settings") == []
    same = PostgresStore(empty_database, secret_key=key.decode())
    other = PostgresStore(empty_database)  # the development key, made now
    await same.open()
    await other.open()
    try:
        assert await same.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
        with pytest.raises(SecretKeyError):
            await other.get_push_config(AGENT, "t-1", "c-1", owner=ALICE)
    finally:
        await same.aclose()
        await other.aclose()


# --- what only PostgreSQL refuses ------------------------------------------------------------


@pytest.mark.parametrize(
    "moment",
    [
        "not a time",
        "",
        "2025-13-01T00:00:00.000000Z",
        "10:00",
        "0001-01-01T00:00+01:00",
        "9999-12-31T23:59-01:00",
    ],
)
async def test_a_page_token_whose_time_is_not_a_time_is_invalid_params(
    store: PostgresStore, moment: str
) -> None:
    await create(store, make_task("t-1"))
    with pytest.raises(InvalidParamsError, match="pageToken"):
        await store.list_tasks(AGENT, ALICE, page_token=encode_page_token(moment, "t-1"))


async def test_an_id_too_long_for_an_index_fails_its_share_alone(store: PostgresStore) -> None:
    huge = os.urandom(8000).hex()  # does not compress below the index's limit
    too_long, fine = await record(store, creating(make_task(huge)), creating(make_task("t-2")))
    assert isinstance(too_long.error, psycopg.errors.ProgramLimitExceeded)
    assert fine.error is None
    assert await store.get_task(AGENT, "t-2", owner=ALICE) is not None


@pytest.mark.parametrize("alone", [True, False], ids=["alone", "with-another"])
async def test_a_nul_in_an_id_fails_its_share_alone(store: PostgresStore, alone: bool) -> None:
    # The protocol accepts U+0000 in a contextId; no PostgreSQL text can hold it.
    shares = [creating(make_task("t-1", context_id="ctx\0"))]
    if not alone:
        shares.append(creating(make_task("t-2")))
    outcomes = await record(store, *shares)
    assert isinstance(outcomes[0].error, psycopg.DataError)
    assert [outcome.error for outcome in outcomes[1:]] == [None] * (len(shares) - 1)
    assert await store.get_task(AGENT, "t-1", owner=None) is None


async def test_a_task_created_twice_is_a_stale_share(store: PostgresStore) -> None:
    await create(store, make_task("t-1"))
    [outcome] = await record(store, creating(make_task("t-1")))
    assert isinstance(outcome.error, StaleTask)
    assert isinstance(outcome.error.__cause__, psycopg.errors.UniqueViolation)
    assert "exists already" in str(outcome.error)


async def test_a_round_is_one_trip_to_a_worker_thread(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops = 0
    run = Database.run

    async def counted(self: Database, work: Any, **options: Any) -> Any:
        nonlocal hops
        hops += 1
        return await run(self, work, **options)

    monkeypatch.setattr(Database, "run", counted)
    shares = [
        creating(make_task(f"t-{n}"), push_config=push_config(task_id=f"t-{n}")) for n in range(3)
    ]
    outcomes = await record(store, *shares, push=True)
    assert [outcome.queued for outcome in outcomes] == [1, 1, 1]
    assert hops == 1


async def test_members_of_a_database_from_before_member_reports_read_back_after_it(
    empty_database: PostgresLocation,
) -> None:
    from a2a_trio.store.postgres.schema import MIGRATIONS

    # The database as the version before the one that added role, agents and stats made it.
    [mine] = [n for n, m in enumerate(MIGRATIONS) if any("ADD COLUMN role" in s for s in m)]
    with admin_connect(empty_database) as admin:
        admin.execute(
            "CREATE TABLE a2a_schema (one boolean PRIMARY KEY DEFAULT true CHECK (one),"
            " version integer NOT NULL)"
        )
        for statements in MIGRATIONS[:mine]:
            for statement in statements:
                admin.execute(statement)
        admin.execute("INSERT INTO a2a_schema (version) VALUES (%s)", (mine,))
        admin.execute(
            "INSERT INTO a2a_members (id, host, pid, lease_seconds, started_at, heartbeat_at)"
            " VALUES ('old', 'elsewhere', 7, 3600, now(), now())"
        )
    store = PostgresStore(empty_database)
    await store.open()
    try:
        coordination = store.coordination
        assert coordination is not None
        [old] = (await coordination.fleet()).members
        assert (old.id, old.host, old.pid, old.role, old.agents) == ("old", "elsewhere", 7, "", [])
        await coordination.join()
        await coordination.report("worker", ["a", "b"], {"eventsPerSecond": 2.0})
        members = {m.id: m for m in (await coordination.fleet()).members}
        me = members[coordination.member]
        assert (me.role, me.agents, me.stats) == ("worker", ["a", "b"], {"eventsPerSecond": 2.0})
    finally:
        await store.aclose()
    assert stored_version(empty_database) == SCHEMA_VERSION


async def test_a_database_at_the_members_expiry_index_gains_the_retention_runs_next(
    empty_database: PostgresLocation,
) -> None:
    from a2a_trio.store.postgres.schema import MIGRATIONS

    # Version 5 (the index on when members' leases run out) came first; the
    # retention runs are the step after it, so a database at 5 gets them on open.
    [expiry] = [n for n, m in enumerate(MIGRATIONS) if any("a2a_members_by_expiry" in s for s in m)]
    [runs] = [n for n, m in enumerate(MIGRATIONS) if any("retention_runs" in s for s in m)]
    assert (expiry, runs) == (4, 5)
    with admin_connect(empty_database) as admin:
        admin.execute(
            "CREATE TABLE a2a_schema (one boolean PRIMARY KEY DEFAULT true CHECK (one),"
            " version integer NOT NULL)"
        )
        for statements in MIGRATIONS[:runs]:
            for statement in statements:
                admin.execute(statement)
        admin.execute("INSERT INTO a2a_schema (version) VALUES (%s)", (runs,))
    store = PostgresStore(empty_database)
    await store.open()
    try:
        run = await store.retention.begin_run("me", 60.0)
        assert run is not None
        assert [record.holder for record in await store.retention.runs()] == ["me"]
    finally:
        await store.aclose()
    assert stored_version(empty_database) == SCHEMA_VERSION == runs + 1

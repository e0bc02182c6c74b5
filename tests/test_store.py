"""The SQLite store: the store contract on a SQLite file, then what only SQLite has.

The contract (tests/store_contract.py) runs here on a fresh SQLite file, as
tests/test_postgres_store.py runs it on PostgreSQL. Opening and reopening a
store, and its secret key, are tested on both backends (the ``database``
fixture); how SQLite keeps its file (the key file beside it, what the file
holds, the schema version, the serving lock) takes ``sqlite_store`` or builds a
:class:`~a2a_trio.store.SqliteStore` itself.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
import trio
from cryptography.fernet import Fernet

from a2a_trio.protocol.models import TaskState
from a2a_trio.store import DatabaseInUseError, SecretKeyError, SqliteStore, Store
from a2a_trio.store.factory import store_at
from a2a_trio.store.lock import ServingLock
from a2a_trio.store.schema import SCHEMA_VERSION, migrate

from .postgres import served_elsewhere, sqlite_url
from .store_contract import *  # noqa: F403  (the contract runs against this backend)
from .store_contract import ids, make_task, push_config
from .writes import AGENT, ALICE, create, creating, record


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Path:
    return tmp_path / "a2a.db"


@pytest.fixture
async def sqlite_store(sqlite_file: Path) -> AsyncIterator[SqliteStore]:
    """An opened SQLite store on ``sqlite_file``."""
    store = SqliteStore(sqlite_file)
    await store.open()
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
def store(sqlite_store: SqliteStore) -> SqliteStore:
    """The store the contract takes: a SQLite store on an empty file."""
    return sqlite_store


async def opened(database: str, **options: object) -> Store:
    """A new store at ``database`` (a URL), opened (``options`` go to ``store_at``)."""
    store = store_at(database, **options)  # type: ignore[arg-type]
    await store.open()
    return store


# --- opening, reopening, the secret key: every backend ---------------------------------


async def test_reopening_the_database_keeps_its_tasks(database: str) -> None:
    first = await opened(database)
    try:
        await create(first, make_task("t-1"))
    finally:
        await first.aclose()
    second = await opened(database)
    try:
        stored = await second.get_task(AGENT, "t-1", owner=ALICE)
        assert stored is not None and stored.last_seq == 1
    finally:
        await second.aclose()


async def test_secrets_sealed_with_another_key_do_not_open(database: str) -> None:
    first = await opened(database, secret_key=Fernet.generate_key())
    try:
        await first.save_push_config(AGENT, ALICE, push_config())
    finally:
        await first.aclose()
    second = await opened(database, secret_key=Fernet.generate_key())
    try:
        with pytest.raises(SecretKeyError):
            await second.get_push_config(AGENT, "t-1", "c-1", owner=ALICE)
    finally:
        await second.aclose()


async def test_a_malformed_key_is_refused(database: str) -> None:
    with pytest.raises(SecretKeyError, match="32 url-safe base64-encoded bytes"):
        await opened(database, secret_key="too short")


# --- secrets ---------------------------------------------------------------------------


def database_bytes(sqlite_file: Path, *, wal: bool = True) -> bytes:
    """Everything SQLite wrote for the database: the main file and (``wal``) its write-ahead log."""
    files = (
        [sqlite_file, sqlite_file.with_name(sqlite_file.name + "-wal")] if wal else [sqlite_file]
    )
    return b"".join(path.read_bytes() for path in files if path.exists())


async def test_push_secrets_are_not_stored_in_plaintext(
    sqlite_store: SqliteStore, sqlite_file: Path
) -> None:
    config = push_config()
    await sqlite_store.save_push_config(AGENT, ALICE, config)
    written = database_bytes(sqlite_file)
    assert config.url.encode() in written  # the row is in what we read
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


async def test_push_secrets_sent_with_a_message_are_not_stored_in_plaintext(
    sqlite_store: SqliteStore, sqlite_file: Path
) -> None:
    [outcome] = await record(sqlite_store, creating(make_task("t-1"), push_config=push_config()))
    assert outcome.error is None
    written = database_bytes(sqlite_file)
    assert b"https://hooks.example.com/a2a-webhook" in written
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


async def test_push_secrets_are_not_stored_in_plaintext_after_a_checkpoint(
    sqlite_store: SqliteStore, sqlite_file: Path
) -> None:
    await sqlite_store.save_push_config(AGENT, ALICE, push_config())
    sqlite_store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    written = database_bytes(sqlite_file, wal=False)
    assert b"https://hooks.example.com/a2a-webhook" in written
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


async def test_a_development_key_is_kept_beside_the_database(
    sqlite_store: SqliteStore, sqlite_file: Path
) -> None:
    key_file = sqlite_file.with_name("a2a.db.key")
    assert key_file.exists()
    Fernet(key_file.read_bytes().strip())  # a usable Fernet key
    assert key_file.stat().st_mode & 0o077 == 0


async def test_reopening_the_database_reuses_its_key_and_decrypts(sqlite_file: Path) -> None:
    first = SqliteStore(sqlite_file)
    await first.open()
    await first.save_push_config(AGENT, ALICE, push_config())
    await first.aclose()
    key = sqlite_file.with_name("a2a.db.key").read_bytes()

    second = SqliteStore(sqlite_file)
    await second.open()
    try:
        assert await second.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
    finally:
        await second.aclose()
    assert sqlite_file.with_name("a2a.db.key").read_bytes() == key


async def test_a_configured_key_is_used_instead_of_a_development_key(tmp_path: Path) -> None:
    key = Fernet.generate_key()
    store = SqliteStore(tmp_path / "a2a.db", secret_key=key)
    await store.open()
    try:
        await store.save_push_config(AGENT, ALICE, push_config())
    finally:
        await store.aclose()
    assert not (tmp_path / "a2a.db.key").exists()
    reopened = SqliteStore(tmp_path / "a2a.db", secret_key=key.decode())
    await reopened.open()
    try:
        assert await reopened.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
    finally:
        await reopened.aclose()


# --- schema --------------------------------------------------------------------------


def user_version(sqlite_file: Path) -> int:
    with sqlite3.connect(sqlite_file) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_a_sqlite_store_opens_its_database_on_first_use(sqlite_file: Path) -> None:
    store = SqliteStore(sqlite_file)
    try:
        assert not sqlite_file.exists()
        assert trio.run(partial(store.get_task, AGENT, "t-1", owner=None)) is None
        assert user_version(sqlite_file) == SCHEMA_VERSION
    finally:
        store.close()


async def test_opening_an_open_store_again_keeps_its_connection(
    sqlite_store: SqliteStore,
) -> None:
    db = sqlite_store.db
    await sqlite_store.open()
    assert sqlite_store.connect() is sqlite_store
    assert sqlite_store.db is db


async def test_a_new_database_is_at_the_current_schema_version(
    sqlite_store: SqliteStore, sqlite_file: Path
) -> None:
    assert user_version(sqlite_file) == SCHEMA_VERSION


def test_a_database_from_a_newer_version_is_refused(sqlite_file: Path) -> None:
    with sqlite3.connect(sqlite_file) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="newer than this a2a-trio understands"):
        SqliteStore(sqlite_file).connect()


async def test_migrating_a_current_database_changes_nothing(
    sqlite_store: SqliteStore, sqlite_file: Path
) -> None:
    await create(sqlite_store, make_task("t-1"))
    assert migrate(sqlite_store.db) == SCHEMA_VERSION
    assert user_version(sqlite_file) == SCHEMA_VERSION
    assert ids((await sqlite_store.list_tasks(AGENT, ALICE)).tasks) == ["t-1"]


async def test_a_migration_interrupted_before_its_version_bump_finishes_next_time(
    sqlite_store: SqliteStore, sqlite_file: Path
) -> None:
    await create(sqlite_store, make_task("t-1"))
    await sqlite_store.save_push_config(AGENT, ALICE, push_config())
    sqlite_store.db.execute("PRAGMA user_version = 0")  # the tables exist, the bump did not happen
    assert migrate(sqlite_store.db) == 0
    assert user_version(sqlite_file) == SCHEMA_VERSION
    assert await sqlite_store.get_task(AGENT, "t-1", owner=ALICE) is not None
    assert await sqlite_store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()


async def test_a_round_whose_commit_fails_stores_nothing_and_raises(
    sqlite_store: SqliteStore,
) -> None:
    # A deferred foreign key broken by one share fails the COMMIT itself.
    sqlite_store.db.conn.executescript(
        "PRAGMA foreign_keys = ON;"
        " CREATE TABLE doom_parent (id INTEGER PRIMARY KEY);"
        " CREATE TABLE doom_child (parent INTEGER"
        "  REFERENCES doom_parent (id) DEFERRABLE INITIALLY DEFERRED);"
        " CREATE TRIGGER doom AFTER INSERT ON tasks WHEN NEW.id = 'doomed'"
        " BEGIN INSERT INTO doom_child VALUES (42); END;"
    )
    with pytest.raises(sqlite3.IntegrityError):
        await record(sqlite_store, creating(make_task("bystander")), creating(make_task("doomed")))
    assert (await sqlite_store.list_tasks(AGENT, ALICE)).total_size == 0
    # The transaction did not stay open: the next round is stored as usual.
    await create(sqlite_store, make_task("later"))
    assert ids((await sqlite_store.list_tasks(AGENT, ALICE)).tasks) == ["later"]


# --- serving: one process per database ----------------------------------------------


@pytest.fixture
def held_elsewhere(sqlite_file: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process serving ``sqlite_file``; killed at the end if still alive."""
    with served_elsewhere(sqlite_url(sqlite_file)) as holder:
        yield holder


async def test_serving_a_database_another_process_serves_is_refused_naming_it_and_the_fix(
    sqlite_file: Path, held_elsewhere: subprocess.Popen[str]
) -> None:
    with pytest.raises(DatabaseInUseError) as refused:
        await SqliteStore(sqlite_file).open(exclusive=True)
    message = str(refused.value)
    assert (
        f"{sqlite_file} is already served by another process (pid {held_elsewhere.pid})" in message
    )
    assert f"{sqlite_file}.lock" in message
    assert "served by one process only" in message
    assert "hypercorn without --workers" in message


def test_a_database_whose_server_was_killed_can_be_served_at_once(
    sqlite_file: Path, held_elsewhere: subprocess.Popen[str]
) -> None:
    os.kill(held_elsewhere.pid, signal.SIGKILL)
    held_elsewhere.wait(10)
    SqliteStore(sqlite_file).connect(exclusive=True).close()


async def test_a_second_store_serving_the_database_in_this_process_is_refused(
    sqlite_file: Path,
) -> None:
    first = SqliteStore(sqlite_file)
    await first.open(exclusive=True)
    try:
        with pytest.raises(
            DatabaseInUseError, match=f"another app in this process .pid {os.getpid()}"
        ):
            await SqliteStore(sqlite_file).open(exclusive=True)
    finally:
        await first.aclose()


async def test_closing_a_serving_store_lets_the_database_go(sqlite_file: Path) -> None:
    first = SqliteStore(sqlite_file)
    await first.open(exclusive=True)
    await first.aclose()
    second = SqliteStore(sqlite_file)
    await second.open(exclusive=True)
    await second.aclose()


async def test_a_reader_opens_reads_and_prunes_a_database_being_served(sqlite_file: Path) -> None:
    server, reader = SqliteStore(sqlite_file), SqliteStore(sqlite_file)
    await server.open(exclusive=True)
    await reader.open()
    try:
        await create(server, make_task("t-1", state=TaskState.COMPLETED))
        assert await reader.get_task(AGENT, "t-1", owner=ALICE) is not None
        assert (await reader.prune(datetime.now(UTC)))["tasks"] == 1
        assert await server.get_task(AGENT, "t-1", owner=ALICE) is None
    finally:
        await reader.aclose()
        await server.aclose()


def test_a_store_that_fails_to_open_for_serving_lets_the_database_go(sqlite_file: Path) -> None:
    with sqlite3.connect(sqlite_file) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    store = SqliteStore(sqlite_file)
    with pytest.raises(RuntimeError, match="newer than this a2a-trio understands"):
        store.connect(exclusive=True)
    lock = ServingLock(sqlite_file)
    lock.acquire()
    lock.release()


def test_in_memory_databases_are_served_without_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = SqliteStore(":memory:").connect(exclusive=True)
    second = SqliteStore(":memory:").connect(exclusive=True)
    first.close()
    second.close()
    assert list(tmp_path.iterdir()) == []

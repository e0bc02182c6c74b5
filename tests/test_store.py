"""The SQLite store against real database files: tasks, the event log, pages, push configs."""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from a2a_trio.protocol import InvalidParamsError
from a2a_trio.protocol.models import (
    AuthenticationInfo,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_trio.store import DatabaseInUseError, SecretKeyError, TaskStore
from a2a_trio.store.lock import ServingLock
from a2a_trio.store.schema import SCHEMA_VERSION, migrate

AGENT = "agent"
ALICE = "alice"
BOB = "bob"
T0 = datetime(2025, 10, 28, 10, 0, tzinfo=UTC)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "a2a.db"


@pytest.fixture
def store(database: Path) -> Iterator[TaskStore]:
    opened = TaskStore(database).open()
    try:
        yield opened
    finally:
        opened.close()


def make_task(
    task_id: str,
    *,
    context_id: str = "ctx-1",
    state: TaskState = TaskState.WORKING,
    at: datetime = T0,
) -> Task:
    return Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(state=state, timestamp=at),
        history=[Message(message_id=f"{task_id}-m", role=Role.USER, parts=[Part(text="hi")])],
    )


def create(store: TaskStore, task: Task, *, owner: str = ALICE, agent: str = AGENT) -> int:
    return store.create_task(
        agent, owner, task, kind="task", payload=StreamResponse(task=task).to_json()
    ).seq


def moved(task: Task, state: TaskState, at: datetime) -> Task:
    return task.model_copy(update={"status": TaskStatus(state=state, timestamp=at)})


def append_status(store: TaskStore, task: Task) -> int:
    event = TaskStatusUpdateEvent(
        task_id=task.id, context_id=task.context_id or "", status=task.status
    )
    return store.append(
        AGENT, task, kind="status", payload=StreamResponse(status_update=event).to_json()
    ).seq


def ids(tasks: list[Task]) -> list[str]:
    return [task.id for task in tasks]


# --- tasks and the event log ---------------------------------------------------------


def test_a_created_task_is_read_back_by_its_owner(store: TaskStore) -> None:
    task = make_task("t-1")
    assert create(store, task) == 1
    stored = store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.agent, stored.owner, stored.task, stored.last_seq) == (AGENT, ALICE, task, 1)
    assert stored.state is TaskState.WORKING


def test_another_owner_does_not_see_the_task(store: TaskStore) -> None:
    create(store, make_task("t-1"), owner=ALICE)
    assert store.get_task(AGENT, "t-1", owner=BOB) is None


def test_without_an_owner_the_task_is_read_whoever_owns_it(store: TaskStore) -> None:
    create(store, make_task("t-1"), owner=ALICE)
    stored = store.get_task(AGENT, "t-1", owner=None)
    assert stored is not None and stored.owner == ALICE


def test_another_agent_on_the_same_database_does_not_see_the_task(store: TaskStore) -> None:
    create(store, make_task("t-1"), agent="weather")
    assert store.get_task("travel", "t-1", owner=ALICE) is None


def test_an_unknown_task_is_none(store: TaskStore) -> None:
    assert store.get_task(AGENT, "nope", owner=None) is None


def test_each_appended_event_takes_the_next_sequence_number(store: TaskStore) -> None:
    task = make_task("t-1")
    create(store, task)
    assert append_status(store, moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))) == 2
    assert append_status(store, moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))) == 3
    stored = store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert stored.last_seq == 3
    assert stored.task == moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))


def test_sequence_numbers_count_per_task(store: TaskStore) -> None:
    first, second = make_task("t-1"), make_task("t-2")
    create(store, first)
    append_status(store, first)
    assert create(store, second) == 1
    assert append_status(store, second) == 2


def test_appending_to_an_unknown_task_is_refused(store: TaskStore) -> None:
    with pytest.raises(KeyError):
        append_status(store, make_task("ghost"))


def test_events_after_returns_the_streamed_events_in_order(store: TaskStore) -> None:
    task = make_task("t-1")
    create(store, task)
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    append_status(store, working)
    note = Message(message_id="a-1", role=Role.AGENT, parts=[Part(text="note")])
    store.append(AGENT, working, kind="message", payload=note.to_json())
    store.append(AGENT, working, kind="artifact", payload='{"artifactUpdate":{}}')
    append_status(store, moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2)))

    events = store.events_after(AGENT, "t-1", 0)
    assert [(event.seq, event.kind) for event in events] == [
        (1, "task"),
        (2, "status"),
        (4, "artifact"),
        (5, "status"),
    ]
    assert json.loads(events[0].payload) == {"task": task.to_wire()}


def test_events_after_skips_what_was_already_seen(store: TaskStore) -> None:
    task = make_task("t-1")
    create(store, task)
    append_status(store, task)
    append_status(store, moved(task, TaskState.COMPLETED, T0))
    assert [event.seq for event in store.events_after(AGENT, "t-1", 2)] == [3]
    assert store.events_after(AGENT, "t-1", 3) == []


def test_unfinished_tasks_are_those_submitted_or_working(store: TaskStore) -> None:
    for state in TaskState:
        if state is not TaskState.UNSPECIFIED:
            create(store, make_task(f"t-{state.name}", state=state))
    unfinished = store.unfinished_tasks()
    assert sorted(stored.task.id for stored in unfinished) == ["t-SUBMITTED", "t-WORKING"]
    assert {stored.owner for stored in unfinished} == {ALICE}


def test_unfinished_tasks_can_be_limited_to_one_agent(store: TaskStore) -> None:
    create(store, make_task("t-1"), agent="weather")
    create(store, make_task("t-2"), agent="travel")
    assert [stored.task.id for stored in store.unfinished_tasks("travel")] == ["t-2"]
    assert len(store.unfinished_tasks()) == 2


def test_a_task_that_finished_is_no_longer_unfinished(store: TaskStore) -> None:
    task = make_task("t-1")
    create(store, task)
    append_status(store, moved(task, TaskState.COMPLETED, T0))
    assert store.unfinished_tasks() == []


# --- listing -------------------------------------------------------------------------


def test_tasks_are_listed_most_recently_updated_first(store: TaskStore) -> None:
    for minute, task_id in [(1, "t-a"), (3, "t-b"), (2, "t-c")]:
        create(store, make_task(task_id, at=T0 + timedelta(minutes=minute)))
    page = store.list_tasks(AGENT, ALICE)
    assert ids(page.tasks) == ["t-b", "t-c", "t-a"]
    assert (page.next_page_token, page.total_size) == ("", 3)


def test_an_update_moves_a_task_to_the_front(store: TaskStore) -> None:
    old, new = make_task("t-old", at=T0), make_task("t-new", at=T0 + timedelta(minutes=1))
    create(store, old)
    create(store, new)
    append_status(store, moved(old, TaskState.COMPLETED, T0 + timedelta(minutes=2)))
    assert ids(store.list_tasks(AGENT, ALICE).tasks) == ["t-old", "t-new"]


def test_listing_shows_only_the_owners_tasks(store: TaskStore) -> None:
    create(store, make_task("t-alice"), owner=ALICE)
    create(store, make_task("t-bob"), owner=BOB)
    page = store.list_tasks(AGENT, BOB)
    assert ids(page.tasks) == ["t-bob"]
    assert page.total_size == 1


def test_listed_tasks_are_the_stored_snapshots(store: TaskStore) -> None:
    task = make_task("t-1")
    create(store, task)
    assert store.list_tasks(AGENT, ALICE).tasks == [task]


def read_all_pages(store: TaskStore, page_size: int, **filters: object) -> list[list[str]]:
    pages: list[list[str]] = []
    token: str | None = None
    while True:
        page = store.list_tasks(AGENT, ALICE, page_size=page_size, page_token=token, **filters)  # type: ignore[arg-type]
        pages.append(ids(page.tasks))
        if not page.next_page_token:
            return pages
        token = page.next_page_token
        assert len(pages) < 50, "pagination does not end"


def test_pages_cover_every_task_once_in_order(store: TaskStore) -> None:
    for minute in range(7):
        create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    pages = read_all_pages(store, page_size=3)
    assert pages == [["t-6", "t-5", "t-4"], ["t-3", "t-2", "t-1"], ["t-0"]]


def test_pages_of_tasks_updated_at_the_same_moment_have_no_duplicates_or_gaps(
    store: TaskStore,
) -> None:
    for index in range(9):
        create(store, make_task(f"t-{index}", at=T0))
    pages = read_all_pages(store, page_size=2)
    flat = [task_id for page in pages for task_id in page]
    assert sorted(flat) == sorted(f"t-{index}" for index in range(9))
    assert len(flat) == len(set(flat))
    assert [len(page) for page in pages] == [2, 2, 2, 2, 1]


def test_every_page_reports_the_total_before_pagination(store: TaskStore) -> None:
    for minute in range(5):
        create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    first = store.list_tasks(AGENT, ALICE, page_size=2)
    second = store.list_tasks(AGENT, ALICE, page_size=2, page_token=first.next_page_token)
    assert (first.total_size, second.total_size) == (5, 5)


def test_the_last_page_has_an_empty_next_page_token(store: TaskStore) -> None:
    for minute in range(4):
        create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    first = store.list_tasks(AGENT, ALICE, page_size=2)
    assert first.next_page_token != ""
    last = store.list_tasks(AGENT, ALICE, page_size=2, page_token=first.next_page_token)
    assert ids(last.tasks) == ["t-1", "t-0"]
    assert last.next_page_token == ""


def test_an_empty_listing_has_no_tasks_and_an_empty_token(store: TaskStore) -> None:
    page = store.list_tasks(AGENT, ALICE, context_id="never-used")
    assert (page.tasks, page.next_page_token, page.total_size) == ([], "", 0)


def test_listing_filters_by_context(store: TaskStore) -> None:
    create(store, make_task("t-1", context_id="ctx-a"))
    create(store, make_task("t-2", context_id="ctx-b"))
    create(store, make_task("t-3", context_id="ctx-a", at=T0 + timedelta(minutes=1)))
    page = store.list_tasks(AGENT, ALICE, context_id="ctx-a")
    assert ids(page.tasks) == ["t-3", "t-1"]
    assert page.total_size == 2


def test_listing_filters_by_state(store: TaskStore) -> None:
    create(store, make_task("t-1", state=TaskState.WORKING))
    create(store, make_task("t-2", state=TaskState.INPUT_REQUIRED))
    create(store, make_task("t-3", state=TaskState.WORKING, at=T0 + timedelta(minutes=1)))
    page = store.list_tasks(AGENT, ALICE, state=TaskState.WORKING)
    assert ids(page.tasks) == ["t-3", "t-1"]
    assert page.total_size == 2


def test_listing_with_unspecified_state_does_not_filter(store: TaskStore) -> None:
    create(store, make_task("t-1", state=TaskState.WORKING))
    create(store, make_task("t-2", state=TaskState.COMPLETED))
    assert store.list_tasks(AGENT, ALICE, state=TaskState.UNSPECIFIED).total_size == 2


def test_listing_filters_by_update_time_inclusively(store: TaskStore) -> None:
    for minute in range(4):
        create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    page = store.list_tasks(AGENT, ALICE, updated_after=T0 + timedelta(minutes=2))
    assert ids(page.tasks) == ["t-3", "t-2"]
    assert page.total_size == 2


def test_update_time_filter_with_an_offset_is_compared_in_utc(store: TaskStore) -> None:
    create(store, make_task("t-1", at=T0))  # 10:00Z
    half_past_nine_utc = datetime(2025, 10, 28, 11, 30, tzinfo=timezone(timedelta(hours=2)))
    assert ids(store.list_tasks(AGENT, ALICE, updated_after=half_past_nine_utc).tasks) == ["t-1"]


def test_filters_and_pages_combine(store: TaskStore) -> None:
    for minute in range(6):
        context = "ctx-a" if minute % 2 == 0 else "ctx-b"
        create(
            store, make_task(f"t-{minute}", context_id=context, at=T0 + timedelta(minutes=minute))
        )
    pages = read_all_pages(store, page_size=2, context_id="ctx-a")
    assert pages == [["t-4", "t-2"], ["t-0"]]


def urlsafe(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "token",
    [
        "not a token!",
        "%%%",
        "é",
        urlsafe(b"not json"),
        urlsafe(b"[1, 2]"),
        urlsafe(b'["2025-10-28T10:00:00.000000Z"]'),
        urlsafe(b'["a", "b", "c"]'),
        urlsafe(b"7"),
        urlsafe(b"\xff\xfe"),
    ],
)
def test_a_forged_page_token_is_invalid_params(store: TaskStore, token: str) -> None:
    create(store, make_task("t-1"))
    with pytest.raises(InvalidParamsError, match="pageToken"):
        store.list_tasks(AGENT, ALICE, page_token=token)


@pytest.mark.parametrize(
    "token", [urlsafe(b'{"updatedAt": "x", "id": "y"}'), urlsafe(b'"ab"')], ids=["object", "string"]
)
def test_a_page_token_that_is_not_a_pair_is_invalid_params(store: TaskStore, token: str) -> None:
    create(store, make_task("t-1"))
    with pytest.raises(InvalidParamsError, match="pageToken"):
        store.list_tasks(AGENT, ALICE, page_token=token)


# --- push notification configs -------------------------------------------------------


def push_config(
    config_id: str = "c-1", task_id: str = "t-1", **fields: object
) -> TaskPushNotificationConfig:
    values: dict[str, object] = {
        "id": config_id,
        "task_id": task_id,
        "url": "https://hooks.example.com/a2a-webhook",
        "token": "opaque-verification-token-7f3a",
        "authentication": AuthenticationInfo(
            scheme="Bearer", credentials="bearer-credentials-91c2"
        ),
    }
    values.update(fields)
    return TaskPushNotificationConfig(**values)  # type: ignore[arg-type]


def test_a_saved_push_config_is_read_back_by_its_owner(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config())
    assert store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()


def test_a_push_config_without_secrets_is_read_back_without_them(store: TaskStore) -> None:
    bare = push_config(token=None, authentication=None)
    store.save_push_config(AGENT, ALICE, bare)
    assert store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == bare


def test_another_owner_does_not_see_a_push_config(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config())
    assert store.get_push_config(AGENT, "t-1", "c-1", owner=BOB) is None
    assert store.list_push_configs(AGENT, "t-1", owner=BOB) == []


def test_saving_a_config_with_a_known_id_replaces_it(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config())
    store.save_push_config(AGENT, ALICE, push_config(url="https://hooks.example.com/v2"))
    configs = store.list_push_configs(AGENT, "t-1", owner=ALICE)
    assert [config.url for config in configs] == ["https://hooks.example.com/v2"]


def test_the_same_config_id_on_two_tasks_is_two_configs(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config("tck-push", "t-1"))
    store.save_push_config(AGENT, ALICE, push_config("tck-push", "t-2"))
    assert store.list_push_configs(AGENT, "t-1", owner=ALICE) == [push_config("tck-push", "t-1")]
    assert store.list_push_configs(AGENT, "t-2", owner=ALICE) == [push_config("tck-push", "t-2")]


def test_push_configs_are_listed_per_task(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config("c-1"))
    store.save_push_config(AGENT, ALICE, push_config("c-2"))
    store.save_push_config(AGENT, ALICE, push_config("c-3", task_id="t-other"))
    listed = store.list_push_configs(AGENT, "t-1", owner=ALICE)
    assert sorted(config.id or "" for config in listed) == ["c-1", "c-2"]


def test_push_configs_are_listed_for_every_owner_without_an_owner(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config("c-1"))
    store.save_push_config(AGENT, BOB, push_config("c-2"))
    assert len(store.list_push_configs(AGENT, "t-1", owner=None)) == 2


def test_deleting_a_push_config_removes_it_once(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config())
    assert store.delete_push_config(AGENT, "t-1", "c-1", owner=ALICE) is True
    assert store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) is None
    assert store.delete_push_config(AGENT, "t-1", "c-1", owner=ALICE) is False


def test_another_owner_cannot_delete_a_push_config(store: TaskStore) -> None:
    store.save_push_config(AGENT, ALICE, push_config())
    assert store.delete_push_config(AGENT, "t-1", "c-1", owner=BOB) is False
    assert store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()


def database_bytes(database: Path) -> bytes:
    """Everything SQLite wrote for the database: the main file and its write-ahead log."""
    files = [database, database.with_name(database.name + "-wal")]
    return b"".join(path.read_bytes() for path in files if path.exists())


def test_push_secrets_are_not_stored_in_plaintext(store: TaskStore, database: Path) -> None:
    config = push_config()
    store.save_push_config(AGENT, ALICE, config)
    written = database_bytes(database)
    assert config.url.encode() in written  # the row is in what we read
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


def test_push_secrets_are_not_stored_in_plaintext_after_a_checkpoint(
    store: TaskStore, database: Path
) -> None:
    store.save_push_config(AGENT, ALICE, push_config())
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    written = database.read_bytes()
    assert b"https://hooks.example.com/a2a-webhook" in written
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


def test_a_development_key_is_kept_beside_the_database(store: TaskStore, database: Path) -> None:
    key_file = database.with_name("a2a.db.key")
    assert key_file.exists()
    Fernet(key_file.read_bytes().strip())  # a usable Fernet key
    assert key_file.stat().st_mode & 0o077 == 0


def test_reopening_the_database_reuses_its_key_and_decrypts(database: Path) -> None:
    first = TaskStore(database).open()
    first.save_push_config(AGENT, ALICE, push_config())
    first.close()
    key = database.with_name("a2a.db.key").read_bytes()

    second = TaskStore(database).open()
    try:
        assert second.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
    finally:
        second.close()
    assert database.with_name("a2a.db.key").read_bytes() == key


def test_a_configured_key_is_used_instead_of_a_development_key(tmp_path: Path) -> None:
    key = Fernet.generate_key()
    store = TaskStore(tmp_path / "a2a.db", secret_key=key)
    try:
        store.save_push_config(AGENT, ALICE, push_config())
    finally:
        store.close()
    assert not (tmp_path / "a2a.db.key").exists()
    reopened = TaskStore(tmp_path / "a2a.db", secret_key=key.decode())
    try:
        assert reopened.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
    finally:
        reopened.close()


def test_secrets_sealed_with_another_key_do_not_open(tmp_path: Path) -> None:
    first = TaskStore(tmp_path / "a2a.db", secret_key=Fernet.generate_key())
    first.save_push_config(AGENT, ALICE, push_config())
    first.close()
    second = TaskStore(tmp_path / "a2a.db", secret_key=Fernet.generate_key())
    try:
        with pytest.raises(SecretKeyError):
            second.get_push_config(AGENT, "t-1", "c-1", owner=ALICE)
    finally:
        second.close()


def test_a_malformed_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SecretKeyError, match="32 url-safe base64-encoded bytes"):
        TaskStore(tmp_path / "a2a.db", secret_key="too short").open()


# --- schema --------------------------------------------------------------------------


def user_version(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_a_store_opens_its_database_on_first_use(database: Path) -> None:
    store = TaskStore(database)
    try:
        assert not database.exists()
        assert store.get_task(AGENT, "t-1", owner=None) is None
        assert user_version(database) == SCHEMA_VERSION
    finally:
        store.close()


def test_opening_an_open_store_again_keeps_its_connection(store: TaskStore) -> None:
    db = store.db
    assert store.open() is store
    assert store.db is db


def test_a_new_database_is_at_the_current_schema_version(store: TaskStore, database: Path) -> None:
    assert user_version(database) == SCHEMA_VERSION


def test_a_database_from_a_newer_version_is_refused(database: Path) -> None:
    with sqlite3.connect(database) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="newer than this a2a-trio understands"):
        TaskStore(database).open()


def test_migrating_a_current_database_changes_nothing(store: TaskStore, database: Path) -> None:
    create(store, make_task("t-1"))
    assert migrate(store.db) == SCHEMA_VERSION
    assert user_version(database) == SCHEMA_VERSION
    assert ids(store.list_tasks(AGENT, ALICE).tasks) == ["t-1"]


def test_a_migration_interrupted_before_its_version_bump_finishes_next_time(
    store: TaskStore, database: Path
) -> None:
    create(store, make_task("t-1"))
    store.save_push_config(AGENT, ALICE, push_config())
    store.db.execute("PRAGMA user_version = 0")  # the tables exist, the bump did not happen
    assert migrate(store.db) == 0
    assert user_version(database) == SCHEMA_VERSION
    assert store.get_task(AGENT, "t-1", owner=ALICE) is not None
    assert store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()


def test_reopening_a_database_keeps_its_tasks(database: Path) -> None:
    first = TaskStore(database).open()
    create(first, make_task("t-1"))
    first.close()
    second = TaskStore(database).open()
    try:
        assert second.get_task(AGENT, "t-1", owner=ALICE) is not None
        assert user_version(database) == SCHEMA_VERSION
    finally:
        second.close()


# --- serving: one process per database ----------------------------------------------

#: A process that serves ``argv[1]`` (holds it as a server's store does) until killed.
HOLDER = """
import sys
from a2a_trio.store import TaskStore
store = TaskStore(sys.argv[1]).open(exclusive=True)
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def held_elsewhere(database: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process serving ``database``; killed at the end if still alive."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(database)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "holding\n"
        yield holder
    finally:
        holder.kill()
        holder.wait(10)


def test_serving_a_database_another_process_serves_is_refused_naming_it_and_the_fix(
    database: Path, held_elsewhere: subprocess.Popen[str]
) -> None:
    with pytest.raises(DatabaseInUseError) as refused:
        TaskStore(database).open(exclusive=True)
    message = str(refused.value)
    assert f"{database} is already served by another process (pid {held_elsewhere.pid})" in message
    assert f"{database}.lock" in message
    assert "served by one process only" in message
    assert "hypercorn without --workers" in message


def test_a_database_whose_server_was_killed_can_be_served_at_once(
    database: Path, held_elsewhere: subprocess.Popen[str]
) -> None:
    os.kill(held_elsewhere.pid, signal.SIGKILL)
    held_elsewhere.wait(10)
    TaskStore(database).open(exclusive=True).close()


def test_a_second_store_serving_the_database_in_this_process_is_refused(database: Path) -> None:
    first = TaskStore(database).open(exclusive=True)
    try:
        with pytest.raises(
            DatabaseInUseError, match=f"another app in this process .pid {os.getpid()}"
        ):
            TaskStore(database).open(exclusive=True)
    finally:
        first.close()


def test_closing_a_serving_store_lets_the_database_go(database: Path) -> None:
    first = TaskStore(database).open(exclusive=True)
    first.close()
    TaskStore(database).open(exclusive=True).close()


def test_a_reader_opens_reads_and_prunes_a_database_being_served(database: Path) -> None:
    server = TaskStore(database).open(exclusive=True)
    reader = TaskStore(database).open()
    try:
        create(server, make_task("t-1", state=TaskState.COMPLETED))
        assert reader.get_task(AGENT, "t-1", owner=ALICE) is not None
        assert reader.prune(datetime.now(UTC))["tasks"] == 1
        assert server.get_task(AGENT, "t-1", owner=ALICE) is None
    finally:
        reader.close()
        server.close()


def test_a_store_that_fails_to_open_for_serving_lets_the_database_go(database: Path) -> None:
    with sqlite3.connect(database) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    store = TaskStore(database)
    with pytest.raises(RuntimeError, match="newer than this a2a-trio understands"):
        store.open(exclusive=True)
    lock = ServingLock(database)
    lock.acquire()
    lock.release()


def test_in_memory_databases_are_served_without_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = TaskStore(":memory:").open(exclusive=True)
    second = TaskStore(":memory:").open(exclusive=True)
    first.close()
    second.close()
    assert list(tmp_path.iterdir()) == []

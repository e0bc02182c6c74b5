"""The store against real databases: tasks, the event log, rounds, pages, push configs, the outbox.

The tests of the :class:`~a2a_trio.store.Store` interface take the ``store``
fixture: an opened store at ``location`` (a SQLite file here). Those about how
SQLite keeps its file (the key file beside it, what the file holds, the schema
version, the serving lock) take ``sqlite_store`` or build a
:class:`~a2a_trio.store.SqliteStore` themselves.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta, timezone
from functools import partial
from pathlib import Path

import pytest
import trio
from cryptography.fernet import Fernet

from a2a_trio.protocol import InvalidParamsError, utcnow
from a2a_trio.protocol.compat_v0_3 import task_to_v0_3
from a2a_trio.protocol.models import (
    Artifact,
    AuthenticationInfo,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from a2a_trio.store import (
    DatabaseInUseError,
    EventWrite,
    Lane,
    ReceiptWrite,
    SecretKeyError,
    Share,
    SqliteStore,
    StaleTask,
    Store,
)
from a2a_trio.store.factory import store_at
from a2a_trio.store.lock import ServingLock
from a2a_trio.store.schema import SCHEMA_VERSION, migrate
from a2a_trio.store.url import DatabaseLocation, SqliteLocation

from .writes import new_task, record, record_ok, status_event

AGENT = "agent"
ALICE = "alice"
BOB = "bob"
T0 = datetime(2025, 10, 28, 10, 0, tzinfo=UTC)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "a2a.db"


@pytest.fixture
def location(database: Path) -> DatabaseLocation:
    """Where the store under test keeps its data: every backend passes the same tests."""
    return SqliteLocation(database)


async def opened(location: DatabaseLocation, **options: object) -> Store:
    """A new store at ``location``, opened (``options`` go to ``store_at``)."""
    store = store_at(location, **options)  # type: ignore[arg-type]
    await store.open()
    return store


@pytest.fixture
async def store(location: DatabaseLocation) -> AsyncIterator[Store]:
    """An opened store, closed at the end of the test."""
    store = await opened(location)
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
async def sqlite_store(database: Path) -> AsyncIterator[SqliteStore]:
    """An opened SQLite store on ``database``, for what only SQLite has."""
    store = SqliteStore(database)
    await store.open()
    try:
        yield store
    finally:
        await store.aclose()


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


async def create(store: Store, task: Task, *, owner: str = ALICE, agent: str = AGENT) -> None:
    await record_ok(store, new_task(agent, owner, task))


def moved(task: Task, state: TaskState, at: datetime) -> Task:
    return task.model_copy(update={"status": TaskStatus(state=state, timestamp=at)})


async def append_status(store: Store, task: Task, seq: int) -> None:
    """Log ``task``'s status as event ``seq``, the task as it then stands."""
    await record_ok(store, Share(AGENT, task.id, events=[status_event(task, seq)]))


def message_event(task: Task, seq: int, text: str = "note") -> EventWrite:
    note = Message(message_id=f"{task.id}-{seq}", role=Role.AGENT, parts=[Part(text=text)])
    return EventWrite(seq, "message", note.to_json(), task)


def artifact_event(task: Task, seq: int) -> EventWrite:
    event = TaskArtifactUpdateEvent(
        task_id=task.id,
        context_id=task.context_id or "",
        artifact=Artifact(artifact_id=f"a-{seq}", parts=[Part(text="made")]),
    )
    return EventWrite(seq, "artifact", StreamResponse(artifact_update=event).to_json(), task)


def ids(tasks: list[Task]) -> list[str]:
    return [task.id for task in tasks]


async def logged(store: Store, task_id: str, agent: str = AGENT) -> list[tuple[int, str]]:
    return [(event.seq, event.kind) for event in await store.events_after(agent, task_id, 0)]


# --- tasks and the event log ---------------------------------------------------------


async def test_a_created_task_is_read_back_by_its_owner(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.agent, stored.owner, stored.task, stored.last_seq) == (AGENT, ALICE, task, 1)
    assert stored.state is TaskState.WORKING


async def test_another_owner_does_not_see_the_task(store: Store) -> None:
    await create(store, make_task("t-1"), owner=ALICE)
    assert await store.get_task(AGENT, "t-1", owner=BOB) is None


async def test_without_an_owner_the_task_is_read_whoever_owns_it(store: Store) -> None:
    await create(store, make_task("t-1"), owner=ALICE)
    stored = await store.get_task(AGENT, "t-1", owner=None)
    assert stored is not None and stored.owner == ALICE


async def test_another_agent_on_the_same_database_does_not_see_the_task(store: Store) -> None:
    await create(store, make_task("t-1"), agent="weather")
    assert await store.get_task("travel", "t-1", owner=ALICE) is None


async def test_an_unknown_task_is_none(store: Store) -> None:
    assert await store.get_task(AGENT, "nope", owner=None) is None


async def test_the_task_moves_to_the_last_event_of_each_share(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append_status(store, moved(task, TaskState.WORKING, T0 + timedelta(seconds=1)), 2)
    completed = moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))
    await append_status(store, completed, 3)
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.last_seq, stored.task) == (3, completed)
    assert await logged(store, "t-1") == [(1, "task"), (2, "status"), (3, "status")]


async def test_a_share_of_several_events_stores_the_last_snapshot(store: Store) -> None:
    task = make_task("t-1")
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    completed = moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))
    share = new_task(AGENT, ALICE, task)
    share.events += [status_event(working, 2), status_event(completed, 3)]
    await record_ok(store, share)
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.last_seq, stored.task) == (3, completed)
    assert await logged(store, "t-1") == [(1, "task"), (2, "status"), (3, "status")]


async def test_sequence_numbers_count_per_task(store: Store) -> None:
    first, second = make_task("t-1"), make_task("t-2")
    await create(store, first)
    await append_status(store, first, 2)
    await create(store, second)
    await append_status(store, second, 2)
    assert await logged(store, "t-1") == await logged(store, "t-2") == [(1, "task"), (2, "status")]


async def test_events_after_returns_the_streamed_events_in_order(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    await record_ok(
        store,
        Share(
            AGENT,
            "t-1",
            events=[
                status_event(working, 2),
                message_event(working, 3),
                artifact_event(working, 4),
                status_event(moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2)), 5),
            ],
        ),
    )
    events = await store.events_after(AGENT, "t-1", 0)
    assert [(event.seq, event.kind) for event in events] == [
        (1, "task"),
        (2, "status"),
        (4, "artifact"),
        (5, "status"),
    ]
    assert json.loads(events[0].payload) == {"task": task.to_wire()}


async def test_events_after_skips_what_was_already_seen(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append_status(store, task, 2)
    await append_status(store, moved(task, TaskState.COMPLETED, T0), 3)
    assert [event.seq for event in await store.events_after(AGENT, "t-1", 2)] == [3]
    assert await store.events_after(AGENT, "t-1", 3) == []


async def test_unfinished_tasks_are_those_submitted_or_working(store: Store) -> None:
    for state in TaskState:
        if state is not TaskState.UNSPECIFIED:
            await create(store, make_task(f"t-{state.name}", state=state))
    unfinished = await store.unfinished_tasks()
    assert sorted(stored.task.id for stored in unfinished) == ["t-SUBMITTED", "t-WORKING"]
    assert {stored.owner for stored in unfinished} == {ALICE}
    assert {stored.last_seq for stored in unfinished} == {1}


async def test_unfinished_tasks_can_be_limited_to_one_agent(store: Store) -> None:
    await create(store, make_task("t-1"), agent="weather")
    await create(store, make_task("t-2"), agent="travel")
    assert [stored.task.id for stored in await store.unfinished_tasks("travel")] == ["t-2"]
    assert len(await store.unfinished_tasks()) == 2


async def test_a_task_that_finished_is_no_longer_unfinished(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append_status(store, moved(task, TaskState.COMPLETED, T0), 2)
    assert await store.unfinished_tasks() == []


# --- rounds: each share all or nothing ------------------------------------------------


async def test_a_round_answers_one_outcome_per_share_in_order(store: Store) -> None:
    outcomes = await record(
        store, new_task(AGENT, ALICE, make_task("t-1")), new_task(AGENT, BOB, make_task("t-2"))
    )
    assert [(outcome.queued, outcome.error) for outcome in outcomes] == [(0, None), (0, None)]
    assert await store.get_task(AGENT, "t-1", owner=ALICE) is not None
    assert await store.get_task(AGENT, "t-2", owner=BOB) is not None


async def test_an_empty_round_stores_nothing(store: Store) -> None:
    assert await record(store) == []
    assert (await store.list_tasks(AGENT, ALICE)).total_size == 0


async def test_appending_to_an_unknown_task_is_a_stale_task(store: Store) -> None:
    [outcome] = await record(
        store, Share(AGENT, "ghost", events=[status_event(make_task("ghost"), 2)])
    )
    assert isinstance(outcome.error, StaleTask)
    assert await store.get_task(AGENT, "ghost", owner=None) is None
    assert await store.events_after(AGENT, "ghost", 0) == []


@pytest.mark.parametrize("first_seq", [2, 3, 5], ids=["behind", "taken", "ahead"])
async def test_a_share_that_does_not_follow_the_stored_task_is_stale_and_stores_nothing(
    store: Store, first_seq: int
) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append_status(store, task, 2)
    await append_status(store, task, 3)  # the task is at 3: only 4 follows it
    later = moved(task, TaskState.COMPLETED, T0 + timedelta(minutes=1))
    stale = Share(
        AGENT,
        "t-1",
        events=[status_event(later, first_seq), status_event(later, first_seq + 1)],
        receipts=[ReceiptWrite(ALICE, "m-stale", "digest", task_id="t-1", seq=first_seq)],
    )
    [outcome] = await record(store, stale)
    assert isinstance(outcome.error, StaleTask)
    assert outcome.queued == 0
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.last_seq, stored.task) == (3, task)
    assert await logged(store, "t-1") == [(1, "task"), (2, "status"), (3, "status")]
    # The share's receipt went with the rest of it.
    assert await store.find_message(AGENT, ALICE, "m-stale", "digest", T0) is None


async def test_a_share_that_follows_the_stored_task_is_stored(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append_status(store, task, 2)
    done = moved(task, TaskState.COMPLETED, T0 + timedelta(minutes=1))
    [outcome] = await record(store, Share(AGENT, "t-1", events=[status_event(done, 3)]))
    assert outcome.error is None
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None and (stored.last_seq, stored.state) == (3, TaskState.COMPLETED)


async def test_a_stale_share_costs_the_other_shares_of_its_round_nothing(store: Store) -> None:
    first, second = make_task("t-1"), make_task("t-2")
    await create(store, first)
    await create(store, second)
    first_done = moved(first, TaskState.COMPLETED, T0 + timedelta(minutes=1))
    second_done = moved(second, TaskState.COMPLETED, T0 + timedelta(minutes=1))
    outcomes = await record(
        store,
        Share(AGENT, "t-1", events=[status_event(first_done, 7)]),  # t-1 is at 1, not 6
        Share(AGENT, "t-2", events=[status_event(second_done, 2)]),
        new_task(AGENT, ALICE, make_task("t-3")),
    )
    assert isinstance(outcomes[0].error, StaleTask)
    assert [outcome.error for outcome in outcomes[1:]] == [None, None]
    kept = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert kept is not None and (kept.last_seq, kept.task) == (1, first)
    moved_on = await store.get_task(AGENT, "t-2", owner=ALICE)
    assert moved_on is not None and (moved_on.last_seq, moved_on.task) == (2, second_done)
    assert await store.get_task(AGENT, "t-3", owner=ALICE) is not None


async def test_creating_a_task_that_exists_fails_that_share_alone(store: Store) -> None:
    original = make_task("t-1")
    await create(store, original, owner=ALICE)
    impostor = make_task("t-1", context_id="ctx-other", state=TaskState.COMPLETED)
    outcomes = await record(
        store,
        new_task(
            AGENT,
            BOB,
            impostor,
            receipts=[ReceiptWrite(BOB, "m-1", "digest", task_id="t-1")],
        ),
        new_task(AGENT, BOB, make_task("t-2")),
    )
    assert outcomes[0].error is not None
    assert outcomes[1].error is None
    stored = await store.get_task(AGENT, "t-1", owner=None)
    assert stored is not None
    assert (stored.owner, stored.task, stored.last_seq) == (ALICE, original, 1)
    assert await logged(store, "t-1") == [(1, "task")]
    assert await store.find_message(AGENT, BOB, "m-1", "digest", T0) is None
    assert await store.get_task(AGENT, "t-2", owner=BOB) is not None


async def test_a_share_of_receipts_only_writes_no_task(store: Store) -> None:
    answer = Message(message_id="r-1", role=Role.AGENT, parts=[Part(text="direct")]).to_json()
    [outcome] = await record(
        store,
        Share(AGENT, "t-never", receipts=[ReceiptWrite(ALICE, "m-1", "digest", answer=answer)]),
        push=True,
    )
    assert (outcome.queued, outcome.error) == (0, None)
    assert await store.get_task(AGENT, "t-never", owner=None) is None
    assert await store.events_after(AGENT, "t-never", 0) == []
    assert (await store.list_tasks(AGENT, ALICE)).total_size == 0
    assert await store.unfinished_tasks() == []
    receipt = await store.find_message(AGENT, ALICE, "m-1", "digest", T0)
    assert receipt is not None
    assert (receipt.task_id, receipt.seq, receipt.answer) == (None, 0, answer)


async def test_a_receipt_of_a_continued_task_keeps_its_log_position(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await record_ok(
        store,
        Share(
            AGENT,
            "t-1",
            events=[message_event(task, 2)],
            receipts=[ReceiptWrite(ALICE, "m-2", "digest", task_id="t-1", seq=2)],
        ),
    )
    receipt = await store.find_message(AGENT, ALICE, "m-2", "digest", T0)
    assert receipt is not None
    assert (receipt.task_id, receipt.seq, receipt.answer) == ("t-1", 2, None)


# --- message receipts ------------------------------------------------------------------


async def test_a_receipt_is_found_only_by_its_owner_message_and_content(store: Store) -> None:
    await record_ok(
        store,
        new_task(
            AGENT, ALICE, make_task("t-1"), receipts=[ReceiptWrite(ALICE, "m-1", "d-1", "t-1")]
        ),
    )
    found = await store.find_message(AGENT, ALICE, "m-1", "d-1", T0)
    assert found is not None and (found.task_id, found.seq, found.answer) == ("t-1", 0, None)
    assert await store.find_message(AGENT, BOB, "m-1", "d-1", T0) is None
    assert await store.find_message(AGENT, ALICE, "m-2", "d-1", T0) is None
    assert await store.find_message(AGENT, ALICE, "m-1", "d-other", T0) is None
    assert await store.find_message("other-agent", ALICE, "m-1", "d-1", T0) is None


async def test_a_receipt_older_than_since_is_not_found(store: Store) -> None:
    await record_ok(store, Share(AGENT, "t-1", receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-1")]))
    later = utcnow() + timedelta(minutes=1)
    assert await store.find_message(AGENT, ALICE, "m-1", "d", later) is None
    assert await store.remembered_messages(AGENT, later) == []
    assert await store.remembered_messages(AGENT, T0) == [(ALICE, "m-1")]


async def test_remembered_messages_are_every_owners_of_the_agent(store: Store) -> None:
    await record_ok(
        store,
        Share(AGENT, "t-1", receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-1")]),
        Share(AGENT, "t-2", receipts=[ReceiptWrite(BOB, "m-2", "d", "t-2")]),
        Share("other-agent", "t-3", receipts=[ReceiptWrite(ALICE, "m-3", "d", "t-3")]),
    )
    assert sorted(await store.remembered_messages(AGENT, T0)) == [(ALICE, "m-1"), (BOB, "m-2")]


async def test_the_same_receipt_twice_keeps_the_first(store: Store) -> None:
    await record_ok(store, Share(AGENT, "t-1", receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-1")]))
    [outcome] = await record(
        store, Share(AGENT, "t-2", receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-2")])
    )
    assert outcome.error is None
    found = await store.find_message(AGENT, ALICE, "m-1", "d", T0)
    assert found is not None and found.task_id == "t-1"


async def test_a_forgotten_message_is_found_no_more(store: Store) -> None:
    await record_ok(
        store,
        Share(
            AGENT,
            "t-1",
            receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-1"), ReceiptWrite(BOB, "m-1", "d", "t-1")],
        ),
    )
    await store.forget_message(AGENT, ALICE, "m-1", "d")
    assert await store.find_message(AGENT, ALICE, "m-1", "d", T0) is None
    assert await store.find_message(AGENT, BOB, "m-1", "d", T0) is not None
    await store.forget_message(AGENT, ALICE, "m-1", "d")  # nothing left to forget: no error


# --- listing -------------------------------------------------------------------------


async def test_tasks_are_listed_most_recently_updated_first(store: Store) -> None:
    for minute, task_id in [(1, "t-a"), (3, "t-b"), (2, "t-c")]:
        await create(store, make_task(task_id, at=T0 + timedelta(minutes=minute)))
    page = await store.list_tasks(AGENT, ALICE)
    assert ids(page.tasks) == ["t-b", "t-c", "t-a"]
    assert (page.next_page_token, page.total_size) == ("", 3)


async def test_an_update_moves_a_task_to_the_front(store: Store) -> None:
    old, new = make_task("t-old", at=T0), make_task("t-new", at=T0 + timedelta(minutes=1))
    await create(store, old)
    await create(store, new)
    await append_status(store, moved(old, TaskState.COMPLETED, T0 + timedelta(minutes=2)), 2)
    assert ids((await store.list_tasks(AGENT, ALICE)).tasks) == ["t-old", "t-new"]


async def test_listing_shows_only_the_owners_tasks(store: Store) -> None:
    await create(store, make_task("t-alice"), owner=ALICE)
    await create(store, make_task("t-bob"), owner=BOB)
    page = await store.list_tasks(AGENT, BOB)
    assert ids(page.tasks) == ["t-bob"]
    assert page.total_size == 1


async def test_listed_tasks_are_the_stored_snapshots(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    assert (await store.list_tasks(AGENT, ALICE)).tasks == [task]


async def read_all_pages(store: Store, page_size: int, **filters: object) -> list[list[str]]:
    pages: list[list[str]] = []
    token: str | None = None
    while True:
        page = await store.list_tasks(
            AGENT,
            ALICE,
            page_size=page_size,
            page_token=token,
            **filters,  # type: ignore[arg-type]
        )
        pages.append(ids(page.tasks))
        if not page.next_page_token:
            return pages
        token = page.next_page_token
        assert len(pages) < 50, "pagination does not end"


async def test_pages_cover_every_task_once_in_order(store: Store) -> None:
    for minute in range(7):
        await create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    pages = await read_all_pages(store, page_size=3)
    assert pages == [["t-6", "t-5", "t-4"], ["t-3", "t-2", "t-1"], ["t-0"]]


async def test_pages_of_tasks_updated_at_the_same_moment_have_no_duplicates_or_gaps(
    store: Store,
) -> None:
    for index in range(9):
        await create(store, make_task(f"t-{index}", at=T0))
    pages = await read_all_pages(store, page_size=2)
    flat = [task_id for page in pages for task_id in page]
    assert sorted(flat) == sorted(f"t-{index}" for index in range(9))
    assert len(flat) == len(set(flat))
    assert [len(page) for page in pages] == [2, 2, 2, 2, 1]


async def test_every_page_reports_the_total_before_pagination(store: Store) -> None:
    for minute in range(5):
        await create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    first = await store.list_tasks(AGENT, ALICE, page_size=2)
    second = await store.list_tasks(AGENT, ALICE, page_size=2, page_token=first.next_page_token)
    assert (first.total_size, second.total_size) == (5, 5)


async def test_the_last_page_has_an_empty_next_page_token(store: Store) -> None:
    for minute in range(4):
        await create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    first = await store.list_tasks(AGENT, ALICE, page_size=2)
    assert first.next_page_token != ""
    last = await store.list_tasks(AGENT, ALICE, page_size=2, page_token=first.next_page_token)
    assert ids(last.tasks) == ["t-1", "t-0"]
    assert last.next_page_token == ""


async def test_an_empty_listing_has_no_tasks_and_an_empty_token(store: Store) -> None:
    page = await store.list_tasks(AGENT, ALICE, context_id="never-used")
    assert (page.tasks, page.next_page_token, page.total_size) == ([], "", 0)


async def test_listing_filters_by_context(store: Store) -> None:
    await create(store, make_task("t-1", context_id="ctx-a"))
    await create(store, make_task("t-2", context_id="ctx-b"))
    await create(store, make_task("t-3", context_id="ctx-a", at=T0 + timedelta(minutes=1)))
    page = await store.list_tasks(AGENT, ALICE, context_id="ctx-a")
    assert ids(page.tasks) == ["t-3", "t-1"]
    assert page.total_size == 2


async def test_listing_filters_by_state(store: Store) -> None:
    await create(store, make_task("t-1", state=TaskState.WORKING))
    await create(store, make_task("t-2", state=TaskState.INPUT_REQUIRED))
    await create(store, make_task("t-3", state=TaskState.WORKING, at=T0 + timedelta(minutes=1)))
    page = await store.list_tasks(AGENT, ALICE, state=TaskState.WORKING)
    assert ids(page.tasks) == ["t-3", "t-1"]
    assert page.total_size == 2


async def test_listing_with_unspecified_state_does_not_filter(store: Store) -> None:
    await create(store, make_task("t-1", state=TaskState.WORKING))
    await create(store, make_task("t-2", state=TaskState.COMPLETED))
    page = await store.list_tasks(AGENT, ALICE, state=TaskState.UNSPECIFIED)
    assert page.total_size == 2


async def test_listing_filters_by_update_time_inclusively(store: Store) -> None:
    for minute in range(4):
        await create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    page = await store.list_tasks(AGENT, ALICE, updated_after=T0 + timedelta(minutes=2))
    assert ids(page.tasks) == ["t-3", "t-2"]
    assert page.total_size == 2


async def test_update_time_filter_with_an_offset_is_compared_in_utc(store: Store) -> None:
    await create(store, make_task("t-1", at=T0))  # 10:00Z
    half_past_nine_utc = datetime(2025, 10, 28, 11, 30, tzinfo=timezone(timedelta(hours=2)))
    page = await store.list_tasks(AGENT, ALICE, updated_after=half_past_nine_utc)
    assert ids(page.tasks) == ["t-1"]


async def test_filters_and_pages_combine(store: Store) -> None:
    for minute in range(6):
        context = "ctx-a" if minute % 2 == 0 else "ctx-b"
        await create(
            store, make_task(f"t-{minute}", context_id=context, at=T0 + timedelta(minutes=minute))
        )
    pages = await read_all_pages(store, page_size=2, context_id="ctx-a")
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
async def test_a_forged_page_token_is_invalid_params(store: Store, token: str) -> None:
    await create(store, make_task("t-1"))
    with pytest.raises(InvalidParamsError, match="pageToken"):
        await store.list_tasks(AGENT, ALICE, page_token=token)


@pytest.mark.parametrize(
    "token", [urlsafe(b'{"updatedAt": "x", "id": "y"}'), urlsafe(b'"ab"')], ids=["object", "string"]
)
async def test_a_page_token_that_is_not_a_pair_is_invalid_params(store: Store, token: str) -> None:
    await create(store, make_task("t-1"))
    with pytest.raises(InvalidParamsError, match="pageToken"):
        await store.list_tasks(AGENT, ALICE, page_token=token)


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


async def test_a_saved_push_config_is_read_back_by_its_owner(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()


async def test_a_push_config_without_secrets_is_read_back_without_them(store: Store) -> None:
    bare = push_config(token=None, authentication=None)
    await store.save_push_config(AGENT, ALICE, bare)
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == bare


async def test_another_owner_does_not_see_a_push_config(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=BOB) is None
    assert await store.list_push_configs(AGENT, "t-1", owner=BOB) == []


async def test_saving_a_config_with_a_known_id_replaces_it(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    await store.save_push_config(AGENT, ALICE, push_config(url="https://hooks.example.com/v2"))
    configs = await store.list_push_configs(AGENT, "t-1", owner=ALICE)
    assert [config.url for config in configs] == ["https://hooks.example.com/v2"]


async def test_the_same_config_id_on_two_tasks_is_two_configs(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config("tck-push", "t-1"))
    await store.save_push_config(AGENT, ALICE, push_config("tck-push", "t-2"))
    assert await store.list_push_configs(AGENT, "t-1", owner=ALICE) == [
        push_config("tck-push", "t-1")
    ]
    assert await store.list_push_configs(AGENT, "t-2", owner=ALICE) == [
        push_config("tck-push", "t-2")
    ]


async def test_push_configs_are_listed_per_task(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config("c-1"))
    await store.save_push_config(AGENT, ALICE, push_config("c-2"))
    await store.save_push_config(AGENT, ALICE, push_config("c-3", task_id="t-other"))
    listed = await store.list_push_configs(AGENT, "t-1", owner=ALICE)
    assert sorted(config.id or "" for config in listed) == ["c-1", "c-2"]


async def test_push_configs_are_listed_for_every_owner_without_an_owner(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config("c-1"))
    await store.save_push_config(AGENT, BOB, push_config("c-2"))
    assert len(await store.list_push_configs(AGENT, "t-1", owner=None)) == 2


async def test_deleting_a_push_config_removes_it_once(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    assert await store.delete_push_config(AGENT, "t-1", "c-1", owner=ALICE) is True
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) is None
    assert await store.delete_push_config(AGENT, "t-1", "c-1", owner=ALICE) is False


async def test_another_owner_cannot_delete_a_push_config(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    assert await store.delete_push_config(AGENT, "t-1", "c-1", owner=BOB) is False
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()


async def test_a_config_sent_with_the_message_is_saved_with_its_task(store: Store) -> None:
    config = push_config("c-sent", "t-1")
    await record_ok(store, new_task(AGENT, ALICE, make_task("t-1"), push_config=config))
    assert await store.get_push_config(AGENT, "t-1", "c-sent", owner=ALICE) == config
    assert await store.get_push_config(AGENT, "t-1", "c-sent", owner=BOB) is None


async def test_a_config_sent_with_a_task_that_cannot_be_created_is_not_saved(
    store: Store,
) -> None:
    await create(store, make_task("t-1"), owner=ALICE)
    [outcome] = await record(
        store, new_task(AGENT, BOB, make_task("t-1"), push_config=push_config("c-sent", "t-1"))
    )
    assert outcome.error is not None
    assert await store.list_push_configs(AGENT, "t-1", owner=None) == []


# --- the push outbox -------------------------------------------------------------------

HOOK_1_0 = push_config("c-1.0", "t-1", url="https://hooks.example.com/one-oh")
HOOK_0_3 = push_config("c-0.3", "t-1", url="https://hooks.example.com/oh-three")


def lane(config: TaskPushNotificationConfig, agent: str = AGENT) -> Lane:
    assert config.task_id and config.id
    return Lane(agent, config.task_id, config.id)


async def payloads(store: Store, lane: Lane) -> list[tuple[int, str]]:
    """Every notification of the lane as (seq, payload), oldest first, delivering each."""
    found = []
    while (notification := await store.next_notification(lane)) is not None:
        found.append((notification.seq, notification.payload))
        await store.record_attempt(
            notification, outcome="delivered", status=200, error=None, duration_ms=1.0
        )
    return found


async def test_each_streamed_event_is_queued_for_each_config_in_its_version(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await store.save_push_config(AGENT, ALICE, HOOK_1_0)
    await store.save_push_config(AGENT, ALICE, HOOK_0_3, protocol="0.3")
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    done = moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))
    events = [
        status_event(working, 2),
        message_event(working, 3),  # history only: no webhook carries it
        artifact_event(working, 4),
        status_event(done, 5),
    ]
    [outcome] = await record(store, Share(AGENT, "t-1", events=events), push=True)
    assert (outcome.queued, outcome.error) == (6, None)
    assert set(await store.pending_lanes()) == {lane(HOOK_1_0), lane(HOOK_0_3)}
    # A 1.0 config gets each event as recorded: a StreamResponse.
    assert await payloads(store, lane(HOOK_1_0)) == [
        (event.seq, event.payload) for event in events if event.kind != "message"
    ]
    # A 0.3 config gets the task after each event, as 0.3 servers post it.
    queued_0_3 = await payloads(store, lane(HOOK_0_3))
    assert [seq for seq, _ in queued_0_3] == [2, 4, 5]
    assert [json.loads(body) for _, body in queued_0_3] == [
        task_to_v0_3(working),
        task_to_v0_3(working),
        task_to_v0_3(done),
    ]
    assert json.loads(queued_0_3[-1][1])["status"]["state"] == "completed"
    assert await store.pending_lanes() == []


async def test_notifications_are_counted_per_share(store: Store) -> None:
    hooked, plain = make_task("t-1"), make_task("t-2")
    await create(store, hooked)
    await create(store, plain)
    await store.save_push_config(AGENT, ALICE, HOOK_1_0)
    await store.save_push_config(AGENT, ALICE, HOOK_0_3, protocol="0.3")
    outcomes = await record(
        store,
        Share(AGENT, "t-1", events=[status_event(hooked, 2)]),
        Share(AGENT, "t-2", events=[status_event(plain, 2), artifact_event(plain, 3)]),
        Share(AGENT, "t-1-never", events=[status_event(hooked, 9)]),  # stale: queues nothing
        push=True,
    )
    assert [outcome.queued for outcome in outcomes] == [2, 0, 0]
    assert isinstance(outcomes[2].error, StaleTask)
    assert {(d.task_id, d.config_id, d.seq) for d in await store.deliveries()} == {
        ("t-1", "c-1.0", 2),
        ("t-1", "c-0.3", 2),
    }


async def test_a_round_without_push_queues_nothing(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await store.save_push_config(AGENT, ALICE, HOOK_1_0)
    [outcome] = await record(store, Share(AGENT, "t-1", events=[status_event(task, 2)]))
    assert (outcome.queued, outcome.error) == (0, None)
    assert await store.pending_lanes() == []
    assert await store.deliveries() == []


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_a_config_sent_with_the_message_gets_the_new_task_first(
    store: Store, protocol: str
) -> None:
    task = make_task("t-1", state=TaskState.SUBMITTED)
    working = moved(task, TaskState.WORKING, T0)
    hook = push_config("hook", "t-1")
    share = new_task(AGENT, ALICE, task, push_config=hook, push_protocol=protocol)
    share.events.append(status_event(working, 2))
    [outcome] = await record(store, share, push=True)
    assert (outcome.queued, outcome.error) == (2, None)
    [(first_seq, first), (second_seq, second)] = await payloads(store, lane(hook))
    assert (first_seq, second_seq) == (1, 2)
    if protocol == "1.0":
        assert json.loads(first) == {"task": task.to_wire()}
        assert json.loads(second) == json.loads(share.events[1].payload)
    else:
        assert json.loads(first) == task_to_v0_3(task)
        assert json.loads(second) == task_to_v0_3(working)


async def test_lanes_are_per_agent_task_and_config_and_can_be_filtered(store: Store) -> None:
    for agent, task_id in [(AGENT, "t-1"), (AGENT, "t-2"), ("other", "t-1")]:
        config = push_config("hook", task_id)
        await record_ok(
            store, new_task(agent, ALICE, make_task(task_id), push_config=config), push=True
        )
    assert set(await store.pending_lanes()) == {
        Lane(AGENT, "t-1", "hook"),
        Lane(AGENT, "t-2", "hook"),
        Lane("other", "t-1", "hook"),
    }
    assert set(await store.pending_lanes(AGENT)) == {
        Lane(AGENT, "t-1", "hook"),
        Lane(AGENT, "t-2", "hook"),
    }
    assert await store.pending_lanes(AGENT, "t-2") == [Lane(AGENT, "t-2", "hook")]
    assert [d.agent for d in await store.deliveries("other")] == ["other"]
    assert [d.task_id for d in await store.deliveries(task_id="t-2")] == ["t-2"]


async def queued_one(store: Store) -> Lane:
    """A task with one webhook config and one notification pending for it."""
    config = push_config("hook", "t-1")
    await record_ok(store, new_task(AGENT, ALICE, make_task("t-1"), push_config=config), push=True)
    return lane(config)


async def test_a_retried_notification_stays_first_in_its_lane(store: Store) -> None:
    hook = await queued_one(store)
    await record_ok(
        store, Share(AGENT, "t-1", events=[status_event(make_task("t-1"), 2)]), push=True
    )
    first = await store.next_notification(hook)
    assert first is not None and (first.seq, first.attempts) == (1, 0)
    await store.record_attempt(
        first, outcome="retry", status=503, error="HTTP 503", duration_ms=2.5, next_attempt_at=9.0
    )
    again = await store.next_notification(hook)
    assert again is not None
    assert (again.id, again.notification_id, again.attempts, again.next_attempt_at) == (
        first.id,
        first.notification_id,
        1,
        9.0,
    )
    [delivery, _] = await store.deliveries(task_id="t-1")
    assert (delivery.state, delivery.attempts_made, delivery.last_error) == (
        "pending",
        1,
        "HTTP 503",
    )
    [attempt] = delivery.attempts
    assert (attempt.number, attempt.status, attempt.error, attempt.duration_ms) == (
        1,
        503,
        "HTTP 503",
        2.5,
    )


async def test_a_failed_notification_is_a_dead_letter_until_requeued(store: Store) -> None:
    hook = await queued_one(store)
    notification = await store.next_notification(hook)
    assert notification is not None
    assert await store.requeue_notification(notification.id) is False  # still pending
    await store.record_attempt(
        notification, outcome="failed", status=None, error="refused", duration_ms=1.0
    )
    assert await store.next_notification(hook) is None
    assert await store.pending_lanes() == []
    [dead] = await store.deliveries()
    assert (dead.state, dead.attempts_made, dead.last_error) == ("failed", 1, "refused")
    assert await store.requeue_notification(notification.id) is True
    assert await store.requeue_notification(notification.id) is False  # pending again
    assert await store.pending_lanes() == [hook]
    requeued = await store.next_notification(hook)
    assert requeued is not None
    assert (requeued.id, requeued.attempts, requeued.next_attempt_at) == (notification.id, 1, 0)
    await store.record_attempt(
        requeued, outcome="delivered", status=200, error=None, duration_ms=1.0
    )
    [delivered] = await store.deliveries()
    assert (delivered.state, delivered.attempts_made) == ("delivered", 2)
    assert [attempt.number for attempt in delivered.attempts] == [1, 2]


async def test_requeueing_an_unknown_notification_is_false(store: Store) -> None:
    assert await store.requeue_notification(424242) is False


async def test_an_abandoned_notification_fails_without_an_attempt(store: Store) -> None:
    hook = await queued_one(store)
    notification = await store.next_notification(hook)
    assert notification is not None
    await store.abandon_notification(notification, "the config was deleted")
    assert await store.next_notification(hook) is None
    [abandoned] = await store.deliveries()
    assert (abandoned.state, abandoned.attempts_made, abandoned.attempts) == ("failed", 0, [])
    assert abandoned.last_error == "the config was deleted"


# --- pruning ---------------------------------------------------------------------------


async def aged(store: Store) -> None:
    """Finished and unfinished tasks from T0 and now, one with a delivered webhook, a receipt."""
    config = push_config("hook", "old-done")
    old_done = make_task("old-done", state=TaskState.COMPLETED, at=T0)
    await record_ok(store, new_task(AGENT, ALICE, old_done, push_config=config), push=True)
    notification = await store.next_notification(lane(config))
    assert notification is not None
    await store.record_attempt(
        notification, outcome="delivered", status=200, error=None, duration_ms=1.0
    )
    await create(store, make_task("old-working", state=TaskState.WORKING, at=T0))
    await create(store, make_task("new-done", state=TaskState.COMPLETED, at=utcnow()))
    await record_ok(store, Share(AGENT, "m", receipts=[ReceiptWrite(ALICE, "m-1", "d", "x")]))


async def test_prune_dry_run_counts_and_deletes_nothing(store: Store) -> None:
    await aged(store)
    counts = await store.prune(T0 + timedelta(days=1), dry_run=True)
    assert counts == {
        "tasks": 1,
        "events": 1,
        "push_configs": 1,
        "notifications": 1,
        "attempts": 1,
        "receipts": 0,
    }
    assert await store.get_task(AGENT, "old-done", owner=None) is not None
    assert len(await store.deliveries()) == 1


async def test_prune_deletes_finished_tasks_older_than_the_cutoff_with_all_of_theirs(
    store: Store,
) -> None:
    await aged(store)
    counts = await store.prune(T0 + timedelta(days=1))
    assert (counts["tasks"], counts["events"], counts["notifications"]) == (1, 1, 1)
    assert await store.get_task(AGENT, "old-done", owner=None) is None
    assert await store.events_after(AGENT, "old-done", 0) == []
    assert await store.list_push_configs(AGENT, "old-done", owner=None) == []
    assert await store.deliveries() == []
    page = await store.list_tasks(AGENT, ALICE)
    assert sorted(ids(page.tasks)) == ["new-done", "old-working"]
    assert await store.find_message(AGENT, ALICE, "m-1", "d", T0) is not None
    # Receipts go once they are older than the cutoff; unfinished tasks never do.
    later = await store.prune(utcnow() + timedelta(minutes=1))
    assert (later["tasks"], later["receipts"]) == (1, 1)
    assert await store.find_message(AGENT, ALICE, "m-1", "d", T0) is None
    assert ids((await store.list_tasks(AGENT, ALICE)).tasks) == ["old-working"]


# --- secrets ---------------------------------------------------------------------------


def database_bytes(database: Path, *, wal: bool = True) -> bytes:
    """Everything SQLite wrote for the database: the main file and (``wal``) its write-ahead log."""
    files = [database, database.with_name(database.name + "-wal")] if wal else [database]
    return b"".join(path.read_bytes() for path in files if path.exists())


async def test_push_secrets_are_not_stored_in_plaintext(
    sqlite_store: SqliteStore, database: Path
) -> None:
    config = push_config()
    await sqlite_store.save_push_config(AGENT, ALICE, config)
    written = database_bytes(database)
    assert config.url.encode() in written  # the row is in what we read
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


async def test_push_secrets_sent_with_a_message_are_not_stored_in_plaintext(
    sqlite_store: SqliteStore, database: Path
) -> None:
    await record_ok(
        sqlite_store, new_task(AGENT, ALICE, make_task("t-1"), push_config=push_config())
    )
    written = database_bytes(database)
    assert b"https://hooks.example.com/a2a-webhook" in written
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


async def test_push_secrets_are_not_stored_in_plaintext_after_a_checkpoint(
    sqlite_store: SqliteStore, database: Path
) -> None:
    await sqlite_store.save_push_config(AGENT, ALICE, push_config())
    sqlite_store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    written = database_bytes(database, wal=False)
    assert b"https://hooks.example.com/a2a-webhook" in written
    assert b"opaque-verification-token-7f3a" not in written
    assert b"bearer-credentials-91c2" not in written


async def test_a_development_key_is_kept_beside_the_database(
    sqlite_store: SqliteStore, database: Path
) -> None:
    key_file = database.with_name("a2a.db.key")
    assert key_file.exists()
    Fernet(key_file.read_bytes().strip())  # a usable Fernet key
    assert key_file.stat().st_mode & 0o077 == 0


async def test_reopening_the_database_reuses_its_key_and_decrypts(database: Path) -> None:
    first = SqliteStore(database)
    await first.open()
    await first.save_push_config(AGENT, ALICE, push_config())
    await first.aclose()
    key = database.with_name("a2a.db.key").read_bytes()

    second = SqliteStore(database)
    await second.open()
    try:
        assert await second.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
    finally:
        await second.aclose()
    assert database.with_name("a2a.db.key").read_bytes() == key


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


async def test_secrets_sealed_with_another_key_do_not_open(location: DatabaseLocation) -> None:
    first = await opened(location, secret_key=Fernet.generate_key())
    try:
        await first.save_push_config(AGENT, ALICE, push_config())
    finally:
        await first.aclose()
    second = await opened(location, secret_key=Fernet.generate_key())
    try:
        with pytest.raises(SecretKeyError):
            await second.get_push_config(AGENT, "t-1", "c-1", owner=ALICE)
    finally:
        await second.aclose()


async def test_a_malformed_key_is_refused(location: DatabaseLocation) -> None:
    with pytest.raises(SecretKeyError, match="32 url-safe base64-encoded bytes"):
        await opened(location, secret_key="too short")


async def test_reopening_the_database_keeps_its_tasks(location: DatabaseLocation) -> None:
    first = await opened(location)
    try:
        await create(first, make_task("t-1"))
    finally:
        await first.aclose()
    second = await opened(location)
    try:
        stored = await second.get_task(AGENT, "t-1", owner=ALICE)
        assert stored is not None and stored.last_seq == 1
    finally:
        await second.aclose()


# --- schema --------------------------------------------------------------------------


def user_version(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_a_sqlite_store_opens_its_database_on_first_use(database: Path) -> None:
    store = SqliteStore(database)
    try:
        assert not database.exists()
        assert trio.run(partial(store.get_task, AGENT, "t-1", owner=None)) is None
        assert user_version(database) == SCHEMA_VERSION
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
    sqlite_store: SqliteStore, database: Path
) -> None:
    assert user_version(database) == SCHEMA_VERSION


def test_a_database_from_a_newer_version_is_refused(database: Path) -> None:
    with sqlite3.connect(database) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(RuntimeError, match="newer than this a2a-trio understands"):
        SqliteStore(database).connect()


async def test_migrating_a_current_database_changes_nothing(
    sqlite_store: SqliteStore, database: Path
) -> None:
    await create(sqlite_store, make_task("t-1"))
    assert migrate(sqlite_store.db) == SCHEMA_VERSION
    assert user_version(database) == SCHEMA_VERSION
    assert ids((await sqlite_store.list_tasks(AGENT, ALICE)).tasks) == ["t-1"]


async def test_a_migration_interrupted_before_its_version_bump_finishes_next_time(
    sqlite_store: SqliteStore, database: Path
) -> None:
    await create(sqlite_store, make_task("t-1"))
    await sqlite_store.save_push_config(AGENT, ALICE, push_config())
    sqlite_store.db.execute("PRAGMA user_version = 0")  # the tables exist, the bump did not happen
    assert migrate(sqlite_store.db) == 0
    assert user_version(database) == SCHEMA_VERSION
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
        await record(
            sqlite_store,
            new_task(AGENT, ALICE, make_task("bystander")),
            new_task(AGENT, ALICE, make_task("doomed")),
        )
    assert (await sqlite_store.list_tasks(AGENT, ALICE)).total_size == 0
    # The transaction did not stay open: the next round is stored as usual.
    await create(sqlite_store, make_task("later"))
    assert ids((await sqlite_store.list_tasks(AGENT, ALICE)).tasks) == ["later"]


# --- serving: one process per database ----------------------------------------------

#: A process that serves ``argv[1]`` (holds it as a server's store does) until killed.
HOLDER = """
import sys
from a2a_trio.store import SqliteStore
store = SqliteStore(sys.argv[1]).connect(exclusive=True)
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


async def test_serving_a_database_another_process_serves_is_refused_naming_it_and_the_fix(
    database: Path, held_elsewhere: subprocess.Popen[str]
) -> None:
    with pytest.raises(DatabaseInUseError) as refused:
        await SqliteStore(database).open(exclusive=True)
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
    SqliteStore(database).connect(exclusive=True).close()


async def test_a_second_store_serving_the_database_in_this_process_is_refused(
    database: Path,
) -> None:
    first = SqliteStore(database)
    await first.open(exclusive=True)
    try:
        with pytest.raises(
            DatabaseInUseError, match=f"another app in this process .pid {os.getpid()}"
        ):
            await SqliteStore(database).open(exclusive=True)
    finally:
        await first.aclose()


async def test_closing_a_serving_store_lets_the_database_go(database: Path) -> None:
    first = SqliteStore(database)
    await first.open(exclusive=True)
    await first.aclose()
    second = SqliteStore(database)
    await second.open(exclusive=True)
    await second.aclose()


async def test_a_reader_opens_reads_and_prunes_a_database_being_served(database: Path) -> None:
    server, reader = SqliteStore(database), SqliteStore(database)
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


def test_a_store_that_fails_to_open_for_serving_lets_the_database_go(database: Path) -> None:
    with sqlite3.connect(database) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    store = SqliteStore(database)
    with pytest.raises(RuntimeError, match="newer than this a2a-trio understands"):
        store.connect(exclusive=True)
    lock = ServingLock(database)
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

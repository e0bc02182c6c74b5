"""What every store backend does alike: the contract of :class:`a2a_trio.store.Store`.

The tests here take a ``store`` fixture (open, on an empty database) and know
nothing of the backend behind it. A backend's test module defines the fixture
and imports these (``from .store_contract import *``), so each backend runs
the same specification; what only one backend has (its schema, its locks,
where its key lives) is tested in that backend's module.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
import trio

from a2a_trio.protocol import InvalidParamsError
from a2a_trio.protocol.compat_v0_3 import task_to_v0_3
from a2a_trio.protocol.limits import Limits
from a2a_trio.protocol.models import (
    AuthenticationInfo,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from a2a_trio.protocol.versions import LEGACY_VERSION, PROTOCOL_VERSION
from a2a_trio.store.base import Store
from a2a_trio.store.records import EventKind, Lane, Notification
from a2a_trio.store.rounds import (
    EventWrite,
    NewTask,
    ReceiptWrite,
    Round,
    Share,
    ShareOutcome,
    StaleTask,
    v0_3_webhook_body,
)

from .writes import (
    AGENT,
    ALICE,
    artifact_event,
    create,
    creating,
    following,
    message_event,
    note,
    record,
    row,
    status_event,
    task_event,
)

BOB = "bob"
T0 = datetime(2025, 10, 28, 10, 0, tzinfo=UTC)
#: How a store writes the times it hands back: order_key's fixed-width UTC.
ORDER_KEY = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


# --- building rounds -------------------------------------------------------------------

# The builders every store test shares live in tests/writes.py; these are the contract's.


def make_task(
    task_id: str,
    *,
    context_id: str = "ctx-1",
    state: TaskState = TaskState.WORKING,
    at: datetime | None = T0,
) -> Task:
    return Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(state=state, timestamp=at),
        history=[Message(message_id=f"{task_id}-m", role=Role.USER, parts=[Part(text="hi")])],
    )


def moved(task: Task, state: TaskState, at: datetime) -> Task:
    return task.model_copy(update={"status": TaskStatus(state=state, timestamp=at)})


async def append(
    store: Store, task: Task, kind: EventKind = "status", *, push: bool = False
) -> ShareOutcome:
    """Record one event after the stored task's last one; the share must succeed."""
    stored = await store.get_task(AGENT, task.id, owner=None)
    assert stored is not None
    seq = stored.last_seq + 1
    writers = {
        "task": task_event,
        "status": status_event,
        "artifact": artifact_event,
        "message": message_event,
    }
    [outcome] = await record(store, following(task.id, writers[kind](seq, task)), push=push)
    assert outcome.error is None, outcome.error
    return outcome


def ids(tasks: list[Task]) -> list[str]:
    return [task.id for task in tasks]


# --- tasks and the event log ---------------------------------------------------------


async def test_a_created_task_is_read_back_by_its_owner(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.agent, stored.owner, stored.task, stored.last_seq) == (
        AGENT,
        ALICE,
        row(task),
        1,
    )
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


# --- the history, read from the log ------------------------------------------------------


def said(task_id: str, n: int, role: Role = Role.USER, text: str = "") -> Message:
    return Message(message_id=f"{task_id}-said-{n}", role=role, parts=[Part(text=text or f"{n}")])


def asking(task: Task, seq: int, message: Message) -> EventWrite:
    """A status event whose message joins the history (as an agent asking for input)."""
    status = TaskStatus(state=TaskState.INPUT_REQUIRED, message=message, timestamp=T0)
    return status_event(seq, task.model_copy(update={"status": status}))


def user_said(task: Task, seq: int, message: Message) -> EventWrite:
    return EventWrite(seq, "message", message.to_json(), row(task))


async def converse(store: Store, task: Task, turns: int) -> list[Message]:
    """Create ``task``, then ``turns`` turns (the user's message, the agent's question)."""
    await create(store, task)
    spoken = list(task.history or [])
    seq = 1
    for turn in range(turns):
        question = said(task.id, 2 * turn + 1, Role.AGENT)
        answer = said(task.id, 2 * turn + 2)
        shares = [asking(task, seq + 1, question), user_said(task, seq + 2, answer)]
        await record(store, following(task.id, *shares))
        spoken += [question, answer]
        seq += 2
    return spoken


async def test_the_history_is_every_message_of_the_log_in_order(store: Store) -> None:
    task = make_task("t-1")
    spoken = await converse(store, task, 3)
    assert await store.history(AGENT, "t-1", limits=Limits()) == spoken
    # Artifacts and status updates without a message are not in it.
    await append(store, task, "artifact")
    await append(store, task)
    assert await store.history(AGENT, "t-1", limits=Limits()) == spoken


async def test_the_history_is_the_most_recent_messages_within_the_limits(store: Store) -> None:
    spoken = await converse(store, make_task("t-1"), 40)
    assert len(spoken) == 81
    assert await store.history(AGENT, "t-1", limits=Limits(history_messages=5)) == spoken[-5:]
    assert await store.history(AGENT, "t-1", limits=Limits(), length=3) == spoken[-3:]
    assert await store.history(AGENT, "t-1", limits=Limits(), length=0) == []
    size = len(spoken[-1].to_json()) + len(spoken[-2].to_json())
    assert await store.history(AGENT, "t-1", limits=Limits(history_bytes=size)) == spoken[-2:]
    assert await store.history(AGENT, "t-1", limits=Limits(history_bytes=1)) == spoken[-1:]


async def test_the_history_up_to_an_event_leaves_out_the_later_ones(store: Store) -> None:
    spoken = await converse(store, make_task("t-1"), 3)
    assert await store.history(AGENT, "t-1", limits=Limits(), through=3) == spoken[:3]
    assert await store.history(AGENT, "t-1", limits=Limits(), through=1) == spoken[:1]


async def test_a_message_logged_twice_shows_once_at_its_first_place(store: Store) -> None:
    task = make_task("t-1")
    spoken = await converse(store, task, 1)
    again = asking(task, 4, spoken[1])  # the agent's question, re-announced
    await record(store, following("t-1", again, user_said(task, 5, said("t-1", 9))))
    history = await store.history(AGENT, "t-1", limits=Limits())
    assert history == [*spoken, said("t-1", 9)]


async def test_an_unknown_task_has_no_history(store: Store) -> None:
    assert await store.history(AGENT, "nope", limits=Limits()) == []


async def test_a_share_stores_the_task_as_its_last_event_leaves_it(store: Store) -> None:
    task = make_task("t-1", state=TaskState.SUBMITTED)
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    done = moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))
    [outcome] = await record(store, creating(task, status_event(2, working), status_event(3, done)))
    assert outcome == ShareOutcome(0)
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.task, stored.last_seq) == (row(done), 3)


async def test_each_recorded_event_takes_the_next_sequence_number(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append(store, moved(task, TaskState.WORKING, T0 + timedelta(seconds=1)))
    await append(store, moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2)))
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert stored.last_seq == 3
    assert stored.task == row(moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2)))


async def test_sequence_numbers_count_per_task(store: Store) -> None:
    first, second = make_task("t-1"), make_task("t-2")
    await create(store, first)
    await append(store, first)
    await create(store, second)
    await append(store, second)
    for task_id in ("t-1", "t-2"):
        events = await store.events_after(AGENT, task_id, 0)
        assert [(event.seq, event.kind) for event in events] == [(1, "task"), (2, "status")]


async def test_events_after_returns_the_streamed_events_in_order(store: Store) -> None:
    task = make_task("t-1")
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    done = moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))
    share = creating(
        task,
        status_event(2, working),
        message_event(3, working),
        artifact_event(4, working),
        status_event(5, done),
    )
    await record(store, share)
    events = await store.events_after(AGENT, "t-1", 0)
    assert [(event.seq, event.kind) for event in events] == [
        (1, "task"),
        (2, "status"),
        (4, "artifact"),
        (5, "status"),
    ]
    assert [event.payload for event in events] == [share.events[i].payload for i in (0, 1, 3, 4)]
    assert json.loads(events[0].payload) == {"task": task.to_wire()}


async def test_events_after_skips_what_was_already_seen(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append(store, task)
    await append(store, moved(task, TaskState.COMPLETED, T0))
    assert [event.seq for event in await store.events_after(AGENT, "t-1", 2)] == [3]
    assert await store.events_after(AGENT, "t-1", 3) == []


async def test_task_since_reads_the_task_then_its_events_above_the_cursor(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append(store, task)
    await append(store, moved(task, TaskState.COMPLETED, T0))
    stored, events = await store.task_since(AGENT, "t-1", 1)
    assert stored is not None and stored.last_seq == 3
    assert stored.state is TaskState.COMPLETED
    assert [event.seq for event in events] == [2, 3]
    assert await store.task_since(AGENT, "no-such-task", 0) == (None, [])


async def test_tasks_since_reads_each_task_from_its_own_cursor(store: Store) -> None:
    for task_id in ("t-1", "t-2"):
        task = make_task(task_id)
        await create(store, task)
        await append(store, task)
        await append(store, moved(task, TaskState.COMPLETED, T0))
    read = await store.tasks_since(AGENT, [("t-1", 1), ("t-2", 2), ("no-such-task", 0)])
    assert sorted(read) == ["t-1", "t-2"]
    assert [event.seq for event in read["t-1"][1]] == [2, 3]
    assert [event.seq for event in read["t-2"][1]] == [3]
    stored = read["t-2"][0]
    assert stored is not None and stored.last_seq == 3
    assert await store.tasks_since(AGENT, []) == {}


async def test_task_since_reads_the_history_rows_that_are_not_streamed(store: Store) -> None:
    # A reader keeps the history whole only if it sees every message row too.
    task = make_task("t-1")
    await create(store, task)
    await append(store, task, "message")
    await append(store, moved(task, TaskState.COMPLETED, T0))
    _, events = await store.task_since(AGENT, "t-1", 1)
    assert [(event.seq, event.kind) for event in events] == [(2, "message"), (3, "status")]
    streamed = await store.events_after(AGENT, "t-1", 1)
    assert [event.kind for event in streamed] == ["status"]


#: JSON as a recorder might write it, with everything a re-serialiser would change:
#: spacing, key order, a duplicate key, escapes, emoji, line and paragraph
#: separators, a right-to-left mark, a combining accent and an escaped NUL.
ODD_PAYLOAD = (
    '{ "task" : {"status": {"state":"TASK_STATE_WORKING"}, "id":"t-1",\n'
    '  "metadata": {"z": 1, "a": 2, "a": 3, "big": 12345678901234567890.000,'
    ' "text": "emoji \U0001f600 \\ud83d\\ude00 sep\u2028par\u2029 rtl\u200f e\u0301 nul\\u0000",'
    ' "slash": "\\/"}}}'
)


async def test_an_event_payload_reads_back_byte_for_byte(store: Store) -> None:
    task = make_task("t-1")
    await record(
        store,
        Share(AGENT, "t-1", new=NewTask(ALICE), events=[EventWrite(1, "task", ODD_PAYLOAD, task)]),
    )
    [event] = await store.events_after(AGENT, "t-1", 0)
    assert event.payload == ODD_PAYLOAD
    assert event.payload.encode() == ODD_PAYLOAD.encode()


async def test_a_large_payload_and_snapshot_round_trip(store: Store) -> None:
    text = "a2a\u2028\U0001f600 " * (5 * 1024 * 1024 // 10)  # ~5 MB of UTF-8
    task = make_task("t-1")
    big = artifact_event(2, task, text)
    big = EventWrite(2, "artifact", big.payload, task.model_copy(update={"metadata": {"t": text}}))
    assert len(big.payload.encode()) > 5 * 1024 * 1024
    [outcome] = await record(store, creating(task, big))
    assert outcome.error is None
    [_, event] = await store.events_after(AGENT, "t-1", 0)
    assert event.payload == big.payload
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None and stored.task.metadata == {"t": text}


async def test_a_share_of_thousands_of_events_is_stored_whole(store: Store) -> None:
    task = make_task("t-1")
    await record(store, creating(task, *(status_event(seq, task) for seq in range(2, 2502))))
    [outcome] = await record(
        store, following("t-1", *(status_event(seq, task) for seq in range(2502, 4002)))
    )
    assert outcome.error is None
    assert [event.seq for event in await store.events_after(AGENT, "t-1", 0)] == list(
        range(1, 4002)
    )
    stored = await store.get_task(AGENT, "t-1", owner=None)
    assert stored is not None and stored.last_seq == 4001


async def test_keys_holding_nul_name_nothing_stored(store: Store) -> None:
    await create(store, make_task("t-1"))
    assert await store.get_task(AGENT, "t-1\0", owner=None) is None
    assert await store.events_after(AGENT, "t\0", 0) == []
    assert (await store.list_tasks(AGENT, ALICE, context_id="ctx-1\0")).tasks == []
    assert await store.find_message(AGENT, ALICE, "m\0", "d", T0) is None
    assert await store.get_push_config(AGENT, "t-1", "c\0", owner=None) is None
    assert await store.list_push_configs(AGENT, "t-1", owner="\0") == []
    assert await store.delete_push_config(AGENT, "t-1", "c\0", owner=ALICE) is False


# --- rounds: each share all or nothing -------------------------------------------------


async def test_a_round_reports_one_outcome_per_share_in_order(store: Store) -> None:
    outcomes = await record(store, creating(make_task("t-1")), creating(make_task("t-2")))
    assert outcomes == [ShareOutcome(0), ShareOutcome(0)]
    assert (await store.list_tasks(AGENT, ALICE)).total_size == 2


async def test_an_empty_round_stores_nothing(store: Store) -> None:
    assert await store.record(Round()) == []
    assert (await store.list_tasks(AGENT, ALICE)).total_size == 0


async def test_a_task_created_twice_fails_that_share_alone(store: Store) -> None:
    original = make_task("t-1")
    await create(store, original)
    again = moved(original, TaskState.COMPLETED, T0 + timedelta(minutes=1))
    twice, other = await record(store, creating(again, owner=BOB), creating(make_task("t-2")))
    assert twice.error is not None
    assert other == ShareOutcome(0)
    stored = await store.get_task(AGENT, "t-1", owner=None)
    assert stored is not None
    assert (stored.owner, stored.task, stored.last_seq) == (ALICE, row(original), 1)
    assert [event.seq for event in await store.events_after(AGENT, "t-1", 0)] == [1]
    assert await store.get_task(AGENT, "t-2", owner=ALICE) is not None


async def test_a_share_behind_its_task_is_stale_and_the_others_commit(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append(store, moved(task, TaskState.WORKING, T0 + timedelta(seconds=1)))
    forked = moved(task, TaskState.FAILED, T0 + timedelta(seconds=2))
    stale, other = await record(
        store, following("t-1", status_event(2, forked)), creating(make_task("t-2"))
    )
    assert isinstance(stale.error, StaleTask)
    assert other == ShareOutcome(0)
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.state, stored.last_seq) == (TaskState.WORKING, 2)
    assert await store.get_task(AGENT, "t-2", owner=ALICE) is not None


@pytest.mark.parametrize("first_seq", [2, 3, 5], ids=["behind", "taken", "ahead"])
async def test_a_share_that_does_not_follow_its_task_is_stale_and_stores_nothing(
    store: Store, first_seq: int
) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append(store, task)
    await append(store, task)  # the task is at 3: only 4 follows it
    later = moved(task, TaskState.COMPLETED, T0 + timedelta(minutes=1))
    stale = Share(
        AGENT,
        "t-1",
        events=[status_event(first_seq, later), status_event(first_seq + 1, later)],
        receipts=[ReceiptWrite(ALICE, "m-stale", "digest", task_id="t-1", seq=first_seq)],
    )
    [outcome] = await record(store, stale)
    assert isinstance(outcome.error, StaleTask)
    assert outcome.queued == 0
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None
    assert (stored.last_seq, stored.task) == (3, row(task))
    assert [event.seq for event in await store.events_after(AGENT, "t-1", 0)] == [1, 2, 3]
    # The share's receipt went with the rest of it.
    assert await store.find_message(AGENT, ALICE, "m-stale", "digest", T0) is None


async def test_a_share_for_a_task_that_does_not_exist_is_stale(store: Store) -> None:
    [outcome] = await record(store, following("ghost", status_event(2, make_task("ghost"))))
    assert isinstance(outcome.error, StaleTask)
    assert await store.events_after(AGENT, "ghost", 0) == []


async def test_a_failed_share_leaves_none_of_its_writes(store: Store) -> None:
    await record(store, creating(make_task("t-1"), push_config=push_config(url=HOOK)))
    receipt = ReceiptWrite(BOB, "m-1", "digest", task_id="t-1")
    [outcome] = await record(
        store,
        creating(
            make_task("t-1"),
            owner=BOB,
            push_config=push_config(url="https://hooks.example.com/other"),
            receipts=[receipt],
        ),
    )
    assert outcome.error is not None
    assert [c.url for c in await store.list_push_configs(AGENT, "t-1", owner=None)] == [HOOK]
    assert await store.find_message(AGENT, BOB, "m-1", "digest", T0) is None


async def test_two_rounds_racing_on_one_task_fork_nothing(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    outcomes: list[ShareOutcome] = []

    async def follow(state: TaskState) -> None:
        outcomes.extend(
            await record(store, following("t-1", status_event(2, moved(task, state, T0))))
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow, TaskState.COMPLETED)
        nursery.start_soon(follow, TaskState.FAILED)
    assert sorted(outcome.error is None for outcome in outcomes) == [False, True]
    assert [event.seq for event in await store.events_after(AGENT, "t-1", 0)] == [1, 2]
    stored = await store.get_task(AGENT, "t-1", owner=ALICE)
    assert stored is not None and stored.last_seq == 2


async def test_a_new_tasks_push_config_is_stored_with_it(store: Store) -> None:
    config = push_config()
    await record(store, creating(make_task("t-1"), push_config=config))
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == config


# --- message receipts ------------------------------------------------------------------


async def test_a_share_of_receipts_alone_touches_no_task(store: Store) -> None:
    answer = Message(message_id="a-1", role=Role.AGENT, parts=[Part(text="hi")]).to_json()
    receipt = ReceiptWrite(ALICE, "m-1", "digest", answer=answer)
    [outcome] = await record(store, Share(AGENT, "direct", receipts=[receipt]), push=True)
    assert outcome == ShareOutcome(0)
    assert await store.get_task(AGENT, "direct", owner=None) is None
    assert await store.events_after(AGENT, "direct", 0) == []
    assert await store.unfinished_tasks() == []
    found = await store.find_message(AGENT, ALICE, "m-1", "digest", T0)
    assert found is not None and (found.task_id, found.seq, found.answer) == (None, 0, answer)


async def test_a_receipt_recorded_with_its_task_is_found(store: Store) -> None:
    receipt = ReceiptWrite(ALICE, "m-1", "digest", task_id="t-1", seq=0)
    await record(store, creating(make_task("t-1"), receipts=[receipt]))
    found = await store.find_message(AGENT, ALICE, "m-1", "digest", T0)
    assert found is not None and (found.task_id, found.seq, found.answer) == ("t-1", 0, None)


async def test_a_receipt_recorded_with_a_continued_task_keeps_its_log_position(
    store: Store,
) -> None:
    task = make_task("t-1")
    await create(store, task)
    receipt = ReceiptWrite(ALICE, "m-2", "digest", task_id="t-1", seq=2)
    [outcome] = await record(
        store, Share(AGENT, "t-1", events=[message_event(2, task)], receipts=[receipt])
    )
    assert outcome == ShareOutcome(0)
    found = await store.find_message(AGENT, ALICE, "m-2", "digest", T0)
    assert found is not None and (found.task_id, found.seq, found.answer) == ("t-1", 2, None)


async def test_a_receipt_is_kept_as_first_recorded(store: Store) -> None:
    first = ReceiptWrite(ALICE, "m-1", "digest", task_id="t-1", seq=4)
    second = ReceiptWrite(ALICE, "m-1", "digest", task_id="t-2", seq=7)
    outcomes = await record(
        store, Share(AGENT, "t-1", receipts=[first]), Share(AGENT, "t-2", receipts=[second])
    )
    assert outcomes == [ShareOutcome(0), ShareOutcome(0)]
    found = await store.find_message(AGENT, ALICE, "m-1", "digest", T0)
    assert found is not None and (found.task_id, found.seq) == ("t-1", 4)
    # And in a later round.
    third = ReceiptWrite(ALICE, "m-1", "digest", task_id="t-3", seq=9)
    assert await record(store, Share(AGENT, "t-3", receipts=[third])) == [ShareOutcome(0)]
    found = await store.find_message(AGENT, ALICE, "m-1", "digest", T0)
    assert found is not None and (found.task_id, found.seq) == ("t-1", 4)


async def test_a_message_is_found_only_by_its_owner_and_content(store: Store) -> None:
    await record(store, Share(AGENT, "t-1", receipts=[ReceiptWrite(ALICE, "m-1", "d-1", "t-1")]))
    assert await store.find_message(AGENT, ALICE, "m-1", "d-1", T0) is not None
    assert await store.find_message(AGENT, BOB, "m-1", "d-1", T0) is None
    assert await store.find_message(AGENT, ALICE, "m-1", "d-2", T0) is None
    assert await store.find_message("other", ALICE, "m-1", "d-1", T0) is None


async def test_a_receipt_older_than_since_is_not_found(store: Store) -> None:
    await record(store, Share(AGENT, "t-1", receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-1")]))
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert await store.find_message(AGENT, ALICE, "m-1", "d", later) is None
    assert await store.remembered_messages(AGENT, later) == []
    assert await store.remembered_messages(AGENT, T0) == [(ALICE, "m-1")]


async def test_remembered_messages_are_every_owners_recent_ones(store: Store) -> None:
    await record(
        store,
        Share(AGENT, "t-1", receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-1")]),
        Share(AGENT, "t-2", receipts=[ReceiptWrite(BOB, "m-2", "d", "t-2")]),
        Share("other", "t-3", receipts=[ReceiptWrite(BOB, "m-3", "d", "t-3")]),
    )
    since = datetime.now(UTC) - timedelta(minutes=1)
    assert sorted(await store.remembered_messages(AGENT, since)) == [(ALICE, "m-1"), (BOB, "m-2")]


async def test_a_forgotten_message_is_not_found(store: Store) -> None:
    receipts = [ReceiptWrite(ALICE, "m-1", "d", "t-1"), ReceiptWrite(BOB, "m-1", "d", "t-1")]
    await record(store, Share(AGENT, "t-1", receipts=receipts))
    await store.forget_message(AGENT, ALICE, "m-1", "other-digest")
    assert await store.find_message(AGENT, ALICE, "m-1", "d", T0) is not None
    await store.forget_message(AGENT, ALICE, "m-1", "d")
    assert await store.find_message(AGENT, ALICE, "m-1", "d", T0) is None
    assert await store.find_message(AGENT, BOB, "m-1", "d", T0) is not None
    await store.forget_message(AGENT, ALICE, "m-1", "d")  # nothing left to forget: no error


# --- unfinished tasks ----------------------------------------------------------------


async def test_unfinished_tasks_are_those_submitted_or_working(store: Store) -> None:
    for state in TaskState:
        if state is not TaskState.UNSPECIFIED:
            await create(store, make_task(f"t-{state.name}", state=state))
    unfinished = await store.unfinished_tasks()
    assert sorted(stored.task.id for stored in unfinished) == ["t-SUBMITTED", "t-WORKING"]
    assert {(stored.owner, stored.last_seq) for stored in unfinished} == {(ALICE, 1)}


async def test_unfinished_tasks_can_be_limited_to_one_agent(store: Store) -> None:
    await create(store, make_task("t-1"), agent="weather")
    await create(store, make_task("t-2"), agent="travel")
    assert [stored.task.id for stored in await store.unfinished_tasks("travel")] == ["t-2"]
    assert len(await store.unfinished_tasks()) == 2


async def test_a_paused_task_whose_follow_up_had_started_is_unfinished(store: Store) -> None:
    # The follow-up is logged when its execution starts: a user's message after
    # the last status is a continuation under way (or cut off by a crash).
    paused = make_task("t-1", state=TaskState.INPUT_REQUIRED)
    await create(store, paused)
    await create(store, make_task("t-2", state=TaskState.INPUT_REQUIRED))
    await record(store, following("t-1", user_said(paused, 2, said("t-1", 1, Role.AGENT))))
    assert await store.unfinished_tasks() == []  # the agent's message: nothing to answer
    await record(store, following("t-1", user_said(paused, 3, said("t-1", 2))))
    [unfinished] = await store.unfinished_tasks()
    assert (unfinished.task.id, unfinished.state, unfinished.last_seq) == (
        "t-1",
        TaskState.INPUT_REQUIRED,
        3,
    )
    assert len(await store.unfinished_tasks(AGENT, task_id="t-1")) == 1
    assert await store.unfinished_tasks(AGENT, task_id="t-2") == []
    assert await store.unfinished_tasks("other") == []
    await record(store, following("t-1", asking(paused, 4, said("t-1", 3, Role.AGENT))))
    assert await store.unfinished_tasks() == []  # answered: paused again


async def test_a_task_that_finished_is_no_longer_unfinished(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append(store, moved(task, TaskState.COMPLETED, T0))
    assert await store.unfinished_tasks() == []


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
    await append(store, moved(old, TaskState.COMPLETED, T0 + timedelta(minutes=2)))
    assert ids((await store.list_tasks(AGENT, ALICE)).tasks) == ["t-old", "t-new"]


async def test_a_task_without_a_status_time_counts_as_updated_when_stored(store: Store) -> None:
    await create(store, make_task("t-dated", at=T0))
    before = datetime.now(UTC) - timedelta(seconds=5)
    await create(store, make_task("t-undated", at=None))
    page = await store.list_tasks(AGENT, ALICE, updated_after=before)
    assert ids(page.tasks) == ["t-undated"]


async def test_ties_in_update_time_are_ordered_by_id_in_code_point_order(store: Store) -> None:
    for task_id in ["t-B", "t-a", "t-é", "t-A", "t-b", "t-\U0001f600"]:
        await create(store, make_task(task_id, at=T0))
    listed = ids((await store.list_tasks(AGENT, ALICE)).tasks)
    assert listed == sorted(listed, reverse=True)


async def test_listing_shows_only_the_owners_tasks(store: Store) -> None:
    await create(store, make_task("t-alice"), owner=ALICE)
    await create(store, make_task("t-bob"), owner=BOB)
    page = await store.list_tasks(AGENT, BOB)
    assert ids(page.tasks) == ["t-bob"]
    assert page.total_size == 1


async def test_listed_tasks_are_the_stored_snapshots(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    assert (await store.list_tasks(AGENT, ALICE)).tasks == [row(task)]


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
    assert flat == [f"t-{index}" for index in reversed(range(9))]
    assert [len(page) for page in pages] == [2, 2, 2, 2, 1]


async def test_pages_tell_apart_times_a_microsecond_apart(store: Store) -> None:
    for index in range(4):
        await create(store, make_task(f"t-{index}", at=T0 + timedelta(microseconds=index)))
    assert await read_all_pages(store, page_size=1) == [["t-3"], ["t-2"], ["t-1"], ["t-0"]]


async def test_every_page_reports_the_total_before_pagination(store: Store) -> None:
    for minute in range(5):
        await create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    first = await store.list_tasks(AGENT, ALICE, page_size=2)
    second = await store.list_tasks(AGENT, ALICE, page_size=2, page_token=first.next_page_token)
    assert (first.total_size, second.total_size) == (5, 5)


async def test_a_page_token_holds_the_order_key_and_id_of_the_pages_last_task(
    store: Store,
) -> None:
    for minute in range(3):
        await create(store, make_task(f"t-{minute}", at=T0 + timedelta(minutes=minute)))
    page = await store.list_tasks(AGENT, ALICE, page_size=2)
    raw = base64.urlsafe_b64decode(page.next_page_token + "=" * (-len(page.next_page_token) % 4))
    assert json.loads(raw) == ["2025-10-28T10:01:00.000000Z", "t-1"]


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


async def test_a_naive_update_time_filter_is_taken_as_utc(store: Store) -> None:
    await create(store, make_task("t-1", at=T0))  # 10:00Z
    assert ids(
        (await store.list_tasks(AGENT, ALICE, updated_after=datetime(2025, 10, 28, 10))).tasks
    ) == ["t-1"]
    after = datetime(2025, 10, 28, 10, 0, 0, 1)
    assert (await store.list_tasks(AGENT, ALICE, updated_after=after)).tasks == []


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
        urlsafe(b'{"updatedAt": "x", "id": "y"}'),
        urlsafe(b'"ab"'),
    ],
)
async def test_a_forged_page_token_is_invalid_params(store: Store, token: str) -> None:
    await create(store, make_task("t-1"))
    with pytest.raises(InvalidParamsError, match="pageToken"):
        await store.list_tasks(AGENT, ALICE, page_token=token)


# --- push notification configs -------------------------------------------------------

HOOK = "https://hooks.example.com/a2a-webhook"


def push_config(
    config_id: str = "c-1", task_id: str = "t-1", **fields: object
) -> TaskPushNotificationConfig:
    values: dict[str, object] = {
        "id": config_id,
        "task_id": task_id,
        "url": HOOK,
        "token": "opaque-verification-token-7f3a",
        "authentication": AuthenticationInfo(
            scheme="Bearer", credentials="bearer-credentials-91c2"
        ),
    }
    values.update(fields)
    return TaskPushNotificationConfig(**values)


async def test_a_saved_push_config_is_read_back_by_its_owner(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=None) == push_config()


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


async def test_push_configs_are_listed_oldest_first_a_replaced_one_last(store: Store) -> None:
    for config_id in ("c-2", "c-1", "c-3"):
        await store.save_push_config(AGENT, ALICE, push_config(config_id))
    await store.save_push_config(AGENT, ALICE, push_config("c-2", url="https://x.example.com"))
    listed = await store.list_push_configs(AGENT, "t-1", owner=ALICE)
    assert [config.id for config in listed] == ["c-1", "c-3", "c-2"]


async def test_the_same_config_id_on_two_tasks_is_two_configs(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config("tck-push", "t-1"))
    await store.save_push_config(AGENT, ALICE, push_config("tck-push", "t-2"))
    assert await store.list_push_configs(AGENT, "t-1", owner=ALICE) == [
        push_config("tck-push", "t-1")
    ]
    assert await store.list_push_configs(AGENT, "t-2", owner=ALICE) == [
        push_config("tck-push", "t-2")
    ]


async def test_push_configs_are_listed_for_every_owner_without_an_owner(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config("c-1"))
    await store.save_push_config(AGENT, BOB, push_config("c-2"))
    assert len(await store.list_push_configs(AGENT, "t-1", owner=None)) == 2
    assert len(await store.list_push_configs(AGENT, "t-1", owner=BOB)) == 1


async def test_deleting_a_push_config_removes_it_once(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    assert await store.delete_push_config(AGENT, "t-1", "c-1", owner=ALICE) is True
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) is None
    assert await store.delete_push_config(AGENT, "t-1", "c-1", owner=ALICE) is False


async def test_another_owner_cannot_delete_a_push_config(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config())
    assert await store.delete_push_config(AGENT, "t-1", "c-1", owner=BOB) is False
    assert await store.get_push_config(AGENT, "t-1", "c-1", owner=ALICE) == push_config()


# --- the push outbox ---------------------------------------------------------------


async def queued_payloads(store: Store, lane: Lane) -> list[tuple[int, str]]:
    """Deliver the lane to the end, returning what each notification carried."""
    carried: list[tuple[int, str]] = []
    while (notification := await store.next_notification(lane)) is not None:
        carried.append((notification.seq, notification.payload))
        await store.record_attempt(
            notification, outcome="delivered", status=200, error=None, duration_ms=1.0
        )
    return carried


async def test_streamed_events_are_queued_for_every_config_of_the_task(store: Store) -> None:
    task = make_task("t-1")
    await record(store, creating(task, push_config=push_config("c-1")))
    await store.save_push_config(AGENT, ALICE, push_config("c-2"))
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    share = following("t-1", status_event(2, working), artifact_event(3, working))
    [outcome] = await record(store, share, push=True)
    assert outcome == ShareOutcome(queued=4)
    lanes = await store.pending_lanes()
    assert lanes == [Lane(AGENT, "t-1", "c-1"), Lane(AGENT, "t-1", "c-2")]
    expected = [(event.seq, event.payload) for event in share.events]
    for lane in lanes:
        assert await queued_payloads(store, lane) == expected
    assert await store.pending_lanes() == []


async def test_a_new_tasks_first_events_are_queued_for_its_config(store: Store) -> None:
    task = make_task("t-1")
    share = creating(task, message_event(2, task), status_event(3, task), push_config=push_config())
    [outcome] = await record(store, share, push=True)
    assert outcome == ShareOutcome(queued=2)
    assert [seq for seq, _ in await queued_payloads(store, Lane(AGENT, "t-1", "c-1"))] == [1, 3]


async def test_a_config_created_over_0_3_gets_the_task_in_the_0_3_shape(store: Store) -> None:
    task = make_task("t-1")
    await record(store, creating(task, push_config=push_config("c-old"), push_protocol="0.3"))
    await store.save_push_config(AGENT, ALICE, push_config("c-new"), protocol=PROTOCOL_VERSION)
    done = moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=1))
    event = status_event(2, done)
    [outcome] = await record(store, following("t-1", event), push=True)
    assert outcome == ShareOutcome(queued=2)
    assert await queued_payloads(store, Lane(AGENT, "t-1", "c-old")) == [
        (2, v0_3_webhook_body(done, done.history or []))
    ]
    assert await queued_payloads(store, Lane(AGENT, "t-1", "c-new")) == [(2, event.payload)]
    assert LEGACY_VERSION == "0.3"


async def test_each_event_of_a_share_is_queued_with_the_task_as_that_event_left_it(
    store: Store,
) -> None:
    task = make_task("t-1")
    await record(store, creating(task, push_config=push_config("c-new")))
    await store.save_push_config(AGENT, ALICE, push_config("c-old"), protocol=LEGACY_VERSION)
    working = moved(task, TaskState.WORKING, T0 + timedelta(seconds=1))
    done = moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=2))
    events = [
        status_event(2, working),
        message_event(3, working),  # history only: no webhook carries it
        artifact_event(4, working),
        status_event(5, done),
    ]
    [outcome] = await record(store, following("t-1", *events), push=True)
    assert outcome == ShareOutcome(queued=6)
    # A 1.0 config gets each event as recorded: a StreamResponse.
    assert await queued_payloads(store, Lane(AGENT, "t-1", "c-new")) == [
        (event.seq, event.payload) for event in events if event.kind != "message"
    ]
    # A 0.3 config gets the task as each event left it, as 0.3 servers post it,
    # with its history as the log holds it then (the agent's note from seq 3 on).
    legacy = await queued_payloads(store, Lane(AGENT, "t-1", "c-old"))
    assert [seq for seq, _ in legacy] == [2, 4, 5]
    opening = task.history or []
    noted = [*opening, note("t-1", 3)]
    assert [json.loads(body) for _, body in legacy] == [
        task_to_v0_3(working.model_copy(update={"history": opening})),
        task_to_v0_3(working.model_copy(update={"history": noted})),
        task_to_v0_3(done.model_copy(update={"history": noted})),
    ]
    assert json.loads(legacy[-1][1])["status"]["state"] == "completed"


async def test_notifications_are_counted_per_share(store: Store) -> None:
    hooked, plain = make_task("t-1"), make_task("t-2")
    await record(store, creating(hooked, push_config=push_config("c-1")), creating(plain))
    await store.save_push_config(AGENT, ALICE, push_config("c-2"), protocol=LEGACY_VERSION)
    outcomes = await record(
        store,
        following("t-1", status_event(2, hooked)),
        following("t-2", status_event(2, plain), artifact_event(3, plain)),
        following("t-ghost", status_event(9, hooked)),  # stale: queues nothing
        push=True,
    )
    assert [outcome.queued for outcome in outcomes] == [2, 0, 0]
    assert isinstance(outcomes[2].error, StaleTask)
    assert {(d.task_id, d.config_id, d.seq) for d in await store.deliveries()} == {
        ("t-1", "c-1", 2),
        ("t-1", "c-2", 2),
    }


async def test_each_event_is_queued_for_1_0_configs_before_0_3_ones(store: Store) -> None:
    task = make_task("t-1")
    await record(store, creating(task))
    await store.save_push_config(AGENT, ALICE, push_config("c-b"), protocol=LEGACY_VERSION)
    await store.save_push_config(AGENT, ALICE, push_config("c-a"))
    share = following("t-1", status_event(2, task), status_event(3, task))
    [outcome] = await record(store, share, push=True)
    assert outcome == ShareOutcome(queued=4)
    order = [(d.seq, d.config_id) for d in await store.deliveries(AGENT, "t-1")]
    assert order == [(2, "c-a"), (2, "c-b"), (3, "c-a"), (3, "c-b")]


async def test_a_config_saved_before_its_task_is_created_is_queued_for_too(
    store: Store,
) -> None:
    await store.save_push_config(AGENT, ALICE, push_config("c-early"))
    task = make_task("t-1")
    share = creating(task, push_config=push_config("c-own"), push_protocol=LEGACY_VERSION)
    [outcome] = await record(store, share, push=True)
    assert outcome == ShareOutcome(queued=2)
    assert [(d.config_id, d.seq) for d in await store.deliveries()] == [
        ("c-early", 1),
        ("c-own", 1),
    ]
    own = await store.next_notification(Lane(AGENT, "t-1", "c-own"))
    assert own is not None and own.payload == v0_3_webhook_body(task, task.history or [])


async def test_message_events_are_not_queued(store: Store) -> None:
    task = make_task("t-1")
    await record(store, creating(task, push_config=push_config()))
    [outcome] = await record(store, following("t-1", message_event(2, task)), push=True)
    assert outcome == ShareOutcome(queued=0)
    assert await store.pending_lanes() == []


async def test_without_push_nothing_is_queued(store: Store) -> None:
    task = make_task("t-1")
    [outcome] = await record(store, creating(task, push_config=push_config()))
    assert outcome == ShareOutcome(queued=0)
    assert await store.deliveries() == []


async def test_a_task_without_configs_queues_nothing(store: Store) -> None:
    await store.save_push_config(AGENT, ALICE, push_config(task_id="t-other"))
    [outcome] = await record(store, creating(make_task("t-1")), push=True)
    assert outcome == ShareOutcome(queued=0)
    assert await store.pending_lanes() == []


async def test_a_failed_share_queues_nothing(store: Store) -> None:
    task = make_task("t-1")
    await record(store, creating(task, push_config=push_config()), push=True)
    [outcome] = await record(store, following("t-1", status_event(5, task)), push=True)
    assert outcome.error is not None and outcome.queued == 0
    assert [d.seq for d in await store.deliveries()] == [1]


async def one_notification(store: Store) -> Notification:
    task = make_task("t-1")
    await record(store, creating(task, push_config=push_config()), push=True)
    notification = await store.next_notification(Lane(AGENT, "t-1", "c-1"))
    assert notification is not None
    return notification


async def test_a_queued_notification_is_pending_with_no_attempts(store: Store) -> None:
    notification = await one_notification(store)
    assert (notification.seq, notification.attempts, notification.next_attempt_at) == (1, 0, 0.0)
    assert re.fullmatch(r"[0-9a-f]{32}", notification.notification_id)
    [delivery] = await store.deliveries()
    assert (delivery.id, delivery.notification_id) == (
        notification.id,
        notification.notification_id,
    )
    assert (delivery.state, delivery.attempts_made, delivery.attempts) == ("pending", 0, [])
    assert ORDER_KEY.fullmatch(delivery.created_at)


async def test_a_retry_keeps_the_notification_first_in_its_lane(store: Store) -> None:
    notification = await one_notification(store)
    await append(store, make_task("t-1"), push=True)  # a second one behind it
    await store.record_attempt(
        notification,
        outcome="retry",
        status=503,
        error="HTTP 503",
        duration_ms=12.5,
        next_attempt_at=1234.5,
    )
    again = await store.next_notification(notification.lane)
    assert again is not None
    assert (again.id, again.notification_id, again.attempts, again.next_attempt_at) == (
        notification.id,
        notification.notification_id,
        1,
        1234.5,
    )
    [delivery, behind] = await store.deliveries()
    assert (behind.seq, behind.state, behind.attempts_made) == (2, "pending", 0)
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
        12.5,
    )
    assert ORDER_KEY.fullmatch(attempt.at)


async def test_a_delivered_notification_leaves_its_lane(store: Store) -> None:
    notification = await one_notification(store)
    await store.record_attempt(
        notification, outcome="delivered", status=204, error=None, duration_ms=3.0
    )
    assert await store.next_notification(notification.lane) is None
    assert await store.pending_lanes() == []
    [delivery] = await store.deliveries()
    assert (delivery.state, [a.number for a in delivery.attempts]) == ("delivered", [1])


async def test_a_failed_notification_can_be_requeued_once(store: Store) -> None:
    notification = await one_notification(store)
    assert await store.requeue_notification(notification.id) is False  # still pending
    await store.record_attempt(
        notification,
        outcome="failed",
        status=None,
        error="connection refused",
        duration_ms=1.0,
        next_attempt_at=99.0,
    )
    assert await store.next_notification(notification.lane) is None
    assert await store.pending_lanes() == []
    [dead] = await store.deliveries()
    assert (dead.state, dead.attempts_made, dead.last_error) == ("failed", 1, "connection refused")
    assert await store.requeue_notification(notification.id) is True
    assert await store.requeue_notification(notification.id) is False  # pending again
    assert await store.pending_lanes() == [notification.lane]
    again = await store.next_notification(notification.lane)
    assert again is not None
    assert (again.id, again.attempts, again.next_attempt_at) == (notification.id, 1, 0.0)
    await store.record_attempt(again, outcome="delivered", status=200, error=None, duration_ms=1.0)
    [delivered] = await store.deliveries()
    assert (delivered.state, delivered.attempts_made) == ("delivered", 2)
    assert [attempt.number for attempt in delivered.attempts] == [1, 2]


async def test_requeueing_an_unknown_notification_is_false(store: Store) -> None:
    assert await store.requeue_notification(424242) is False


async def test_an_abandoned_notification_fails_with_the_reason(store: Store) -> None:
    notification = await one_notification(store)
    await store.abandon_notification(notification, "its config was deleted")
    assert await store.next_notification(notification.lane) is None
    [delivery] = await store.deliveries()
    assert (delivery.state, delivery.last_error, delivery.attempts) == (
        "failed",
        "its config was deleted",
        [],
    )


async def test_a_lane_is_delivered_in_order(store: Store) -> None:
    task = make_task("t-1")
    events = [status_event(seq, task) for seq in range(2, 6)]
    await record(store, creating(task, *events, push_config=push_config()), push=True)
    lane = Lane(AGENT, "t-1", "c-1")
    assert [seq for seq, _ in await queued_payloads(store, lane)] == [1, 2, 3, 4, 5]


async def test_pending_lanes_and_deliveries_can_be_limited(store: Store) -> None:
    for agent, task_id in [(AGENT, "t-1"), (AGENT, "t-2"), ("other", "t-1")]:
        config = push_config(task_id=task_id)
        share = creating(make_task(task_id), agent=agent, push_config=config)
        await record(store, share, push=True)
    assert len(await store.pending_lanes()) == 3
    assert await store.pending_lanes(AGENT) == [
        Lane(AGENT, "t-1", "c-1"),
        Lane(AGENT, "t-2", "c-1"),
    ]
    assert await store.pending_lanes(AGENT, "t-2") == [Lane(AGENT, "t-2", "c-1")]
    assert [(d.agent, d.task_id) for d in await store.deliveries(AGENT, "t-1")] == [(AGENT, "t-1")]
    assert len(await store.deliveries("other")) == 1
    assert [d.task_id for d in await store.deliveries(task_id="t-2")] == ["t-2"]
    assert [d.id for d in await store.deliveries()] == sorted(
        d.id for d in await store.deliveries()
    )


# --- prune ---------------------------------------------------------------------------

NOTHING_PRUNED = {
    "tasks": 0,
    "events": 0,
    "push_configs": 0,
    "notifications": 0,
    "attempts": 0,
    "receipts": 0,
}


async def finished_task_with_everything(store: Store, task_id: str, *, at: datetime) -> None:
    """A completed task: 3 events, 2 configs, 4 notifications with 1 attempt, 1 receipt."""
    task = make_task(task_id, at=at)
    done = moved(task, TaskState.COMPLETED, at)
    receipt = ReceiptWrite(ALICE, f"{task_id}-m", "d", task_id)
    share = creating(
        task,
        message_event(2, task),
        status_event(3, done),
        push_config=push_config("c-1", task_id),
        receipts=[receipt],
    )
    await record(store, share)
    await store.save_push_config(AGENT, ALICE, push_config("c-2", task_id))
    await record(
        store, following(task_id, artifact_event(4, done), status_event(5, done)), push=True
    )
    notification = await store.next_notification(Lane(AGENT, task_id, "c-1"))
    assert notification is not None
    await store.record_attempt(
        notification, outcome="delivered", status=200, error=None, duration_ms=1.0
    )


async def test_prune_deletes_finished_tasks_with_everything_of_theirs(store: Store) -> None:
    await finished_task_with_everything(store, "t-old", at=T0)
    now = datetime.now(UTC) + timedelta(seconds=1)
    counts = await store.prune(now)
    assert counts == {
        "tasks": 1,
        "events": 5,
        "push_configs": 2,
        "notifications": 4,
        "attempts": 1,
        "receipts": 1,
    }
    assert await store.get_task(AGENT, "t-old", owner=None) is None
    assert await store.events_after(AGENT, "t-old", 0) == []
    assert await store.list_push_configs(AGENT, "t-old", owner=None) == []
    assert await store.deliveries() == []
    assert await store.remembered_messages(AGENT, T0) == []
    assert await store.prune(now) == NOTHING_PRUNED


async def test_a_dry_run_counts_what_prune_would_delete_and_keeps_it(store: Store) -> None:
    await finished_task_with_everything(store, "t-old", at=T0)
    now = datetime.now(UTC) + timedelta(seconds=1)
    counts = await store.prune(now, dry_run=True)
    assert counts == await store.prune(now, dry_run=True)
    assert await store.get_task(AGENT, "t-old", owner=None) is not None
    assert len(await store.deliveries()) == 4
    assert await store.prune(now) == counts


async def test_prune_keeps_unfinished_tasks_and_recent_ones(store: Store) -> None:
    await create(store, make_task("t-working", at=T0))
    await finished_task_with_everything(store, "t-recent", at=T0 + timedelta(days=10))
    counts = await store.prune(T0 + timedelta(days=1))
    assert counts == NOTHING_PRUNED
    assert await store.get_task(AGENT, "t-working", owner=None) is not None
    assert await store.get_task(AGENT, "t-recent", owner=None) is not None


async def test_prune_takes_receipts_by_their_own_age(store: Store) -> None:
    await record(store, Share(AGENT, "t-1", receipts=[ReceiptWrite(ALICE, "m-1", "d", "t-1")]))
    assert await store.prune(datetime.now(UTC) - timedelta(minutes=1)) == NOTHING_PRUNED
    counts = await store.prune(datetime.now(UTC) + timedelta(seconds=1))
    assert counts == NOTHING_PRUNED | {"receipts": 1}


# --- the operator console's reads ------------------------------------------------------


async def test_browse_lists_every_owners_tasks_newest_first_in_pages(store: Store) -> None:
    for minute, (task_id, owner) in enumerate([("t-a", ALICE), ("t-b", BOB), ("t-c", ALICE)]):
        await create(store, make_task(task_id, at=T0 + timedelta(minutes=minute)), owner=owner)
    await create(store, make_task("t-other", at=T0 + timedelta(minutes=9)), agent="other")
    first = await store.browse_tasks(AGENT, page_size=2)
    assert [(t.id, t.owner) for t in first.tasks] == [("t-c", ALICE), ("t-b", BOB)]
    assert first.next_page_token
    second = await store.browse_tasks(AGENT, page_size=2, page_token=first.next_page_token)
    assert [t.id for t in second.tasks] == ["t-a"]
    assert second.next_page_token == ""
    everyone = await store.browse_tasks(page_size=10)
    assert [t.id for t in everyone.tasks] == ["t-other", "t-c", "t-b", "t-a"]
    summary = first.tasks[0]
    assert (summary.agent, summary.context_id, summary.state) == (
        AGENT,
        "ctx-1",
        "TASK_STATE_WORKING",
    )
    assert ORDER_KEY.fullmatch(summary.updated_at) and ORDER_KEY.fullmatch(summary.created_at)


async def test_browse_filters_by_state(store: Store) -> None:
    await create(store, make_task("t-work", at=T0))
    done = make_task("t-done", at=T0)
    await create(store, done)
    await append(store, moved(done, TaskState.COMPLETED, T0 + timedelta(minutes=1)))
    page = await store.browse_tasks(AGENT, state=TaskState.COMPLETED)
    assert [t.id for t in page.tasks] == ["t-done"]


async def test_browse_refuses_a_token_it_did_not_issue(store: Store) -> None:
    with pytest.raises(InvalidParamsError):
        await store.browse_tasks(AGENT, page_token="bm90IGEgdG9rZW4")


async def test_the_timeline_holds_every_event_with_its_time(store: Store) -> None:
    task = make_task("t-1")
    await create(store, task)
    await append(store, task, "message")
    await append(store, moved(task, TaskState.COMPLETED, T0 + timedelta(seconds=1)))
    entries = await store.timeline(AGENT, "t-1")
    assert [(e.seq, e.kind) for e in entries] == [(1, "task"), (2, "message"), (3, "status")]
    assert json.loads(entries[1].payload)["parts"] == [{"text": "note"}]
    assert all(ORDER_KEY.fullmatch(e.at) for e in entries)
    assert [e.seq for e in await store.timeline(AGENT, "t-1", after=1, limit=1)] == [2]
    assert await store.timeline(AGENT, "t-none") == []


async def test_task_counts_are_by_agent_and_state(store: Store) -> None:
    await create(store, make_task("t-1"))
    await create(store, make_task("t-2"))
    await create(store, make_task("t-3", state=TaskState.SUBMITTED), agent="other")
    assert await store.task_counts() == {
        (AGENT, TaskState.WORKING): 2,
        ("other", TaskState.SUBMITTED): 1,
    }


async def test_the_outbox_summary_counts_pending_and_failed(store: Store) -> None:
    empty = await store.outbox_summary()
    assert (empty.pending, empty.failed, empty.oldest_pending) == (0, 0, None)
    notification = await one_notification(store)
    await append(store, make_task("t-1"), push=True)
    summary = await store.outbox_summary()
    assert (summary.pending, summary.failed) == (2, 0)
    assert summary.oldest_pending is not None and summary.oldest_pending.tzinfo is not None
    await store.record_attempt(
        notification, outcome="failed", status=500, error="HTTP 500", duration_ms=1.0
    )
    assert (await store.outbox_summary()).failed == 1


async def test_delivery_pages_are_newest_first_with_attempts(store: Store) -> None:
    notification = await one_notification(store)
    await append(store, make_task("t-1"), push=True)
    await store.record_attempt(
        notification, outcome="failed", status=500, error="HTTP 500", duration_ms=1.0
    )
    newest, oldest = await store.delivery_page(AGENT, "t-1")
    assert (newest.seq, oldest.seq) == (2, 1)
    assert [a.status for a in oldest.attempts] == [500]
    assert [d.seq for d in await store.delivery_page(before=newest.id)] == [1]
    assert [d.seq for d in await store.delivery_page(state="failed")] == [1]
    assert [d.seq for d in await store.delivery_page(limit=1)] == [2]
    assert await store.delivery_page("other") == []

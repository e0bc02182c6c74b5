"""What processes serving one PostgreSQL database agree on, store by store.

Each store below plays one process (a member); a member is made dead by
setting its heartbeat in the past, as a crash leaves it once its lease ran
out. The processes themselves are in tests/test_cluster.py and
tests/test_queue_workers.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from a2a_trio.protocol import TaskState
from a2a_trio.store import LeaseHeld, ShareOutcome, StaleTask
from a2a_trio.store.coordination import (
    CANCELS,
    DONE,
    LEASES,
    QUEUE,
    Beat,
    QueuedFinish,
    QueuedOutcome,
    done_outcome,
)
from a2a_trio.store.postgres import PostgresStore
from a2a_trio.store.postgres.cluster import PostgresCoordination, beat
from a2a_trio.store.url import PostgresLocation

from .postgres import admin_connect, execute, fresh_database, postgres_url, rows
from .store_contract import make_task
from .writes import AGENT, create, following, message_event, record


@pytest.fixture
async def database(postgres: PostgresLocation) -> AsyncIterator[PostgresLocation]:
    with fresh_database(postgres) as location:
        yield location


@pytest.fixture
async def stores(database: PostgresLocation) -> AsyncIterator[list[PostgresStore]]:
    opened = [PostgresStore(database) for _ in range(2)]
    for store in opened:
        await store.open(exclusive=True)
        assert store.coordination is not None
        await store.coordination.join()
    yield opened
    for store in opened:
        await store.aclose()


def members(stores: list[PostgresStore]) -> list[PostgresCoordination]:
    found = [store.coordination for store in stores]
    assert all(found)
    return found  # type: ignore[return-value]


def die(database: PostgresLocation, member: PostgresCoordination) -> None:
    execute(
        postgres_url(database),
        "UPDATE a2a_members SET heartbeat_at = '-infinity' WHERE id = %s",
        member.member,
    )


# --- task leases ------------------------------------------------------------------------------


async def test_a_task_lease_is_one_members_at_a_time(stores: list[PostgresStore]) -> None:
    a, b = members(stores)
    assert (await a.acquire(AGENT, "t", "a-1")).acquired
    refused = await b.acquire(AGENT, "t", "b-1")
    assert (refused.acquired, refused.holder) == (False, a.member)
    await a.release(["a-1"])
    assert (await b.acquire(AGENT, "t", "b-1")).acquired


async def test_a_waiting_member_has_the_next_turn(stores: list[PostgresStore]) -> None:
    a, b = members(stores)
    assert (await a.acquire(AGENT, "t", "a-1")).acquired
    assert not (await b.acquire(AGENT, "t", "b-1")).acquired  # b asks for the next turn
    # a's next message waits: b's turn comes first ...
    assert not (await a.acquire(AGENT, "t", "a-2")).acquired
    # ... but a cancel neither waits for a turn nor takes one.
    assert (await a.acquire(AGENT, "t", "a-cancel", queue=False)).acquired
    await a.release(["a-cancel"])
    assert (await b.acquire(AGENT, "t", "b-1")).acquired


async def test_a_superseded_token_releases_nothing(stores: list[PostgresStore]) -> None:
    a, b = members(stores)
    assert (await a.acquire(AGENT, "t", "a-1")).acquired
    assert (await a.acquire(AGENT, "t", "a-2")).acquired  # its next execution
    await a.release(["a-1"])  # the first's release, late
    assert not (await b.acquire(AGENT, "t", "b-1")).acquired


async def test_a_dead_members_lease_is_taken_over(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    assert (await a.acquire(AGENT, "t", "a-1")).acquired
    die(database, a)
    claim = await b.acquire(AGENT, "t", "b-1")
    assert (claim.acquired, claim.took_over) == (True, True)


async def test_a_member_found_dead_gives_up_its_leases_at_its_next_heartbeat(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    assert (await a.acquire(AGENT, "t", "a-1")).acquired
    assert (await a.heartbeat([])).alive
    die(database, a)
    assert not (await a.heartbeat([])).alive
    assert (await a.heartbeat([])).alive  # a member again, holding nothing
    assert (await b.acquire(AGENT, "t", "b-1")).acquired


# --- leases taken and let go with a round's share ----------------------------------------------


def lease_rows(database: PostgresLocation) -> list[tuple[Any, ...]]:
    return rows(postgres_url(database), "SELECT task_id, holder, token FROM task_leases")


async def test_a_share_takes_its_tasks_lease_with_its_events(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    task = make_task("t", state=TaskState.INPUT_REQUIRED)
    await create(stores[0], task)
    share = following("t", message_event(2, task))
    share.lease = (a.member, "a-1")
    assert await record(stores[0], share) == [ShareOutcome()]
    assert lease_rows(database) == [("t", a.member, "a-1")]
    assert not (await b.acquire(AGENT, "t", "b-1")).acquired


async def test_a_share_that_finds_the_lease_held_stores_nothing(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    task = make_task("t", state=TaskState.INPUT_REQUIRED)
    await create(stores[0], task)
    assert (await b.acquire(AGENT, "t", "b-1")).acquired
    share = following("t", message_event(2, task))
    share.lease = (a.member, "a-1")
    [outcome] = await record(stores[0], share)
    assert isinstance(outcome.error, LeaseHeld)
    stored = await stores[0].get_task(AGENT, "t", owner=None)
    assert stored is not None and stored.last_seq == 1
    assert lease_rows(database) == [("t", b.member, "b-1")]


async def test_a_share_that_does_not_follow_its_task_takes_no_lease(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, _ = members(stores)
    task = make_task("t", state=TaskState.INPUT_REQUIRED)
    await create(stores[0], task)
    await record(stores[0], following("t", message_event(2, task)))
    share = following("t", message_event(2, task))  # the task is at 2 already
    share.lease = (a.member, "a-1")
    [outcome] = await record(stores[0], share)
    assert isinstance(outcome.error, StaleTask)
    assert lease_rows(database) == []


async def test_a_share_lets_its_executions_lease_go_with_its_events(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    task = make_task("t", state=TaskState.WORKING)
    await create(stores[0], task)
    assert (await a.acquire(AGENT, "t", "a-1")).acquired
    share = following("t", message_event(2, task))
    share.release = "a-1"
    with admin_connect(database) as listening:
        listening.execute("LISTEN a2a_leases")
        listening.commit()
        assert await record(stores[0], share) == [ShareOutcome()]
        woken = [n.payload for n in listening.notifies(timeout=5, stop_after=1)]
    assert [json.loads(payload) for payload in woken] == [[AGENT, "t"]]
    assert lease_rows(database) == []
    assert (await b.acquire(AGENT, "t", "b-1")).acquired


# --- orphans ----------------------------------------------------------------------------------


async def test_orphans_are_unfinished_tasks_without_a_live_holder(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    for task_id in ("held", "left", "done", "paused-by-dead"):
        state = TaskState.COMPLETED if task_id == "done" else TaskState.WORKING
        if task_id == "paused-by-dead":
            state = TaskState.INPUT_REQUIRED
        await create(stores[0], make_task(task_id, state=state))
    assert (await a.acquire(AGENT, "held", "a-1")).acquired
    assert (await b.acquire(AGENT, "paused-by-dead", "b-1")).acquired
    die(database, b)
    found = {orphan.task_id for orphan in await a.orphans([AGENT], unleased=True)}
    # "left" has no lease; "paused-by-dead" is paused, but its lease is a dead one's.
    assert found == {"left", "paused-by-dead"}
    assert await a.orphans(["another-agent"], unleased=True) == []
    # Without ``unleased`` (a heartbeat found a member dead): its leases only.
    assert [orphan.task_id for orphan in await a.orphans([AGENT])] == ["paused-by-dead"]


async def test_a_heartbeat_says_whether_a_member_died_and_whether_work_waits(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    assert await a.heartbeat([AGENT]) == Beat(alive=True)
    await b.enqueue(AGENT, [("t-1", "{}")])
    assert (await a.heartbeat([AGENT])).work_waiting
    assert not (await a.heartbeat(["another-agent"])).work_waiting
    die(database, b)
    assert (await a.heartbeat([])).someone_dead


async def test_a_heartbeat_reads_a_few_member_rows_however_many_members_there_are(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    # Each of N processes reading every member made N² rows read per round of
    # beats. (Under a few hundred members the planner reads the table's few
    # pages whole, by id too: there the rows are cheaper than an index.)
    a, _ = members(stores)
    url = postgres_url(database)
    execute(
        url,
        "INSERT INTO a2a_members (id, host, pid, lease_seconds, started_at, heartbeat_at)"
        " SELECT 'm-' || n, 'elsewhere', n, 600, now(), now() FROM generate_series(1, 1000) AS n",
    )
    execute(url, "ANALYZE a2a_members")

    def beat_counted() -> tuple[Beat, int]:
        with admin_connect(database) as conn, conn.transaction():
            found = beat(conn, a.member, a.lease_seconds, [], None)
            # This transaction's reads so far, index fetches and scanned rows alike.
            counted = conn.execute(
                "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
                " WHERE relname = 'a2a_members'"
            ).fetchone()
        assert counted is not None
        return found, int(str(counted[0]))

    found, read = beat_counted()
    assert found == Beat(alive=True)
    assert read <= 3, f"one heartbeat read {read} of the 1,002 members' rows"
    execute(url, "UPDATE a2a_members SET heartbeat_at = '-infinity' WHERE id = 'm-500'")
    found, read = beat_counted()
    assert found.someone_dead and read <= 3


# --- webhook lanes ----------------------------------------------------------------------------


async def test_a_lane_is_delivered_by_one_member_until_it_dies(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    assert await a.claim_lane(AGENT, "t", "c")
    assert await a.claim_lane(AGENT, "t", "c")  # still its own
    assert not await b.claim_lane(AGENT, "t", "c")
    die(database, a)
    assert await b.claim_lane(AGENT, "t", "c")
    await b.release_lane(AGENT, "t", "c")
    assert await a.claim_lane(AGENT, "t", "c")


# --- queued executions ----------------------------------------------------------------------


async def test_a_queued_execution_is_claimed_once_and_done_with_its_answer(
    stores: list[PostgresStore],
) -> None:
    a, b = members(stores)
    first, second = await a.enqueue(
        AGENT, [("t-1", json.dumps({"n": 1})), ("t-2", json.dumps({"n": 2}))]
    )
    claimed = await b.claim_queued([AGENT], 1)
    assert [(c.id, c.task_id) for c in claimed] == [(first, "t-1")]
    assert [c.id for c in await a.claim_queued([AGENT], 5)] == [second]
    assert await b.claim_queued([AGENT], 5) == []
    await b.mark_running([first])
    assert not (await a.queued_outcome(first)).done
    await b.finish_queued([QueuedFinish(claimed[0], answer='{"messageId": "m"}')])
    outcome = await a.queued_outcome(first)
    assert (outcome.done, outcome.answer, outcome.error) == (True, '{"messageId": "m"}', None)


async def test_queued_executions_end_together_with_their_outcomes_in_the_wake_ups(
    stores: list[PostgresStore],
) -> None:
    a, b = members(stores)
    rows_ = [(await a.enqueue(AGENT, [(f"t-{n}", "{}")]))[0] for n in (1, 2, 3)]
    one, two, three = await b.claim_queued([AGENT], 3)
    await b.mark_running(rows_)
    assert (await b.acquire(AGENT, "t-1", "lease-1")).acquired
    assert not (await a.acquire(AGENT, "t-1", "a-0")).acquired  # a waits for it
    long_answer = json.dumps({"text": "x" * 8000})
    error = {"code": -32603, "message": "no"}
    async with a.wake_ups() as wake_ups:
        await b.finish_queued(
            [
                QueuedFinish(one, answer='{"messageId": "m"}', seq=4),
                QueuedFinish(two, error=error, seq=0),
                QueuedFinish(three, answer=long_answer, seq=2),
            ],
            release=["lease-1"],
        )
        signals = [await wake_ups.receive() for _ in range(4)]
    done = [s.fields for s in signals if s.channel == DONE]
    assert [done_outcome(fields) for fields in done] == [
        QueuedOutcome(True, '{"messageId": "m"}', None, 4),
        QueuedOutcome(True, None, error, 0),
        None,  # too long to tell: the waiter reads the row
    ]
    assert done[2] == (AGENT, "t-3", three.id)
    assert [s.fields for s in signals if s.channel == LEASES] == [(AGENT, "t-1")]
    assert (await a.queued_outcome(three.id)).answer == long_answer
    assert (await a.acquire(AGENT, "t-1", "a-1")).acquired  # let go with the ends


async def test_executions_queued_together_share_a_transaction_and_one_wake_up(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    async with b.wake_ups() as wake_ups:
        queued = await a.enqueue(AGENT, [("t-1", '{"n": 1}'), ("t-2", '{"n": 2}'), ("t-3", "{}")])
        await a.request_cancel(AGENT, "after", b.member, "owner")  # the next wake-up
        signals = [await wake_ups.receive() for _ in range(2)]
    assert [(s.channel, s.fields) for s in signals] == [
        (QUEUE, (AGENT,)),
        (CANCELS, (AGENT, "after", b.member, "owner")),
    ]
    found = rows(
        postgres_url(database),
        "SELECT id, task_id, request::text, created_at FROM queued_executions ORDER BY id",
    )
    assert [(row[0], row[1], row[2]) for row in found] == [
        (queued[0], "t-1", '{"n": 1}'),
        (queued[1], "t-2", '{"n": 2}'),
        (queued[2], "t-3", "{}"),
    ]
    assert len({row[3] for row in found}) == 1  # one transaction's now()


async def test_a_lease_nobody_waits_for_is_let_go_without_a_wake_up(
    stores: list[PostgresStore],
) -> None:
    a, b = members(stores)
    assert (await a.acquire(AGENT, "t-1", "a-1")).acquired
    assert (await a.acquire(AGENT, "t-2", "a-2")).acquired
    assert not (await b.acquire(AGENT, "t-2", "b-2")).acquired  # b waits for t-2's only
    async with b.wake_ups() as wake_ups:
        await a.release(["a-1"])
        await a.release(["a-2"])
        signal = await wake_ups.receive()
    assert (signal.channel, signal.fields) == (LEASES, (AGENT, "t-2"))
    assert (await b.acquire(AGENT, "t-1", "b-1")).acquired


async def test_a_dead_workers_unstarted_execution_is_queued_again_and_a_started_one_ends(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    a, b = members(stores)
    unstarted, started = await a.enqueue(AGENT, [("t-1", "{}"), ("t-2", "{}")])
    await b.claim_queued([AGENT], 2)
    await b.mark_running([started])
    die(database, b)
    await a.orphans([AGENT])
    assert [c.id for c in await a.claim_queued([AGENT], 5)] == [unstarted]
    outcome = await a.queued_outcome(started)
    assert outcome.done and outcome.error is not None
    assert outcome.error["message"] == "The worker running this message stopped before it ended."
    state = rows(postgres_url(database), "SELECT state FROM queued_executions ORDER BY id")
    assert state == [("claimed",), ("done",)]


async def test_a_heard_execution_is_forgotten_and_the_dead_leave_none_for_good(
    database: PostgresLocation, stores: list[PostgresStore]
) -> None:
    # A web process deletes the rows whose outcome it heard, with the leases it
    # lets go; only done ones. The done rows nobody heard (their web process
    # died) go once done for ten leases: the queue keeps no row for good.
    a, b = members(stores)
    heard, unheard, waiting = await a.enqueue(AGENT, [("t-1", "{}"), ("t-2", "{}"), ("t-3", "{}")])
    one, two = await b.claim_queued([AGENT], 2)
    await b.mark_running([heard, unheard])
    await b.finish_queued([QueuedFinish(one, answer="{}", seq=1), QueuedFinish(two, seq=1)])
    await a.release([], heard=[heard, waiting])  # the waiting one is not done: it stays
    url = postgres_url(database)
    assert rows(url, "SELECT id, state FROM queued_executions ORDER BY id") == [
        (unheard, "done"),
        (waiting, "queued"),
    ]
    await a.orphans([AGENT])  # done for less than ten leases: kept
    assert len(rows(url, "SELECT id FROM queued_executions")) == 2
    execute(
        url,
        "UPDATE queued_executions SET updated_at = now() - 11 * ? * interval '1 second'",
        a.lease_seconds,
    )
    await a.orphans([AGENT])
    assert rows(url, "SELECT id, state FROM queued_executions") == [(waiting, "queued")]

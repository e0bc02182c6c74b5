"""The trio driver for psycopg against a real PostgreSQL: pool, faults, LISTEN/NOTIFY."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import psycopg
import pytest
import trio
from psycopg.types.json import Jsonb

from a2a_trio.store.postgres import (
    Connection,
    ConnectionLost,
    Database,
    DatabaseUnavailable,
    Listener,
    PoolSettings,
    StatementTimeout,
)
from a2a_trio.store.url import PostgresLocation

from .postgres import admin_connect

LONG_QUERY = "SELECT pg_sleep(10)"


async def backend_pid(db: Database) -> int:
    row = await db.fetchone("SELECT pg_backend_pid()")
    assert row is not None
    pid: int = row[0]
    return pid


def runs_a_query(location: PostgresLocation, pid: int, query: str) -> bool:
    """Whether backend ``pid`` is running ``query`` now."""
    with admin_connect(location) as admin:
        row = admin.execute(
            "SELECT state = 'active' AND query = %s FROM pg_stat_activity WHERE pid = %s",
            (query, pid),
        ).fetchone()
    return bool(row and row[0])


def terminate(location: PostgresLocation, pid: int) -> None:
    """What a server restart or a dropped network does to one connection."""
    with admin_connect(location) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


async def test_run_commits_what_the_work_wrote(postgres: PostgresLocation) -> None:
    async with Database.open(postgres) as db:
        await db.execute("CREATE TABLE committed (n int)")

        def write(conn: Connection) -> None:
            conn.execute("INSERT INTO committed VALUES (1), (2)")

        await db.run(write)
        assert await db.fetchall("SELECT n FROM committed ORDER BY n") == [(1,), (2,)]


async def test_one_statement_is_its_own_transaction_and_a_run_is_one(
    postgres: PostgresLocation,
) -> None:
    # now() is when the transaction began: a statement sent alone began it
    # (one round trip, no BEGIN before it); a run's statements share one.
    async with Database.open(postgres) as db:
        alone = await db.fetchone("SELECT now() = statement_timestamp()")

        def two(conn: Connection) -> Any:
            conn.execute("SELECT pg_sleep(0.01)")
            return conn.execute("SELECT now() = statement_timestamp()").fetchone()

        together = await db.run(two)
        with pytest.raises(psycopg.errors.DivisionByZero):
            await db.execute("SELECT 1 / 0")
        after = await db.fetchone("SELECT now() = statement_timestamp()")
    assert (alone, together, after) == ((True,), (False,), (True,))


async def test_run_rolls_back_when_the_work_raises(postgres: PostgresLocation) -> None:
    async with Database.open(postgres) as db:
        await db.execute("CREATE TABLE rolled_back (n int)")

        def write_then_fail(conn: Connection) -> None:
            conn.execute("INSERT INTO rolled_back VALUES (1)")
            raise LookupError("the work changed its mind")

        with pytest.raises(LookupError):
            await db.run(write_then_fail)
        assert await db.fetchall("SELECT n FROM rolled_back") == []


async def test_jsonb_and_timestamptz_come_back_as_python_values(
    postgres: PostgresLocation,
) -> None:
    async with Database.open(postgres) as db:
        await db.execute(
            "CREATE TABLE events (seq bigint GENERATED ALWAYS AS IDENTITY, payload jsonb,"
            " at timestamptz NOT NULL DEFAULT now())"
        )
        await db.execute("INSERT INTO events (payload) VALUES (%s)", (Jsonb({"state": "done"}),))
        row = await db.fetchone("SELECT seq, payload, at FROM events")
        assert row is not None
        seq, payload, at = row
        assert (seq, payload) == (1, {"state": "done"})
        assert isinstance(at, datetime) and at.tzinfo is not None


async def test_pool_never_holds_more_connections_than_its_size(
    postgres: PostgresLocation,
) -> None:
    seen: list[int] = []
    async with Database.open(postgres, PoolSettings(size=2)) as db:

        async def count_connections() -> None:
            row = await db.fetchone(
                "SELECT count(*) FROM pg_stat_activity, pg_sleep(0.05)"
                " WHERE datname = current_database() AND application_name = 'a2a-trio'"
            )
            assert row is not None
            seen.append(row[0])

        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(count_connections)
    assert len(seen) == 6
    assert max(seen) <= 2


async def test_cancelling_a_query_stops_it_and_the_pool_stays_usable(
    postgres: PostgresLocation,
) -> None:
    async with Database.open(postgres, PoolSettings(size=1)) as db:
        pid = await backend_pid(db)
        with trio.move_on_after(0.2) as scope:
            await db.execute("SELECT pg_sleep(30)")
        assert scope.cancelled_caught
        # The server gave the query up, and the one connection came back idle.
        assert await backend_pid(db) == pid
        with admin_connect(postgres) as admin:
            running = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(30)%%'"
                " AND state = 'active'"
            ).fetchone()
        assert running == (0,)


async def test_cancellation_arrives_promptly(postgres: PostgresLocation) -> None:
    async with Database.open(postgres) as db:
        start = trio.current_time()
        with trio.move_on_after(0.1):
            await db.execute("SELECT pg_sleep(30)")
        assert trio.current_time() - start < 2.0


async def test_cancelling_every_caller_of_a_full_pool_at_once_ends_promptly(
    postgres: PostgresLocation,
) -> None:
    async with Database.open(postgres, PoolSettings(size=2)) as db:
        start = trio.current_time()
        with trio.move_on_after(0.2):
            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(db.execute, "SELECT pg_sleep(30)")
        assert trio.current_time() - start < 3.0
        assert await db.fetchone("SELECT 1") == (1,)


async def test_a_call_cancelled_before_its_thread_began_waits_for_nothing(
    postgres: PostgresLocation,
) -> None:
    # Cancelled within milliseconds, some calls are cancelled while opening a
    # connection or waiting for their thread: nothing ran, so there is no query
    # to interrupt and no worker to wait cancel_grace for.
    async with Database.open(postgres, PoolSettings(size=4, cancel_grace=30.0)) as db:
        with trio.fail_after(10):
            for _ in range(20):
                async with trio.open_nursery() as nursery:
                    for _ in range(4):
                        nursery.start_soon(_cancelled_soon, db)
        assert await db.fetchone("SELECT 1") == (1,)


async def _cancelled_soon(db: Database) -> None:
    with trio.move_on_after(0.002):
        await db.fetchone("SELECT 1")


async def test_connection_the_server_closed_while_idle_is_replaced(
    postgres: PostgresLocation,
) -> None:
    async with Database.open(postgres, PoolSettings(size=1)) as db:
        pid = await backend_pid(db)
        await trio.to_thread.run_sync(terminate, postgres, pid)
        # No error reaches the caller: the dead connection is noticed at checkout.
        assert await backend_pid(db) != pid


async def test_connection_lost_mid_query_is_reported_and_the_next_call_reconnects(
    postgres: PostgresLocation,
) -> None:
    async with Database.open(postgres, PoolSettings(size=1)) as db:
        pid = await backend_pid(db)
        failures: list[BaseException] = []

        async def long_query() -> None:
            try:
                await db.execute(LONG_QUERY)
            except ConnectionLost as error:
                failures.append(error)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_query)
            with trio.fail_after(10):  # the query is under way when its connection goes
                while not await trio.to_thread.run_sync(  # noqa: ASYNC110  (polled)
                    runs_a_query, postgres, pid, LONG_QUERY
                ):
                    await trio.sleep(0.02)
            await trio.to_thread.run_sync(terminate, postgres, pid)
        assert len(failures) == 1
        assert postgres.host in str(failures[0])
        assert await backend_pid(db) != pid


async def test_statement_timeout_is_a_clear_error_and_not_a_hang(
    postgres: PostgresLocation,
) -> None:
    async with Database.open(postgres, PoolSettings(statement_timeout=0.2)) as db:
        with trio.fail_after(5), pytest.raises(StatementTimeout) as raised:
            await db.execute("SELECT pg_sleep(10)")
        assert "statement_timeout = 0.2s" in str(raised.value)
        assert await db.fetchone("SELECT 1") == (1,)


async def test_unreachable_database_names_the_host_but_not_the_password() -> None:
    nowhere = PostgresLocation(host="127.0.0.1", port=1, dbname="a2a", password="s3cret")
    with pytest.raises(DatabaseUnavailable) as raised:
        async with Database.open(nowhere, PoolSettings(connect_timeout=2)):
            pass  # pragma: no cover
    message = str(raised.value)
    assert "127.0.0.1:1/a2a" in message
    assert "s3cret" not in message
    assert raised.value.__cause__ is None


async def test_missing_database_is_refused_at_open(postgres: PostgresLocation) -> None:
    missing = dataclasses.replace(postgres, dbname="a2a_trio_no_such_database")
    with pytest.raises(DatabaseUnavailable, match="a2a_trio_no_such_database"):
        async with Database.open(missing):
            pass  # pragma: no cover


async def test_notify_reaches_a_listener_within_milliseconds(postgres: PostgresLocation) -> None:
    async with Listener.open(postgres, ["task_events"]) as listener, Database.open(postgres) as db:
        sent = trio.current_time()
        await db.execute("SELECT pg_notify('task_events', 'task-1:7')")
        with trio.fail_after(1):
            notification = await listener.receive()
        assert trio.current_time() - sent < 0.1
        assert (notification.channel, notification.payload) == ("task_events", "task-1:7")


async def test_notifications_arrive_in_order_and_only_from_listened_channels(
    postgres: PostgresLocation,
) -> None:
    async with Listener.open(postgres, ["a"]) as listener, Database.open(postgres) as db:

        def notify(conn: Connection) -> None:
            # Delivered at commit, together, in the order they were sent.
            for channel, payload in [("a", "1"), ("b", "x"), ("a", "2")]:
                conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))

        await db.run(notify)
        received: list[Any] = []
        with trio.fail_after(1):
            for _ in range(2):
                received.append((await listener.receive()).payload)
        assert received == ["1", "2"]


async def test_waiting_listener_can_be_cancelled(postgres: PostgresLocation) -> None:
    async with Listener.open(postgres, ["quiet"]) as listener:
        with trio.move_on_after(0.05) as scope:
            await listener.receive()
        assert scope.cancelled_caught


async def test_listener_reports_a_lost_connection(postgres: PostgresLocation) -> None:
    async with Listener.open(postgres, ["lost"]) as listener, Database.open(postgres) as db:
        row = await db.fetchone("SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN \"lost\"'")
        assert row is not None
        await trio.to_thread.run_sync(terminate, postgres, row[0])
        with trio.fail_after(2), pytest.raises(ConnectionLost):
            await listener.receive()


async def test_a_listener_runs_a_transaction_between_waits_and_keeps_what_arrived_meanwhile(
    postgres: PostgresLocation,
) -> None:
    async with Listener.open(postgres, ["beat"]) as listener:
        received: list[str] = []

        async def receive_two() -> None:
            for _ in range(2):
                received.append((await listener.receive()).payload)

        def work(conn: Connection) -> int:
            # Delivered to this very connection at commit, while run() holds it.
            conn.execute("SELECT pg_notify('beat', 'during')")
            row = conn.execute("SELECT 41 + 1").fetchone()
            assert row is not None
            return int(row[0])

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive_two)
                await trio.sleep(0.05)  # receive() waits on the socket
                assert await listener.run(work) == 42
                async with Database.open(postgres) as db:
                    await db.execute("SELECT pg_notify('beat', 'after')")
        assert received == ["during", "after"]


async def test_connections_unused_for_idle_seconds_are_closed(postgres: PostgresLocation) -> None:
    settings = PoolSettings(size=3, idle_seconds=0.2)
    async with Database.open(postgres, settings) as db:
        async with trio.open_nursery() as nursery:
            for _ in range(3):  # three at once: three connections
                nursery.start_soon(db.fetchone, "SELECT pg_sleep(0.05)")
        db.close_idle()
        assert len(await open_connections(postgres)) == 3
        await trio.sleep(0.3)
        pid = await backend_pid(db)  # used just now: kept
        db.close_idle()
        assert await open_connections(postgres) == [pid]


async def open_connections(location: PostgresLocation) -> list[int]:
    def pids() -> list[int]:
        with admin_connect(location) as admin:
            return [
                int(str(row[0]))
                for row in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s"
                    " AND pid <> pg_backend_pid() AND application_name = 'a2a-trio'",
                    (location.dbname,),
                ).fetchall()
            ]

    return await trio.to_thread.run_sync(pids)


async def test_a_statement_run_again_and_again_is_planned_once(
    postgres: PostgresLocation,
) -> None:
    # An unnest of an array parameter (the coalesced and leasing task reads):
    # PostgreSQL's default plans it again at each execution, its generic plan
    # estimated at 100 rows against a custom plan's 1, never found cheaper.
    statement = (
        "SELECT k.n FROM unnest(%s::int[]) AS k (n)"
        " JOIN generate_series(1, 10) AS g (n) ON g.n = k.n"
    )
    async with Database.open(postgres, PoolSettings(size=1)) as db:
        for n in range(1, 11):  # psycopg prepares it once it ran five times
            assert await db.fetchall(statement, ([n],)) == [(n,)]
        plans = await db.fetchone(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE 'SELECT k.n FROM unnest%%'"
        )
    assert plans is not None
    generic, custom = plans
    assert (generic, custom) == (5, 0)  # the default: (0, 5)

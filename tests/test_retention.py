"""Retention inside the server: old finished work pruned in batches, one process at a time.

Each store test runs on SQLite and PostgreSQL (``database``); the pruner is
driven as the app drives it, a run at a time. Two real server processes on
one PostgreSQL database show the lease: their runs, as the database records
them, never overlap.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from a2a_trio.config import ConfigError, Settings, load_settings
from a2a_trio.protocol import TaskState
from a2a_trio.runtime.retention import Pruner, RetentionSettings
from a2a_trio.store import ReceiptWrite, Share, Store
from a2a_trio.store.records import order_key
from a2a_trio.store.retention import Pruned
from a2a_trio.store.url import PostgresLocation
from bench.retention_seed import seed_old_tasks

from .conftest import user_message
from .console_helpers import TOKEN, console_server
from .postgres import execute, fresh_database, opened_store, postgres_url, rows, sqlite_url
from .servers import ServerProcess
from .store_contract import T0, finished_task_with_everything, make_task
from .test_console_metrics import scrape, value
from .writes import AGENT, ALICE, create, record

DAY = 86400.0
#: Old enough for a one-day max_age, as the store writes times.
LONG_AGO = order_key(T0)


def settings(**overrides: float) -> RetentionSettings:
    """A day's retention, with no pause between batches (the tests' clock is real)."""
    values: dict[str, float] = {"max_age": DAY, "pause": 0.0}
    values.update(overrides)
    batch = int(values.pop("batch", 200))
    return RetentionSettings(batch=batch, **values)


async def a_run(store: Store, **overrides: float) -> Pruned:
    """One pruner run on ``store``; what it pruned, from its record."""
    assert await Pruner(store, settings(**overrides)).run_once()
    [run] = (await store.retention.runs())[:1]
    assert run.outcome == "done"
    return run.pruned


async def task_ids(store: Store) -> set[str]:
    page = await store.browse_tasks(page_size=1000)
    return {summary.id for summary in page.tasks}


# --- what goes and what stays ------------------------------------------------------------


async def test_a_run_removes_old_finished_tasks_with_everything_of_theirs(database: str) -> None:
    async with opened_store(database) as store:
        await finished_task_with_everything(store, "t-old", at=T0)
        execute(database, "UPDATE message_receipts SET created_at = ?", LONG_AGO)
        pruned = await a_run(store)
        assert pruned == Pruned(
            tasks=1, events=5, push_configs=2, notifications=4, attempts=1, receipts=1
        )
        assert await store.get_task(AGENT, "t-old", owner=None) is None
        assert await store.events_after(AGENT, "t-old", 0) == []
        assert await store.list_push_configs(AGENT, "t-old", owner=None) == []
        assert await store.deliveries() == []
        assert rows(database, "SELECT count(*) FROM push_attempts") == [(0,)]
        assert await store.remembered_messages(AGENT, T0) == []


async def test_young_unfinished_and_interrupted_tasks_stay(database: str) -> None:
    async with opened_store(database) as store:
        await finished_task_with_everything(store, "t-young", at=datetime.now(UTC))
        for task_id, state in (
            ("t-working", TaskState.WORKING),
            ("t-submitted", TaskState.SUBMITTED),
            ("t-input", TaskState.INPUT_REQUIRED),
            ("t-auth", TaskState.AUTH_REQUIRED),
        ):
            await create(store, make_task(task_id, state=state, at=T0))
        assert await a_run(store) == Pruned()
        assert await task_ids(store) == {"t-young", "t-working", "t-submitted", "t-input", "t-auth"}
        assert await store.events_after(AGENT, "t-young", 0) != []
        assert len(await store.deliveries()) == 4


async def test_receipts_go_by_their_own_age(database: str) -> None:
    async with opened_store(database) as store:
        receipts = [ReceiptWrite(ALICE, f"m-{n}", "d", "t-1") for n in range(3)]
        await record(store, Share(AGENT, "t-1", receipts=receipts))
        execute(
            database,
            "UPDATE message_receipts SET created_at = ? WHERE message_id <> 'm-2'",
            LONG_AGO,
        )
        assert await a_run(store) == Pruned(receipts=2)
        assert await store.remembered_messages(AGENT, T0) == [(ALICE, "m-2")]


async def test_a_manual_prune_and_a_run_delete_the_same(database: str) -> None:
    async with opened_store(database) as store:
        for task_id in ("t-1", "t-2"):
            await finished_task_with_everything(store, task_id, at=T0)
        counts = await store.prune(datetime.now(UTC) - timedelta(days=1), dry_run=True)
        assert counts == (await a_run(store)).as_dict() | {"receipts": 0}
        assert await task_ids(store) == set()


# --- bounded batches ---------------------------------------------------------------------------


async def test_every_batch_deletes_at_most_batch_tasks(database: str) -> None:
    async with opened_store(database) as store:
        await finished_task_with_everything(store, "t", at=datetime.now(UTC))
        seed_old_tasks(database, AGENT, "t", 250, at=T0)
        pruner = Pruner(store, settings(batch=100))
        assert await pruner.run_once()
        [run] = await store.retention.runs()
        assert (run.pruned.tasks, run.pruned.events, run.batches, run.largest_batch) == (
            250,
            250 * 5,
            3,
            100,
        )
        assert pruner.stats.batches == 3
        assert await task_ids(store) == {"t"}


async def test_a_run_pauses_between_batches_at_least_as_long_as_set(database: str) -> None:
    async with opened_store(database) as store:
        await finished_task_with_everything(store, "t", at=datetime.now(UTC))
        seed_old_tasks(database, AGENT, "t", 30, at=T0)
        started = time.monotonic()
        await a_run(store, batch=10, pause=0.2)
        # Three batches, a pause after each (the fourth finds nothing).
        assert time.monotonic() - started >= 3 * 0.2


# --- the lease -------------------------------------------------------------------------------


async def test_one_run_at_a_time_holds_the_lease(database: str) -> None:
    async with opened_store(database) as store:
        retention = store.retention
        first = await retention.begin_run("a", 60.0)
        assert first is not None
        assert await retention.begin_run("b", 60.0) is None
        await retention.end_run(first, Pruned(), 0, 0, "done", datetime.now(UTC) - timedelta(1))
        second = await retention.begin_run("b", 60.0)
        assert second is not None and second != first
        assert [(run.holder, run.outcome) for run in await retention.runs()] == [
            ("b", None),
            ("a", "done"),
        ]


async def test_a_lease_that_ran_out_passes_on_and_its_run_stops(database: str) -> None:
    async with opened_store(database) as store:
        retention = store.retention
        dead = await retention.begin_run("a", 0.001)
        assert dead is not None
        await trio.sleep(0.01)
        taken = await retention.begin_run("b", 60.0)
        assert taken is not None
        assert not await retention.renew_run(dead, Pruned(tasks=1), 1, 1, 60.0)
        await retention.end_run(dead, Pruned(), 1, 1, "stopped", datetime.now(UTC) - timedelta(1))
        assert [(run.holder, run.outcome) for run in await retention.runs()] == [
            ("b", None),
            ("a", "abandoned"),
        ]


async def test_a_pruner_that_finds_the_lease_held_runs_nothing(database: str) -> None:
    async with opened_store(database) as store:
        await finished_task_with_everything(store, "t-old", at=T0)
        assert await store.retention.begin_run("elsewhere", 60.0) is not None
        assert not await Pruner(store, settings()).run_once()
        assert await task_ids(store) == {"t-old"}


async def test_runs_older_than_max_age_are_forgotten(database: str) -> None:
    async with opened_store(database) as store:
        await a_run(store)
        execute(
            database,
            "UPDATE retention_runs SET started_at = ?, finished_at = ?",
            LONG_AGO,
            LONG_AGO,
        )
        await a_run(store)
        assert len(await store.retention.runs()) == 1


# --- in the server ---------------------------------------------------------------------------


async def test_the_server_prunes_on_schedule_and_counts_it_in_metrics(tmp_path: Path) -> None:
    database = sqlite_url(tmp_path / "a2a.db")
    async with opened_store(database) as store:
        await finished_task_with_everything(store, "t", at=datetime.now(UTC))
    seed_old_tasks(database, AGENT, "t", 120, at=T0)
    retention = settings(batch=50, interval=0.05)
    async with console_server(tmp_path, database=database, retention=retention) as (server, _, _):
        with trio.fail_after(10):
            while server.app.retention_stats.runs == 0:  # noqa: ASYNC110 (a counter)
                await trio.sleep(0.02)
        samples = await scrape(server.client, {"Authorization": f"Bearer {TOKEN}"})
    assert value(samples, "a2a_retention_pruned_total", kind="tasks") == 120
    assert value(samples, "a2a_retention_pruned_total", kind="events") == 600
    assert value(samples, "a2a_retention_batches_total") == 3
    assert value(samples, "a2a_retention_last_run_timestamp_seconds") > 0
    assert rows(database, "SELECT count(*) FROM tasks") == [(1,)]


def test_retention_is_configured_in_a2a_toml(tmp_path: Path) -> None:
    assert Settings().retention.settings() == RetentionSettings()  # off by default
    assert not RetentionSettings().enabled
    config = tmp_path / "a2a.toml"
    config.write_text(
        '[retention]\nmax_age = "30d"\ninterval = "15m"\nbatch = 500\npause = "250ms"\n'
        "share = 0.5\n"
    )
    loaded = load_settings(config).retention.settings()
    assert loaded == RetentionSettings(
        max_age=30 * DAY, interval=900.0, batch=500, pause=0.25, share=0.5
    )
    config.write_text("[retention]\nmax_age = 3600\n")
    assert load_settings(config).retention.max_age == 3600.0
    config.write_text('[retention]\nmax_age = "a month"\n')
    with pytest.raises(ConfigError, match=r"retention\.max_age"):
        load_settings(config)


# --- two processes on PostgreSQL -------------------------------------------------------------

CONFIG = """
[storage]
url = "{url}"

[cluster]
lease_seconds = 2.0

[retention]
max_age = "1d"
interval = "0.1s"
batch = 20
pause = "0.02s"
"""


@pytest.fixture
def shared_database(postgres: PostgresLocation) -> Iterator[str]:
    with fresh_database(postgres) as location:
        yield postgres_url(location)


def test_two_server_processes_never_prune_at_the_same_time(
    shared_database: str, tmp_path: Path
) -> None:
    (tmp_path / "a2a.toml").write_text(CONFIG.format(url=shared_database))
    servers = [
        ServerProcess.launch_configured_app(tmp_path, tmp_path / f"{name}.log")
        for name in ("first", "second")
    ]
    try:
        for server in servers:
            server.wait_until_ready()
        # A task the echo agent finished, then 1,500 copies of it, old.
        template = _echo_task(servers[0])
        seed_old_tasks(shared_database, "echo", template, 1500, at=T0)
        runs = _runs_when(
            shared_database,
            lambda runs: sum(run[4] for run in runs) == 1500 and len({run[1] for run in runs}) == 2,
        )
        busy = [_metric(server, "a2a_retention_lease_busy_total") for server in servers]
        assert all(server.process.poll() is None for server in servers)
    finally:
        for server in servers:
            server.stop()
    assert rows(shared_database, "SELECT count(*) FROM tasks") == [(1,)]
    assert sum(run[4] for run in runs) == 1500
    assert max(run[5] for run in runs) <= 20
    # 75 batches of 20, each followed by a pause: the run that pruned them
    # spanned many of the other process's 0.1 s intervals, and that process
    # found the lease held then; yet no two runs overlap.
    assert sum(busy) > 0
    for earlier, later in itertools.pairwise(runs):
        assert earlier[3] <= later[2], f"run {later} began before run {earlier} ended"


def _echo_task(server: ServerProcess) -> str:
    """The id of a task the echo agent completed."""
    answer = httpx.post(
        server.url + "/jsonrpc",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": user_message("hi")},
        },
        headers={"A2A-Version": "1.0"},
        trust_env=False,
        timeout=10,
    ).json()
    return str(answer["result"]["task"]["id"])


def _metric(server: ServerProcess, name: str) -> float:
    text = httpx.get(server.url + "/metrics", trust_env=False, timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


def _runs_when(database: str, done: Callable[[list[Any]], bool]) -> list[tuple[Any, ...]]:
    """The finished runs (id, holder, started, finished, tasks, largest batch), oldest
    first, once ``done`` holds for them."""
    deadline = time.monotonic() + 60
    while True:
        runs = rows(
            database,
            "SELECT id, holder, started_at, finished_at, tasks, largest_batch FROM retention_runs"
            " WHERE finished_at IS NOT NULL ORDER BY started_at",
        )
        remaining = rows(database, "SELECT count(*) FROM tasks")[0][0]
        if remaining == 1 and done(runs):
            return runs
        assert time.monotonic() < deadline, f"{remaining} tasks left; runs: {runs}"
        time.sleep(0.1)

"""``a2a-trio prune`` and ``deliveries`` over every database a configuration's agents
live in, on real SQLite files and real PostgreSQL databases.

The commands run in this process (click's runner): what is checked is what
they print and what they do to the databases, not the process around them
(tests/test_cli.py runs them as subprocesses).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from click.testing import CliRunner, Result

from a2a_trio.cli import main
from a2a_trio.store.url import PostgresLocation, parse_database_url

from .postgres import fresh_database, opened_store, postgres_url, rows, sqlite_url
from .store_contract import T0, finished_task_with_everything

CONFIG = """
[storage]
url = "{first}"

[[agents]]
name = "a"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"

[[agents]]
name = "b"
prefix = "/b"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"
storage = "{second}"

[[agents]]
name = "c"
prefix = "/c"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"
storage = "{second}"
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def two_databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two databases, each with a finished task of long ago (4 deliveries, 1 delivered)."""
    if request.param == "sqlite":
        urls = sqlite_url(tmp_path / "a2a.db"), sqlite_url(tmp_path / "other.db")
        seed(*urls)
        yield urls
        return
    server: PostgresLocation = request.getfixturevalue("postgres")
    with (
        fresh_database(server, prefix="hedges_cli_a") as first,
        fresh_database(server, prefix="hedges_cli_b") as second,
    ):
        urls = postgres_url(first), postgres_url(second)
        seed(*urls)
        yield urls


def seed(first: str, second: str) -> None:
    async def fill() -> None:
        for database, task_id in ((first, "t-first"), (second, "t-second")):
            async with opened_store(database) as store:
                await finished_task_with_everything(store, task_id, at=T0)

    trio.run(fill)


def name_of(url: str) -> str:
    """How the commands name a database: its file, or user@host:port/dbname."""
    location = parse_database_url(url)
    return str(getattr(location, "path", "")) or location.display  # type: ignore[union-attr]


def a2a(tmp_path: Path, urls: tuple[str, str], *args: str, override: str | None = None) -> Result:
    """The command with ``a2a.toml`` naming ``urls`` (``A2A_TRIO_DATABASE``: ``override``)."""
    config = tmp_path / "a2a.toml"
    config.write_text(CONFIG.format(first=urls[0], second=urls[1]))
    runner = CliRunner()
    return runner.invoke(
        main,
        [*args, "--config", str(config)],
        env={"A2A_TRIO_DATABASE": override, "A2A_TRIO_CONFIG": None},
    )


def test_prune_prunes_every_database_of_the_configuration(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    first, second = two_databases
    done = a2a(tmp_path, two_databases, "prune", "--days", "7")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        f"{name_of(first)}: removed 1 tasks, 5 events, 2 push configs, 4 notifications"
        " and 1 delivery attempts (finished more than 7 days ago)",
        f"{name_of(second)}: removed 1 tasks, 5 events, 2 push configs, 4 notifications"
        " and 1 delivery attempts (finished more than 7 days ago)",
    ]
    for database in two_databases:
        assert rows(database, "SELECT id FROM tasks") == []


def test_prune_dry_run_counts_in_every_database_and_deletes_nothing(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    done = a2a(tmp_path, two_databases, "prune", "--days", "7", "--dry-run")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert [line.split(": ")[0] for line in lines] == [name_of(url) for url in two_databases]
    assert all(": would remove 1 tasks," in line for line in lines)
    for database, task_id in zip(two_databases, ("t-first", "t-second"), strict=True):
        assert rows(database, "SELECT id FROM tasks") == [(task_id,)]


def test_prune_with_database_prunes_that_one_alone_as_before(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    first, second = two_databases
    done = a2a(tmp_path, two_databases, "prune", "--days", "7", "--database", second)
    assert done.exit_code == 0, done.output
    assert done.output.startswith("removed 1 tasks, 5 events,")  # one database: no name
    assert rows(first, "SELECT id FROM tasks") == [("t-first",)]
    assert rows(second, "SELECT id FROM tasks") == []


def test_deliveries_lists_every_database_under_its_name(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    first, second = two_databases
    done = a2a(tmp_path, two_databases, "deliveries")
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    headers = [line for line in lines if line.startswith("database ")]
    assert headers == [f"database {name_of(first)}:", f"database {name_of(second)}:"]
    at = lines.index(headers[1])
    assert sum("task t-first" in line for line in lines[:at]) == 4
    assert sum("task t-second" in line for line in lines[at:]) == 4
    only = a2a(tmp_path, two_databases, "deliveries", "t-second")
    assert only.output.splitlines()[:2] == [f"database {name_of(first)}:", "no deliveries"]


def test_deliveries_retry_wants_the_database_when_there_are_several(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    first, second = two_databases
    refused = a2a(tmp_path, two_databases, "deliveries", "retry", "1")
    assert refused.exit_code == 2
    assert (
        "delivery ids are numbered in each database and the configuration has 2"
        f" ({name_of(first)}, {name_of(second)}): name the delivery's with --database"
    ) in refused.output
    # The seeded task's first notification was delivered; the others are pending.
    missing = a2a(tmp_path, two_databases, "deliveries", "retry", "1", "--database", second)
    assert missing.exit_code == 1
    assert "no failed delivery 1" in missing.output


def test_a2a_trio_database_replaces_storage_url_and_no_agents_own(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    first, second = two_databases
    third = sqlite_url(tmp_path / "third.db")
    trio.run(seed_one, third)
    done = a2a(tmp_path, two_databases, "prune", "--days", "7", override=third)
    assert done.exit_code == 0, done.output
    assert [line.split(": ")[0] for line in done.output.splitlines()] == [
        name_of(third),
        name_of(second),
    ]
    assert rows(first, "SELECT id FROM tasks") == [("t-first",)]  # storage.url: not used
    assert rows(second, "SELECT id FROM tasks") == rows(third, "SELECT id FROM tasks") == []


async def seed_one(database: str) -> None:
    async with opened_store(database) as store:
        await finished_task_with_everything(store, "t-third", at=T0)

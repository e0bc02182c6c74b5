"""The console over several databases: every database's deliveries, page by page, and
the processes serving them, on real SQLite files and real PostgreSQL databases.

The fleet of processes on two PostgreSQL databases (members, gauges) is in
tests/test_multi_database.py.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from a2a_trio import A2AApp
from a2a_trio.store.url import PostgresLocation

from .agents import ScriptedExecutor
from .conftest import LiveServer, make_card
from .console_helpers import TOKEN, console_server
from .postgres import fresh_database, opened_store, postgres_url, sqlite_url
from .store_contract import finished_task_with_everything

OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
#: Tasks seeded in each database; each has 4 notifications.
TASKS = {"first": 3, "second": 2}


@pytest.fixture(params=["sqlite", "postgres"])
def two_databases(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "a2a.db"), sqlite_url(tmp_path / "other.db")
        return
    server: PostgresLocation = request.getfixturevalue("postgres")
    with (
        fresh_database(server, prefix="hedges_console_a") as first,
        fresh_database(server, prefix="hedges_console_b") as second,
    ):
        if request.param == "postgres-then-sqlite":
            yield postgres_url(first), sqlite_url(tmp_path / "other.db")
        elif request.param == "sqlite-then-postgres":
            yield sqlite_url(tmp_path / "a2a.db"), postgres_url(second)
        else:
            yield postgres_url(first), postgres_url(second)


@asynccontextmanager
async def seeded_console(tmp_path: Path, first: str, second: str) -> AsyncIterator[LiveServer]:
    """A console on ``first`` with an agent in ``second``, each holding finished tasks'
    deliveries (their ids numbered in each database from 1)."""
    for name, database in (("first", first), ("second", second)):
        async with opened_store(database) as store:
            for n in range(TASKS[name]):
                await finished_task_with_everything(store, f"{name}-{n}", at=datetime.now(UTC))

    def mount_other(app: A2AApp) -> None:
        app.mount(
            "/other", card=make_card(), executor=ScriptedExecutor(), name="other", storage=second
        )
        for database in app.databases.all:  # the seeded webhooks go nowhere, DNS included
            database.push.screen.resolver = loopback

    async with console_server(tmp_path, configure=mount_other, database=first) as (server, _, _):
        yield server


async def loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]  # which screening refuses: no attempt leaves the process


async def deliveries(server: LiveServer, **params: Any) -> Any:
    page = await server.client.get("/_a2a/api/deliveries", params=params, headers=OPERATOR)
    assert page.status_code == 200, page.text
    return page.json()


async def test_the_deliveries_of_every_database_page_by_page(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    async with seeded_console(tmp_path, *two_databases) as server:
        seen: list[dict[str, Any]] = []
        pages, token = 0, ""
        while True:
            body = await deliveries(server, pageSize=3, pageToken=token)
            assert len(body["deliveries"]) <= 3
            assert body["nextBefore"] is None  # ids of two databases: no one `before`
            seen += body["deliveries"]
            pages += 1
            token = body["nextPageToken"]
            if not token:
                break
        whole = await deliveries(server, pageSize=500)
        filtered = await deliveries(server, pageSize=500, state="delivered")
    total = 4 * sum(TASKS.values())
    assert len(seen) == total and pages == 7  # 20 rows, 3 a page
    assert {(d["task"], d["id"]) for d in seen} == {
        (d["task"], d["id"]) for d in whole["deliveries"]
    }
    assert {d["task"].split("-")[0] for d in seen} == {"first", "second"}
    # Ids repeat across the databases; (task, id) never does.
    assert len({(d["task"], d["id"]) for d in seen}) == total
    assert len({d["id"] for d in seen}) < total
    created = [d["createdAt"] for d in seen]
    assert created == sorted(created, reverse=True)  # the most recently queued first
    assert whole["nextPageToken"] == ""
    assert len(filtered["deliveries"]) == sum(TASKS.values())  # one delivered of each task


async def test_one_database_still_pages_with_before(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    async with seeded_console(tmp_path, *two_databases) as server:
        first = await deliveries(server, agent="agent", pageSize=5)  # the app's own database
        after = await deliveries(server, agent="agent", pageSize=5, before=first["nextBefore"])
        by_token = await deliveries(
            server, agent="agent", pageSize=5, pageToken=first["nextPageToken"]
        )
    assert [d["id"] for d in first["deliveries"]] == [12, 11, 10, 9, 8]
    assert [d["id"] for d in after["deliveries"]] == [7, 6, 5, 4, 3]
    assert by_token["deliveries"] == after["deliveries"]


def forged(token: str, change: dict[str, Any]) -> str:
    body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw = json.dumps({**body, **change}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def test_a_bad_page_token_is_refused_with_what_is_wrong(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    async with seeded_console(tmp_path, *two_databases) as server:
        token = (await deliveries(server, pageSize=2))["nextPageToken"]

        async def refused(**params: Any) -> str:
            page = await server.client.get("/_a2a/api/deliveries", params=params, headers=OPERATOR)
            assert page.status_code == 400, page.text
            assert page.json()["error"]["status"] == "INVALID_ARGUMENT"
            message: str = page.json()["error"]["message"]
            return message

        not_ours = "pageToken: not a token this server issued"
        assert await refused(pageToken="garbage!") == not_ours
        assert await refused(pageToken=forged(token, {"d": [["x", -1]]})) == not_ours
        assert await refused(pageToken=forged(token, {"d": "x"})) == not_ours
        nested = base64.urlsafe_b64encode(b"[" * 5000).decode()  # past json's recursion limit
        assert await refused(pageToken=nested) == not_ours
        huge = [[name, 2**70] for name, _ in forged_entries(token)]  # no database takes it
        assert await refused(pageToken=forged(token, {"d": huge})) == not_ours
        assert (await refused(pageToken=forged(token, {"v": 2}))).startswith(
            "pageToken: version 2 is not one this server reads"
        )
        assert (await refused(pageToken=token, state="failed")).startswith(
            "pageToken: issued for other filters"
        )
        other = forged(token, {"d": [["0" * 12, None], *forged_entries(token)[1:]]})
        assert (await refused(pageToken=other)).startswith("pageToken: issued for other databases")
        assert (await refused(before="5")).startswith(
            "before: delivery ids are numbered in each database"
        )
        next_page = await deliveries(server, pageSize=2, pageToken=token)
    assert len(next_page["deliveries"]) == 2


def forged_entries(token: str) -> list[Any]:
    body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    entries: list[Any] = body["d"]
    return entries


# The mixed pairs: a SQLite database has no member rows, and was once left out.
@pytest.mark.parametrize(
    "two_databases",
    ["sqlite", "postgres", "postgres-then-sqlite", "sqlite-then-postgres"],
    indirect=True,
)
async def test_the_members_view_names_the_databases_a_process_serves(
    tmp_path: Path, two_databases: tuple[str, str]
) -> None:
    first, second = two_databases
    async with seeded_console(tmp_path, first, second) as server:
        members = (await server.client.get("/_a2a/api/members", headers=OPERATOR)).json()["members"]
        counters = (await server.client.get("/_a2a/api/counters", headers=OPERATOR)).json()
        databases = [d.store.display for d in server.app.databases.all]
    assert len(members) == 1  # one process, a member of both databases
    assert members[0]["me"] and members[0]["databases"] == databases
    assert len(databases) == 2
    assert [share["id"] for share in counters["members"]] == [members[0]["id"]]

"""A crash while a follow-up's execution runs, before the agent's first event.

The follow-up to a paused (INPUT_REQUIRED) task is written to the task's log
when its execution starts, before the executor runs; an agent calling its
model sits there for seconds without recording anything. A process killed
then (SIGKILL) leaves the task paused with the user's message unanswered:
the execution had started, so the task ends FAILED like any running task,
on a restart (SQLite) and when another process takes the dead one's lease
(PostgreSQL), and its clients hear it. ``silent`` in ``tests.cluster_app``
is such a follow-up: it notes where it runs, then waits for good.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from a2a_trio.store.url import PostgresLocation

from .conftest import user_message
from .postgres import fresh_database, postgres_url, sqlite_url
from .servers import ServerProcess
from .test_cluster import (
    LEASE_SECONDS,
    client,
    frames,
    rpc,
    start_server,
    state_of,
    wait_for_file,
    wait_for_state,
)

FAILED = "TASK_STATE_FAILED"


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    """The test's server processes, stopped at its end."""
    started: list[ServerProcess] = []
    try:
        yield started
    finally:
        for server in started:
            server.stop()


async def follow_up_under_way(
    server: ServerProcess, directory: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A paused task whose follow-up's execution runs silently on ``server``.

    Returns the task as paused and the follow-up, once the follow-up is in
    the task's history and its executor runs.
    """
    asked = await rpc(server, "SendMessage", {"message": user_message("ask")})
    task = asked["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow_up = user_message("silent", taskId=task["id"])
    await rpc(
        server,
        "SendMessage",
        {"message": follow_up, "configuration": {"returnImmediately": True}},
    )
    await wait_for_file(directory / f"{task['id']}.silent.{server_name(server, directory)}")
    stored = await rpc(server, "GetTask", {"id": task["id"]})
    assert stored["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert stored["history"][-1]["messageId"] == follow_up["messageId"]
    return task, follow_up


def server_name(server: ServerProcess, directory: Path) -> str:
    """The process name ``start_server`` gave ``server`` (its log is ``NAME.log``)."""
    assert server.log_path.parent == directory
    return server.log_path.stem


def assert_ended_by_the_crash(task: dict[str, Any], follow_up: dict[str, Any]) -> None:
    assert task["status"]["state"] == FAILED, task["status"]
    assert "server stopped" in task["status"]["message"]["parts"][0]["text"]
    said = [message["messageId"] for message in task["history"]]
    assert follow_up["messageId"] in said  # the message stays in the history, answered so


async def subscribe(
    server: ServerProcess,
    task_id: str,
    heard: list[str | None],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """SubscribeToTask until its stream ends, noting each event's state; started at its first."""
    body = {"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": task_id}}
    async with (
        client(server) as http,
        http.stream(
            "POST", "/jsonrpc", json=body, headers={"Accept": "text/event-stream"}
        ) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                assert "error" not in data, data
                heard.append(state_of(data["result"]))
                if len(heard) == 1:
                    task_status.started()


async def test_a_follow_up_under_way_at_sigkill_ends_failed_on_restart_sqlite(
    tmp_path: Path, servers: list[ServerProcess]
) -> None:
    database = sqlite_url(tmp_path / "a2a.db")
    first = start_server(database, tmp_path, "p0")
    servers.append(first)
    task, follow_up = await follow_up_under_way(first, tmp_path)
    first.kill()
    restarted = start_server(database, tmp_path, "p1")
    servers.append(restarted)
    ended = await rpc(restarted, "GetTask", {"id": task["id"]})
    assert_ended_by_the_crash(ended, follow_up)
    # A client that was streaming it resumes from its last event and hears the ending.
    replayed = await frames(restarted, "SubscribeToTask", {"id": task["id"]}, last_event_id="0")
    assert [state_of(result) for _, result in replayed][-1] == FAILED
    # The task is final: a further message is refused, not run.
    async with client(restarted) as http:
        body = {
            "jsonrpc": "2.0",
            "id": "again",
            "method": "SendMessage",
            "params": {"message": user_message("more", taskId=task["id"])},
        }
        answer = (await http.post("/jsonrpc", json=body)).json()
    assert "error" in answer, answer


async def test_a_follow_up_under_way_on_a_killed_process_ends_failed_on_another_postgresql(
    postgres: PostgresLocation, tmp_path: Path, servers: list[ServerProcess]
) -> None:
    with fresh_database(postgres) as location:
        database = postgres_url(location)
        doomed = start_server(database, tmp_path, "p0")
        survivor = start_server(database, tmp_path, "p1")
        servers.extend([doomed, survivor])
        task, follow_up = await follow_up_under_way(doomed, tmp_path)
        heard: list[str | None] = []
        with trio.fail_after(LEASE_SECONDS + 20):
            async with trio.open_nursery() as nursery:
                await nursery.start(subscribe, survivor, task["id"], heard)
                doomed.kill()
                ended = await wait_for_state(
                    survivor, task["id"], FAILED, within=LEASE_SECONDS + 10
                )
        assert_ended_by_the_crash(ended, follow_up)
        # The subscriber on the other process hears the ending, and its stream ends there.
        assert heard[-1] == FAILED, heard
        # A further message is refused: the task is final.
        async with client(survivor) as http:
            body = {
                "jsonrpc": "2.0",
                "id": "again",
                "method": "SendMessage",
                "params": {"message": user_message("more", taskId=task["id"])},
            }
            answer = (await http.post("/jsonrpc", json=body)).json()
        assert "error" in answer, answer

"""One process per SQLite file: a serving app holds its database, and a second is refused.

Two servers on one file would each run executions the other cannot see (a task
canceled in one could complete in the other; one's crash recovery would fail the
other's live tasks). So the second server does not start, its message says why
and what to do, and the first serves on. Two apps in one trio program count as
two servers; an app that stopped lets the next one in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from hypercorn.utils import LifespanFailureError

from .conftest import VERSION_HEADERS, live_server, user_message
from .servers import CARD_PATH, ServerProcess
from .test_server_basics import mount_scripted

#: What the refusal must tell an operator: the fix, in the words of the message.
FIX = "serve it from a single process (hypercorn without --workers)"


async def test_a_second_app_on_the_database_does_not_start_and_the_first_serves_on(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, mount_scripted) as first:
        refused = pytest.RaisesExc(
            LifespanFailureError, match="a2a.db is already served by another app in this process"
        )
        with pytest.RaisesGroup(refused, flatten_subgroups=True):
            async with live_server(tmp_path, mount_scripted):
                pass
        body = await first.jsonrpc("SendMessage", {"message": user_message("echo still here")})
        assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_an_app_that_stopped_lets_the_next_one_serve_its_database(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, mount_scripted) as first:
        await first.jsonrpc("SendMessage", {"message": user_message("echo first")})
    # ``first`` (and its app) is still referenced: only stopping can have let go.
    async with live_server(tmp_path, mount_scripted) as second:
        body = await second.jsonrpc("SendMessage", {"message": user_message("echo second")})
        assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert first.app.mounts


def send_message(server: ServerProcess, text: str) -> dict[str, Any]:
    """SendMessage over JSON-RPC; the task it answers with."""
    response = httpx.post(
        server.url + "/jsonrpc",
        headers=VERSION_HEADERS,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": user_message(text)},
        },
        timeout=10.0,
        trust_env=False,
    )
    task: dict[str, Any] = response.json()["result"]["task"]
    return task


def test_a_second_server_process_on_the_database_is_refused_and_the_first_serves_on(
    tmp_path: Path,
) -> None:
    first = ServerProcess.launch_configured_app(tmp_path, tmp_path / "first.log")
    try:
        first.wait_until_ready()
        second = ServerProcess.launch_configured_app(tmp_path, tmp_path / "second.log")
        second.wait_for_exit()
        output = second.output()
        assert "a2a.db is already served by another process (pid " in output
        assert FIX in output

        card = httpx.get(first.url + CARD_PATH, timeout=10.0, trust_env=False)
        assert card.status_code == 200
        task = send_message(first, "still serving")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        first.stop()


# Serial: the refused worker gives hypercorn's supervisor 50 ms to handle SIGTERM
# before SIGUSR1 (server/failed_start.py); four busy xdist workers could exceed it.
@pytest.mark.serial
def test_hypercorn_with_two_workers_refuses_one_once_then_stops_and_leaves_the_database_free(
    tmp_path: Path,
) -> None:
    """hypercorn (0.18) stops every worker when one fails its start-up, and exits non-zero.

    So ``--workers 2`` on SQLite ends with the refusal: one worker refused, once
    (no respawn loop), in one line, and a single-worker server starts on the
    database at once.
    """
    workers = ServerProcess.launch_configured_app(
        tmp_path, tmp_path / "workers.log", options=("--workers", "2")
    )
    status = workers.wait_for_exit()
    output = workers.output()
    assert status != 0, output  # a failed start is no clean stop
    assert output.count("a2a-trio: cannot start:") == 1, output
    assert "Traceback" not in output, output
    # The workers start together: the loser may look before the winner wrote its pid.
    assert "a2a.db is already served by another process" in output
    assert FIX in output

    single = ServerProcess.launch_configured_app(tmp_path, tmp_path / "single.log")
    try:
        single.wait_until_ready()
    finally:
        single.stop()

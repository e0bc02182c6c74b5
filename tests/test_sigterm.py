"""SIGTERM to a real server with running tasks: it ends them within the grace, durably.

One shutdown serves the tests of each server: ``a2a-trio serve``, and
hypercorn's own CLI serving ``a2a_trio:app``, both with the default settings
(a 10 s grace). Thirty clients wait on blocking SendMessage calls whose tasks
take 30 s, two on tasks that take 6 s; once all are WORKING, the process we
started gets SIGTERM. Its exit is timed, then the database it leaves is read
directly, and a new server is started on it. Each server shuts down once per
backend: on a SQLite file and on PostgreSQL.

hypercorn's CLI gives the requests in flight its ``graceful_timeout`` (3 s)
and cuts them off before the app hears of the shutdown: there the grace
begins 3 s late, and only ``a2a-trio serve`` answers the waiting clients.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypercorn.config import Config

from .conftest import VERSION_HEADERS, user_message
from .postgres import BACKENDS, database_for, rows
from .servers import ServerProcess, hypercorn_command, serve_command

#: The default runtime.shutdown_grace.
GRACE = 10.0
#: What the exit may take beyond its due (a loaded machine, start of the interpreter's exit).
MARGIN = 3.0
LONG, SHORT = "sleep 30", "sleep 6"
LONG_TASKS, SHORT_TASKS = 30, 2
SHUTDOWN_REASON = "The server shut down before the task finished."
CONFIG = """
[[agents]]
executor = "tests.agents:ScriptedExecutor"
card = "tests.conftest:make_card"
"""

SERVERS: dict[str, Callable[[int], list[str]]] = {
    "a2a-trio serve": serve_command,
    "hypercorn": lambda port: hypercorn_command("a2a_trio:app", port),
}


@dataclass
class Stored:
    """A task as the database holds it."""

    text: str
    state: str
    status_text: str | None
    last_seq: int


def read_tasks(database: str) -> dict[str, Stored]:
    """Every task in the database, by id: what it was asked, its state and status text."""
    tasks = {}
    # What it was asked is the first message of its history: in its first event.
    for task_id, state, last_seq, snapshot, first in rows(
        database,
        "SELECT id, state, last_seq, CAST(snapshot AS text), CAST(payload AS text)"
        " FROM tasks JOIN task_events ON task_events.agent = tasks.agent"
        " AND task_events.task_id = tasks.id AND task_events.seq = 1",
    ):
        task = json.loads(snapshot)
        message = task["status"].get("message")
        tasks[task_id] = Stored(
            text=json.loads(first)["task"]["history"][0]["parts"][0]["text"],
            state=state,
            status_text=message["parts"][0]["text"] if message else None,
            last_seq=last_seq,
        )
    return tasks


@dataclass
class Shutdown:
    """One server's SIGTERM: how it went, and what a restart on its database found."""

    took: float
    status: int
    #: What each blocking client got: the task answered, or the error's name.
    answers: list[dict[str, Any] | str]
    stored: dict[str, Stored]
    restart_log: str
    stored_after_restart: dict[str, Stored]


def send_blocking(url: str, text: str) -> dict[str, Any] | str:
    body = {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "SendMessage",
        "params": {"message": user_message(text)},
    }
    try:
        response = httpx.post(
            url + "/jsonrpc", json=body, headers=VERSION_HEADERS, timeout=60, trust_env=False
        )
    except httpx.HTTPError as error:
        return type(error).__name__
    task: dict[str, Any] = response.json()["result"]["task"]
    return task


def count_working(url: str) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "ListTasks",
        "params": {"status": "TASK_STATE_WORKING", "pageSize": 100},
    }
    response = httpx.post(
        url + "/jsonrpc", json=body, headers=VERSION_HEADERS, timeout=10, trust_env=False
    )
    total: int = response.json()["result"]["totalSize"]
    return total


def shut_down(kind: str, directory: Path, database: str) -> Shutdown:
    """Serve with ``kind``, SIGTERM it under load, then restart it on the same database."""
    config = directory / "a2a.toml"
    config.write_text(CONFIG)
    env = {"A2A_TRIO_CONFIG": str(config)}
    command = SERVERS[kind]
    server = ServerProcess.start(database, directory / "server.log", env=env, command=command)
    texts = [LONG] * LONG_TASKS + [SHORT] * SHORT_TASKS
    try:
        with ThreadPoolExecutor(len(texts)) as pool:
            sending = [pool.submit(send_blocking, server.url, text) for text in texts]
            deadline = time.monotonic() + 30
            while count_working(server.url) < len(texts):
                assert time.monotonic() < deadline, "the tasks never all became WORKING"
                time.sleep(0.05)
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            status = server.process.wait(60)
            took = time.monotonic() - signalled
            answers = [future.result() for future in sending]
    finally:
        server.stop()
    stored = read_tasks(database)
    restarted = ServerProcess.start(database, directory / "restart.log", env=env, command=command)
    restarted.stop()
    return Shutdown(took, status, answers, stored, restarted.output(), read_tasks(database))


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend the servers of this module run on."""
    return str(request.param)


@pytest.fixture(scope="module")
def served_shutdown(
    tmp_path_factory: pytest.TempPathFactory, backend: str, request: pytest.FixtureRequest
) -> Shutdown:
    """``a2a-trio serve``: the grace begins at the signal."""
    directory = tmp_path_factory.mktemp("serve")
    return shut_down("a2a-trio serve", directory, database_for(backend, directory, request))


@pytest.fixture(scope="module")
def hypercorn_shutdown(
    tmp_path_factory: pytest.TempPathFactory, backend: str, request: pytest.FixtureRequest
) -> Shutdown:
    """hypercorn's CLI: the grace begins after its graceful_timeout."""
    directory = tmp_path_factory.mktemp("hypercorn")
    return shut_down("hypercorn", directory, database_for(backend, directory, request))


#: How late the grace begins after SIGTERM, for each server.
GRACE_BEGINS = {"served_shutdown": 0.0, "hypercorn_shutdown": Config.graceful_timeout}


@pytest.fixture(params=list(GRACE_BEGINS))
def shutdown(request: pytest.FixtureRequest, backend: str) -> tuple[Shutdown, float]:
    """Each server's shutdown (on ``backend``), and how late its grace began."""
    return request.getfixturevalue(request.param), GRACE_BEGINS[request.param]


def test_the_server_exits_within_the_grace_plus_a_margin(
    shutdown: tuple[Shutdown, float],
) -> None:
    done, late = shutdown
    assert done.status == 0
    assert GRACE <= done.took <= late + GRACE + MARGIN


def test_no_task_is_left_working_in_the_database(shutdown: tuple[Shutdown, float]) -> None:
    done, _ = shutdown
    states = {(task.text, task.state) for task in done.stored.values()}
    assert states == {(LONG, "TASK_STATE_FAILED"), (SHORT, "TASK_STATE_COMPLETED")}
    assert len(done.stored) == LONG_TASKS + SHORT_TASKS


def test_the_tasks_that_outlive_the_grace_end_failed_with_the_shutdown_reason(
    shutdown: tuple[Shutdown, float],
) -> None:
    done, _ = shutdown
    failed = [task for task in done.stored.values() if task.text == LONG]
    assert {task.status_text for task in failed} == {SHUTDOWN_REASON}


def test_a_restart_finds_nothing_to_recover(shutdown: tuple[Shutdown, float]) -> None:
    done, _ = shutdown
    assert "was running at a crash" not in done.restart_log
    assert done.stored_after_restart == done.stored


def test_a2a_trio_serve_answers_every_waiting_client(served_shutdown: Shutdown) -> None:
    answered = sorted(
        (task["history"][0]["parts"][0]["text"], task["status"]["state"])
        for task in served_shutdown.answers
        if isinstance(task, dict)
    )
    expected = [(LONG, "TASK_STATE_FAILED")] * LONG_TASKS
    expected += [(SHORT, "TASK_STATE_COMPLETED")] * SHORT_TASKS
    assert answered == sorted(expected)


def test_hypercorns_cli_cuts_waiting_clients_off_after_its_graceful_timeout(
    hypercorn_shutdown: Shutdown,
) -> None:
    # What docs/configuration.md tells deployers: a2a-trio serve answers them.
    cut_off = ["RemoteProtocolError"] * (LONG_TASKS + SHORT_TASKS)
    assert hypercorn_shutdown.answers == cut_off

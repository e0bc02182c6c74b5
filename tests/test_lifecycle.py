"""Starting and stopping as an operator sees it: real processes, their exit status and their log.

``a2a-trio serve``, ``a2a-trio worker`` and ``hypercorn ... a2a_trio:app``
refuse a start that cannot succeed (a port in use, a database out of
reach) with one line and a non-zero status, claiming nothing served; the
commands log time, level and logger on every line (or JSON); the first
signal is answered at once with what the shutdown waits for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from psycopg import sql

from a2a_trio.store.url import PostgresLocation

from .conftest import VERSION_HEADERS, user_message
from .postgres import admin_connect, fresh_database, postgres_url
from .servers import REPO, ServerProcess, free_port, hypercorn_command, serve_command

CLI = [sys.executable, "-m", "a2a_trio.cli"]
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nowhere"
AGENT = """
[[agents]]
executor = "tests.agents:ScriptedExecutor"
card = "tests.conftest:make_card"
"""
QUEUED = AGENT + 'execution = "queued"\n'
#: A line of the text log: UTC time to the millisecond, level, logger.
LOG_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: "
)
TIMEOUT = 60.0


def run(directory: Path, *command: str, config: str) -> subprocess.CompletedProcess[str]:
    """A command in ``directory`` with ``config`` as its a2a.toml; its exit and output."""
    (directory / "a2a.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if k not in ("A2A_TRIO_CONFIG", "A2A_TRIO_DATABASE")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        list(command),
        cwd=directory,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
    )


def only_line(done: subprocess.CompletedProcess[str]) -> str:
    """What the command wrote, which must be one line."""
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def storage(url: str) -> str:
    return f'[storage]\nurl = "{url}"\n'


# --- refused starts -------------------------------------------------------------------------


def test_serve_on_a_port_in_use_exits_non_zero_with_one_line(
    tmp_path: Path, taken_port: int
) -> None:
    done = run(tmp_path, *CLI, "serve", "--bind", f"127.0.0.1:{taken_port}", config=AGENT)
    assert done.returncode == 1, done.stdout
    line = only_line(done)
    assert f"127.0.0.1:{taken_port}" in line and "in use" in line and "--bind" in line
    assert not (tmp_path / "a2a.db").exists()  # nothing was opened, nothing served


def test_serve_with_its_database_out_of_reach_exits_non_zero_with_one_line(
    tmp_path: Path,
) -> None:
    config = storage(UNREACHABLE) + AGENT
    done = run(tmp_path, *CLI, "serve", "--bind", f"127.0.0.1:{free_port()}", config=config)
    assert done.returncode == 1, done.stdout
    line = only_line(done)
    assert "cannot connect to PostgreSQL" in line and "serving" not in line


def test_a_worker_with_its_database_out_of_reach_exits_non_zero_with_one_line(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, *CLI, "worker", config=storage(UNREACHABLE) + QUEUED)
    assert done.returncode == 1, done.stdout
    line = only_line(done)
    assert "cannot connect to PostgreSQL" in line and "working for" not in line


def test_a_worker_whose_metrics_port_is_in_use_exits_non_zero_with_one_line(
    tmp_path: Path, taken_port: int
) -> None:
    config = storage(UNREACHABLE) + QUEUED
    bind = f"127.0.0.1:{taken_port}"
    done = run(tmp_path, *CLI, "worker", "--metrics-bind", bind, config=config)
    assert done.returncode == 1, done.stdout
    line = only_line(done)
    assert bind in line and "in use" in line and "working for" not in line


def test_hypercorn_with_the_database_out_of_reach_exits_non_zero_with_one_line(
    tmp_path: Path,
) -> None:
    command = hypercorn_command("a2a_trio:app", free_port())
    done = run(tmp_path, *command, config=storage(UNREACHABLE) + AGENT)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stdout, done.stdout
    [line] = [line for line in done.stdout.splitlines() if "cannot connect" in line]
    assert "cannot start" in line


def test_hypercorn_on_a_port_in_use_exits_non_zero(tmp_path: Path, taken_port: int) -> None:
    command = hypercorn_command("a2a_trio:app", taken_port)
    done = run(tmp_path, *command, config=AGENT)
    assert done.returncode != 0, done.stdout


# --- what the commands log ------------------------------------------------------------------


def serve(tmp_path: Path, *options: str) -> ServerProcess:
    (tmp_path / "a2a.toml").write_text(AGENT)
    env = {"A2A_TRIO_CONFIG": str(tmp_path / "a2a.toml")}
    database = tmp_path / "a2a.db"

    def command(port: int) -> list[str]:
        return [*serve_command(port), *options]

    return ServerProcess.start(database, tmp_path / "serve.log", env=env, command=command)


def send(server: ServerProcess, text: str, **configuration: object) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": user_message(text), "configuration": configuration},
    }
    response = httpx.post(
        server.url + "/jsonrpc", json=body, headers=VERSION_HEADERS, timeout=30, trust_env=False
    )
    assert "result" in response.json(), response.text


def test_serve_logs_time_level_and_logger_on_every_line(tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        send(server, "echo hello")
    finally:
        server.stop()
    lines = server.output().splitlines()
    assert any("serving" in line for line in lines)
    assert any("POST /jsonrpc" in line for line in lines)  # the access log too
    assert all(LOG_LINE.match(line) for line in lines), lines


def test_serve_logs_json_when_asked(tmp_path: Path) -> None:
    server = serve(tmp_path, "--log-format", "json")
    try:
        send(server, "echo hello")
    finally:
        server.stop()
    entries = [json.loads(line) for line in server.output().splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in entries)
    assert any(entry["logger"] == "hypercorn.access" for entry in entries)


# --- the first signal -----------------------------------------------------------------------


def wait_for_line(server: ServerProcess, text: str, within: float) -> float:
    """When ``text`` appeared in the server's output (time.monotonic()), waiting ``within``."""
    deadline = time.monotonic() + within
    while text not in server.output():
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.002)
    return time.monotonic()


def test_the_first_signal_says_at_once_what_the_shutdown_waits_for(tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        for _ in range(2):
            send(server, "sleep 30", returnImmediately=True)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        seen = wait_for_line(server, "shutting down: waiting up to", within=5)
        assert seen - signalled < 0.1
        line = next(line for line in server.output().splitlines() if "shutting down" in line)
        assert "10 s for 2 running executions (signal again to stop now)" in line
        wait_for_line(server, "still waiting for 2 running executions", within=5)
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(TIMEOUT) == 0
    finally:
        server.stop()
    assert "stopping now" in server.output()


# --- the database going away and coming back ------------------------------------------------


@contextmanager
def database_away(server: PostgresLocation, name: str) -> Iterator[None]:
    """No connection to database ``name`` (the test's own) for the block: new ones refused."""
    with admin_connect(server) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name))
        )
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
    try:
        yield
    finally:
        with admin_connect(server) as admin:
            admin.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(name))
            )


def ride_out_an_outage(
    server: ServerProcess, postgres: PostgresLocation, name: str, **configuration: object
) -> None:
    """A message before, six while database ``name`` is away (half a second apart, sent
    with ``configuration``), then messages until one is answered and the server logs
    that the database is back."""
    send(server, "echo before")
    with database_away(postgres, name):
        for _ in range(6):
            with contextlib.suppress(AssertionError):
                send(server, "echo during", **configuration)
            time.sleep(0.5)
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            send(server, "echo after")
            break
        except AssertionError:
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
    wait_for_line(server, "reachable again", within=TIMEOUT)


def test_a_database_outage_is_one_line_when_it_goes_and_one_when_it_is_back(
    postgres: PostgresLocation, tmp_path: Path
) -> None:
    with fresh_database(postgres) as location:
        config = storage(postgres_url(location)) + QUEUED
        (tmp_path / "a2a.toml").write_text(config)
        env = {"A2A_TRIO_CONFIG": str(tmp_path / "a2a.toml")}
        server = ServerProcess.start(
            postgres_url(location), tmp_path / "serve.log", env=env, command=serve_command
        )
        worker_log = (tmp_path / "worker.log").open("wb")
        worker = subprocess.Popen(
            [*CLI, "worker"],
            cwd=REPO,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=worker_log,
            stderr=subprocess.STDOUT,
        )
        worker_log.close()  # the child has its own descriptor
        try:
            wait_for_line(server, "serving", within=TIMEOUT)
            deadline = time.monotonic() + TIMEOUT
            while "working for" not in (tmp_path / "worker.log").read_text():
                assert worker.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            # Requests, heartbeats, claims and the push worker retry meanwhile.
            ride_out_an_outage(server, postgres, location.dbname)
        finally:
            worker.terminate()
            worker.wait(TIMEOUT)
            server.stop()
    for output in (server.output(), (tmp_path / "worker.log").read_text()):
        assert "Traceback" not in output, output
        lines = output.splitlines()
        assert len([line for line in lines if "unreachable, retrying" in line]) == 1, output
        assert len([line for line in lines if "reachable again after" in line]) == 1, output
        assert all(LOG_LINE.match(line) for line in lines), output


def test_a_database_outage_under_bare_hypercorn_logs_no_traceback_per_retry(
    postgres: PostgresLocation, tmp_path: Path
) -> None:
    # Served by hypercorn alone, the process logs through hypercorn's and
    # Python's handlers, not a2a-trio's: tasks whose events cannot be stored,
    # heartbeats and wake-ups retried, each used to log its own traceback.
    with fresh_database(postgres) as location:
        (tmp_path / "a2a.toml").write_text(storage(postgres_url(location)) + AGENT)
        env = {"A2A_TRIO_CONFIG": str(tmp_path / "a2a.toml")}
        server = ServerProcess.start(
            postgres_url(location), tmp_path / "serve.log", env=env, app="a2a_trio:app"
        )
        try:
            # Tasks begun while it is away (answered at once), and the retries.
            ride_out_an_outage(server, postgres, location.dbname, returnImmediately=True)
        finally:
            server.stop()
    output = server.output()
    assert "Traceback" not in output, output
    lines = output.splitlines()
    assert len([line for line in lines if "unreachable, retrying" in line]) == 1, output
    assert not [line for line in lines if "cannot connect to PostgreSQL" in line][1:], output

"""The ``a2a-trio`` command line, against real files and real servers.

A command whose process matters (signals, serving, the console script, pipes
and terminals, what a fresh interpreter prints) runs as ``python -m
a2a_trio.cli`` (or as the installed console script) in a child process; one
whose test is about what it prints and does (``card``, ``make-executor``,
``prune``, ``deliveries``, the client verbs against a server, ``--help``, bad
arguments) runs in this process through click's runner (:func:`a2a_here`, or
:func:`a2a_beside` in a worker thread when the server is this process's), which
saves a Python start and a2a_trio's imports each time. Files live in a temporary directory; servers
are ``tests.scripted_app`` or ``tests.push_app`` served by hypercorn in a child
process, or ``a2a-trio serve`` itself. Exit codes follow
the docstring of ``a2a_trio/cli/__init__.py``: 0 success, 1 the command ran and
found a failure, 2 the command could not run (bad arguments, bad config).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import trio
from click.testing import CliRunner

from a2a_trio.cli import main
from a2a_trio.client import A2AClient
from a2a_trio.protocol import (
    AgentCard,
    SendMessageConfiguration,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    utcnow,
)
from a2a_trio.store import Store
from a2a_trio.store.factory import store_at

from .conftest import user_message
from .postgres import is_postgres, sqlite_url
from .postgres import rows as database_rows
from .servers import (
    CARD_PATH,
    STARTUP_TIMEOUT,
    STOP_TIMEOUT,
    ServerProcess,
    free_port,
    listens_on,
)
from .webhooks import Reply, webhook_receiver
from .writes import create

CLI = [sys.executable, "-m", "a2a_trio.cli"]
#: The installed console script, next to the interpreter running the tests.
CONSOLE_SCRIPT = Path(sys.executable).parent / "a2a-trio"
COMMAND_TIMEOUT = 60.0
BINDINGS = ["jsonrpc", "rest", "grpc"]
binding_param = pytest.mark.parametrize("binding", BINDINGS)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment minus the variables that would point a command elsewhere."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("A2A_TRIO_CONFIG", "A2A_TRIO_DATABASE")
    }
    env.update(extra)
    return env


@dataclass
class Result:
    status: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def a2a(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """Run ``a2a-trio ARGS`` in ``cwd`` and wait for it."""
    done = subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env=env or clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def a2a_here(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """:func:`a2a` in this process (click's runner): for tests of what a command prints
    and does, not of its process. The same exit status, standard output and error (an
    exception other than an exit is raised here, as a traceback would be printed);
    ``sys.path`` and the modules imported from ``cwd`` are put back afterwards.

    A subprocess costs a Python start and a2a_trio's imports (1-2 s, several under
    load): this file held one xdist worker for minutes.
    """
    path, modules = list(sys.path), set(sys.modules)
    variables: dict[str, str | None] = {"A2A_TRIO_CONFIG": None, "A2A_TRIO_DATABASE": None}
    try:
        with contextlib.chdir(cwd):
            done = CliRunner().invoke(
                main, list(args), env={**variables, **(env or {})}, prog_name="a2a-trio"
            )
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(cwd)):
                del sys.modules[name]
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return Result(done.exit_code, done.stdout, done.stderr)


async def a2a_beside(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """:func:`a2a_here` in a worker thread: servers of this trio run keep serving meanwhile.

    For a command that talks to a server of the test's own process (a
    subprocess would cost a Python start, tens of seconds on a loaded machine).
    """
    return await trio.to_thread.run_sync(functools.partial(a2a_here, *args, cwd=cwd, env=env))


async def a2a_async(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Result:
    """:func:`a2a` without blocking the trio run (servers in this run keep serving)."""
    with trio.fail_after(COMMAND_TIMEOUT):
        done = await trio.run_process(
            [*CLI, *args],
            cwd=cwd,
            env=env or clean_env(),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


def rows(database: Path | str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """Read the server's database (a SQLite file or a URL) directly, as an operator would."""
    return database_rows(
        sqlite_url(database) if isinstance(database, Path) else database, query, *args
    )


def post_message(url: str, text: str, **fields: str) -> str:
    """Send a message with a plain JSON-RPC call (setup, not the CLI under test); the task id."""
    task_id: str = message_task(url, text, timeout=COMMAND_TIMEOUT, **fields)["id"]
    return task_id


def message_task(
    url: str, text: str, *, timeout: float = COMMAND_TIMEOUT, **fields: str
) -> dict[str, Any]:
    """:func:`post_message`'s task, whole (KeyError when the answer holds none)."""
    response = httpx.post(
        url + "/jsonrpc",
        headers={"A2A-Version": "1.0"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": user_message(text, **fields)},
        },
        timeout=timeout,
    )
    task: dict[str, Any] = response.json()["result"]["task"]
    return task


# --- help, version, usage ---------------------------------------------------------------

COMMANDS = [
    "make-executor",
    "card",
    "prune",
    "serve",
    "deliveries",
    "send",
    "get",
    "list",
    "cancel",
    "subscribe",
    "discover",
    "tck",
    "worker",
    "watch",
]


def test_help_lists_every_command(tmp_path: Path) -> None:
    result = a2a("--help", cwd=tmp_path)
    assert result.status == 0
    listed = re.findall(r"^  (\S+)", result.out.split("Commands:", 1)[1], re.M)
    assert sorted(listed) == sorted(COMMANDS)


def test_help_of_every_command_exits_0(tmp_path: Path) -> None:
    # In this process: fourteen Python starts at once (a subprocess each) took
    # longer than COMMAND_TIMEOUT on a machine at load 15. What --help prints
    # is the command's, not the process's (test_help_lists_every_command and
    # test_console_script_runs_the_same_program start one).
    for command in COMMANDS:
        result = a2a_here(command, "--help", cwd=tmp_path)
        assert result.status == 0, (command, result.err)
        assert result.out.startswith(f"Usage: a2a-trio {command} "), command
    assert os.listdir(tmp_path) == []  # asking for help touches nothing


def test_console_script_runs_the_same_program(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "--version"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0
    assert re.fullmatch(r"a2a-trio, version \d+\.\d+\.\d+\n", done.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["no-such-command"],
        ["send", "http://127.0.0.1:9"],
        ["send", "http://127.0.0.1:9", "hello", "--binding", "soap"],
        ["send", "http://127.0.0.1:9", "hello", "-H", "no colon here"],
        ["prune", "--days", "-1"],
    ],
    ids=["unknown-command", "missing-text", "unknown-binding", "malformed-header", "negative-days"],
)
def test_bad_arguments_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = a2a_here(*args, cwd=tmp_path)
    assert result.status == 2
    assert "Error:" in result.err
    assert list(tmp_path.iterdir()) == []


# --- make-executor ----------------------------------------------------------------------


def test_make_executor_writes_a_package_and_a_skeleton(tmp_path: Path) -> None:
    result = a2a_here("make-executor", "Hello", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.lines[0] == "wrote a2a_agents/hello.py"
    assert 'executor = "a2a_agents.hello:HelloExecutor", card = "a2a_agents.hello:card"' in (
        result.out
    )
    assert sorted(p.name for p in (tmp_path / "a2a_agents").iterdir()) == [
        "__init__.py",
        "hello.py",
    ]
    source = (tmp_path / "a2a_agents" / "hello.py").read_text()
    assert "class HelloExecutor(AgentExecutor):" in source
    compile(source, "hello.py", "exec")


def test_make_executor_names_the_module_in_snake_case(tmp_path: Path) -> None:
    result = a2a_here("make-executor", "TravelPlanner", "--dir", "agents", cwd=tmp_path)
    assert result.status == 0, result.err
    assert "class TravelPlannerExecutor(" in (tmp_path / "agents" / "travel_planner.py").read_text()


def test_make_executor_refuses_to_overwrite(tmp_path: Path) -> None:
    assert a2a_here("make-executor", "Hello", cwd=tmp_path).status == 0
    target = tmp_path / "a2a_agents" / "hello.py"
    target.write_text(target.read_text() + "# my own work\n")
    before = target.read_bytes()

    result = a2a_here("make-executor", "Hello", cwd=tmp_path)

    assert result.status == 1
    assert "a2a_agents/hello.py exists; not overwriting it" in result.err
    assert target.read_bytes() == before


@pytest.mark.parametrize("name", ["hello", "Hello-World"])
def test_make_executor_wants_a_camel_case_identifier(tmp_path: Path, name: str) -> None:
    result = a2a_here("make-executor", name, cwd=tmp_path)
    assert result.status == 2
    assert "NAME must be a CamelCase identifier" in result.err
    assert not (tmp_path / "a2a_agents").exists()


HELLO_CONFIG = """\
[storage]
path = "hello.db"

[[agents]]
name = "hello"
executor = "a2a_agents.hello:HelloExecutor"
card = "a2a_agents.hello:card"
"""


@dataclass
class Served:
    """``a2a-trio serve`` running in a child process of its own session.

    Its output goes to files, not pipes: the access log writes a line per
    request, and a pipe nobody reads would fill up and stall the server.
    """

    process: subprocess.Popen[str]
    url: str
    out: IO[str]
    err: IO[str]
    ended: tuple[int | None, str, str] | None = None

    @classmethod
    def start(cls, cwd: Path, *args: str, command: list[str] = CLI, tries: int = 3) -> Served:
        """Serve on a free port, once the server listens there.

        A port free when chosen may be bound by another test's server first:
        this one then exits, address in use, and is started again on another
        port; the card is asked for only once this server's own session
        listens on the port (:func:`.servers.listens_on`), so another server
        never answers for it.
        """
        port = free_port()
        # wait() closes them, and every test gets there: by stop(), or the fixture.
        out = tempfile.TemporaryFile("w+")  # noqa: SIM115
        err = tempfile.TemporaryFile("w+")  # noqa: SIM115
        process = subprocess.Popen(
            [*command, "serve", "--bind", f"127.0.0.1:{port}", *args],
            cwd=cwd,
            env=clean_env(PYTHONUNBUFFERED="1"),  # what it printed survives a kill
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        served = cls(process, f"http://127.0.0.1:{port}", out, err)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                _, printed, complaint = served.wait()
                if "address already in use" in complaint and tries > 1:
                    return cls.start(cwd, *args, command=command, tries=tries - 1)
                pytest.fail(f"serve exited with {process.returncode}:\n{printed}{complaint}")
            if listens_on(process.pid, port):
                try:
                    if httpx.get(served.url + CARD_PATH, timeout=1.0).status_code == 200:
                        return served
                except httpx.TransportError:
                    pass
            if time.monotonic() > deadline:
                served.stop()
                pytest.fail("serve did not answer in time")
            time.sleep(0.05)

    def stop(
        self, sig: int = signal.SIGKILL, timeout: float = STOP_TIMEOUT
    ) -> tuple[int | None, str, str]:
        """Send ``sig``; returns the exit status and everything printed.

        The status is None when the server had not ended ``timeout`` seconds
        later (it is then killed).
        """
        self.process.send_signal(sig)
        return self.wait(timeout)

    def wait(self, timeout: float = STOP_TIMEOUT) -> tuple[int | None, str, str]:
        """Like :meth:`stop`, without sending anything."""
        if self.ended is not None:
            return self.ended
        status: int | None
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT)
            status = None
        out, err = (self._read_and_close(output) for output in (self.out, self.err))
        self.ended = (status, out, err)
        return self.ended

    @staticmethod
    def _read_and_close(output: IO[str]) -> str:
        output.seek(0)
        try:
            return output.read()
        finally:
            output.close()


@pytest.fixture
def serving() -> Iterator[list[Served]]:
    """Servers a test starts; whatever is left running at the end is killed."""
    started: list[Served] = []
    yield started
    for served in started:
        if served.process.poll() is None:
            served.stop()
        else:
            served.wait()


def test_the_skeleton_served_from_a_config_answers_a_message(
    tmp_path: Path, serving: list[Served]
) -> None:
    assert a2a_here("make-executor", "Hello", cwd=tmp_path).status == 0
    (tmp_path / "a2a.toml").write_text(HELLO_CONFIG)
    server = Served.start(tmp_path, "--config", "a2a.toml")
    serving.append(server)

    card = AgentCard.model_validate(httpx.get(server.url + CARD_PATH).json())
    assert card.name == "Hello"
    result = a2a_here("send", server.url, "hello there", cwd=tmp_path)
    assert result.status == 0, result.err
    assert re.fullmatch(r"task \S+ TASK_STATE_COMPLETED: hello there", result.out.strip())

    assert rows(tmp_path / "hello.db", "SELECT state FROM tasks") == [("TASK_STATE_COMPLETED",)]
    _, _, err = server.stop()  # logged on standard error, a line with time, level, logger
    assert f" INFO a2a_trio.cli: serving hello on {server.url}\n" in err


def test_the_console_script_imports_agents_from_the_working_directory(tmp_path: Path) -> None:
    assert a2a_here("make-executor", "Hello", cwd=tmp_path).status == 0
    (tmp_path / "a2a.toml").write_text(HELLO_CONFIG)
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "card"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "Hello"


# --- card -------------------------------------------------------------------------------

ECHO_CONFIG = """\
[storage]
path = "cards.db"

[[agents]]
name = "echo"
prefix = "/echo"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"
"""


def test_card_prints_the_served_card_and_exits_0_when_valid(tmp_path: Path) -> None:
    (tmp_path / "a2a.toml").write_text(ECHO_CONFIG)
    result = a2a_here("card", cwd=tmp_path)
    assert result.status == 0, result.err
    card = json.loads(result.out)
    assert card["name"] == "Echo Agent"
    assert [i["url"] for i in card["supportedInterfaces"]] == [
        "http://127.0.0.1:8000/echo/jsonrpc",
        "http://127.0.0.1:8000/echo/rest",
        "127.0.0.1:8000",  # gRPC, where the agent is its tenant
    ]
    assert card["supportedInterfaces"][2]["tenant"] == "echo"
    assert "the card of echo is valid" in result.err


def test_card_without_a_config_shows_the_bundled_echo_agent(tmp_path: Path) -> None:
    result = a2a_here("card", cwd=tmp_path)
    assert result.status == 0, result.err
    assert json.loads(result.out)["name"] == "Echo Agent"
    assert result.err.strip() == "the card of echo is valid"
    assert a2a_here("card", "echo", cwd=tmp_path).status == 0


def test_card_base_url_sets_the_interface_addresses(tmp_path: Path) -> None:
    (tmp_path / "agents.toml").write_text(ECHO_CONFIG)
    result = a2a_here(
        "card", "echo", "--config", "agents.toml", "--base-url", "https://a.example", cwd=tmp_path
    )
    assert result.status == 0, result.err
    urls = [i["url"] for i in json.loads(result.out)["supportedInterfaces"]]
    assert urls == [
        "https://a.example/echo/jsonrpc",
        "https://a.example/echo/rest",
        "a.example:443",
    ]


def card_config(card_lines: str) -> str:
    """A config whose one agent has an inline card: the common fields plus ``card_lines``."""
    return f"""\
[storage]
path = "cards.db"

[[agents]]
name = "odd"
executor = "a2a_trio.echo:EchoExecutor"

[agents.card]
name = "Odd"
description = "A card with a problem."
version = "1.0.0"
defaultOutputModes = ["text/plain"]
{card_lines}
"""


SKILL = 'skills = [{id = "s", name = "S", description = "A skill.", tags = ["t"]}]'


@pytest.mark.parametrize(
    ("card_lines", "problem"),
    [
        (
            'defaultInputModes = ["text/plain"]\nskills = []',
            "skills: at least one skill is required",
        ),
        (
            f'defaultInputModes = ["text plain"]\n{SKILL}',
            "defaultInputModes: 'text plain' is not a media type",
        ),
        (
            f'defaultInputModes = ["text/plain"]\n{SKILL}\n'
            "securityRequirements = [{schemes = {bearer = {list = []}}}]",
            "securityRequirements: scheme 'bearer' is not declared in securitySchemes",
        ),
    ],
    ids=["no-skills", "bad-media-type", "undeclared-scheme"],
)
def test_card_lists_the_problems_of_an_invalid_card_and_exits_1(
    tmp_path: Path, card_lines: str, problem: str
) -> None:
    (tmp_path / "a2a.toml").write_text(card_config(card_lines))
    result = a2a_here("card", cwd=tmp_path)
    assert result.status == 1, result.err
    assert json.loads(result.out)["name"] == "Odd"  # printed all the same
    assert "the card of odd is invalid:" in result.err
    assert f"  - {problem}" in result.err.splitlines()


def test_card_of_an_unknown_agent_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "a2a.toml").write_text(ECHO_CONFIG)
    result = a2a_here("card", "nobody", cwd=tmp_path)
    assert result.status == 2
    assert "no agent named 'nobody'; agents: echo" in result.err


def test_card_with_a_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    result = a2a_here("card", "--config", "missing.toml", cwd=tmp_path)
    assert result.status == 2
    assert "configuration file missing.toml does not exist" in result.err


# --- prune ------------------------------------------------------------------------------

PRUNE_CONFIG = """\
[storage]
path = "tasks.db"
"""


async def store_task(store: Store, task_id: str, state: TaskState, days_ago: float) -> None:
    """A task whose last update was ``days_ago`` days ago, written as the server writes it."""
    task = Task(
        id=task_id,
        context_id="ctx",
        status=TaskStatus(state=state, timestamp=utcnow() - timedelta(days=days_ago)),
    )
    await create(store, task, agent="default", owner="anonymous")


async def fill_aged(database: str) -> None:
    """Finished and unfinished tasks of different ages, one with a push config."""
    store = store_at(database)
    await store.open()
    try:
        await store_task(store, "old-completed", TaskState.COMPLETED, 40)
        await store_task(store, "old-canceled", TaskState.CANCELED, 10)
        await store_task(store, "recent-completed", TaskState.COMPLETED, 1)
        await store_task(store, "old-working", TaskState.WORKING, 40)
        await store_task(store, "old-input-required", TaskState.INPUT_REQUIRED, 40)
        await store.save_push_config(
            "default",
            "anonymous",
            TaskPushNotificationConfig(id="hook", task_id="old-completed", url="https://x.test/"),
        )
    finally:
        await store.aclose()


@pytest.fixture
def aged_tasks(tmp_path: Path, database: str) -> str:
    """The configured database, with finished and unfinished tasks of different ages.

    ``a2a.toml`` names it: ``path = "tasks.db"`` (not the default ``a2a.db``) or
    the PostgreSQL URL. Returns its URL.
    """
    if is_postgres(database):
        (tmp_path / "a2a.toml").write_text(f'[storage]\nurl = "{database}"\n')
    else:
        (tmp_path / "a2a.toml").write_text(PRUNE_CONFIG)
        database = sqlite_url(tmp_path / "tasks.db")
    trio.run(fill_aged, database)
    return database


def everything(database: str) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: rows(database, f"SELECT * FROM {table} ORDER BY 1, 2")
        for table in ("tasks", "task_events", "push_configs", "push_outbox", "push_attempts")
    }


def test_prune_deletes_finished_tasks_older_than_days_and_keeps_the_rest(
    tmp_path: Path, aged_tasks: str
) -> None:
    result = a2a_here("prune", "--days", "7", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.out.strip() == (
        "removed 2 tasks, 2 events, 1 push configs, 0 notifications and 0 delivery attempts "
        "(finished more than 7 days ago)"
    )
    assert sorted(rows(aged_tasks, "SELECT id FROM tasks")) == [
        ("old-input-required",),
        ("old-working",),
        ("recent-completed",),
    ]
    assert sorted(rows(aged_tasks, "SELECT DISTINCT task_id FROM task_events")) == sorted(
        rows(aged_tasks, "SELECT id FROM tasks")
    )
    assert rows(aged_tasks, "SELECT * FROM push_configs") == []


def test_prune_dry_run_counts_and_deletes_nothing(tmp_path: Path, aged_tasks: str) -> None:
    before = everything(aged_tasks)
    result = a2a_here("prune", "--days", "7", "--dry-run", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.out.startswith("would remove 2 tasks, 2 events, 1 push configs,")
    assert everything(aged_tasks) == before


def test_prune_keeps_finished_tasks_younger_than_the_default_week(
    tmp_path: Path, aged_tasks: str
) -> None:
    result = a2a_here("prune", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.out.startswith("removed 2 tasks,")
    assert ("recent-completed",) in rows(aged_tasks, "SELECT id FROM tasks")


def test_prune_database_prunes_the_database_it_names(tmp_path: Path, aged_tasks: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # no a2a.toml here: only --database says which database
    result = a2a_here("prune", "--days", "7", "--database", aged_tasks, cwd=elsewhere)
    assert result.status == 0, result.err
    assert result.out.startswith("removed 2 tasks, 2 events, 1 push configs,")
    assert ("old-completed",) not in rows(aged_tasks, "SELECT id FROM tasks")
    assert list(elsewhere.iterdir()) == []


def test_prune_database_takes_a_plain_path_to_a_sqlite_file(tmp_path: Path) -> None:
    database = tmp_path / "tasks.db"
    trio.run(fill_aged, sqlite_url(database))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = a2a_here("prune", "--days", "7", "--database", str(database), cwd=elsewhere)
    assert result.status == 0, result.err
    assert result.out.startswith("removed 2 tasks, 2 events, 1 push configs,")
    assert ("old-completed",) not in rows(database, "SELECT id FROM tasks")
    assert list(elsewhere.iterdir()) == []


def test_prune_database_overrides_the_configured_one(tmp_path: Path, aged_tasks: str) -> None:
    other = tmp_path / "other.db"
    result = a2a_here("prune", "--days", "7", "--database", f"sqlite:///{other}", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.out.startswith("removed 0 tasks,")
    assert not other.exists()  # a reader never creates a database
    assert len(rows(aged_tasks, "SELECT id FROM tasks")) == 5


@pytest.mark.parametrize("command", ["prune", "deliveries"])
def test_a_database_url_that_cannot_be_used_is_a_usage_error_naming_the_option(
    tmp_path: Path, command: str
) -> None:
    result = a2a_here(command, "--database", "mysql://db.internal/a2a", cwd=tmp_path)
    assert result.status == 2
    assert "--database: unsupported scheme 'mysql'" in result.err
    assert "Traceback" not in result.err


def test_deliveries_database_reads_the_database_it_names(tmp_path: Path, database: str) -> None:
    trio.run(queue_a_delivery, database)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    named = a2a_here("deliveries", "--database", database, cwd=elsewhere)
    assert named.status == 0, named.err
    assert re.fullmatch(
        r"\s*\d+  pending +task t-hooked  event 1  config hook  attempts 0", named.lines[0]
    ), named.lines
    assert a2a_here("deliveries", cwd=elsewhere).lines == ["no deliveries"]  # ./a2a.db: none


async def queue_a_delivery(database: str) -> None:
    """One task with a webhook config, its first event queued for it."""
    store = store_at(database)
    await store.open()
    try:
        task = Task(id="t-hooked", context_id="ctx", status=TaskStatus(state=TaskState.WORKING))
        config = TaskPushNotificationConfig(id="hook", task_id="t-hooked", url="https://x.test/")
        await create(store, task, agent="default", owner="anonymous", push_config=config, push=True)
    finally:
        await store.aclose()


def test_prune_days_0_removes_every_finished_task_a_server_made(
    tmp_path: Path, database: str
) -> None:
    server = ServerProcess.start(database, tmp_path / "server.log")
    try:
        post_message(server.url, "echo one")
        post_message(server.url, "echo two")
        waiting = post_message(server.url, "ask me")
        env = clean_env(A2A_TRIO_DATABASE=database)
        result = a2a_here("prune", "--days", "0", cwd=tmp_path, env=env)
        assert result.status == 0, result.err
        assert result.out.startswith("removed 2 tasks,")
        assert rows(database, "SELECT id FROM tasks") == [(waiting,)]
        # The server goes on serving what is left.
        kept = a2a_here("get", server.url, waiting, cwd=tmp_path)
        assert kept.out.startswith(f"task {waiting} TASK_STATE_INPUT_REQUIRED")
    finally:
        server.stop()


# --- serve ------------------------------------------------------------------------------


def test_serve_answers_on_its_bind(tmp_path: Path, serving: list[Served]) -> None:
    server = Served.start(tmp_path)  # no a2a.toml: the bundled echo agent on ./a2a.db
    serving.append(server)
    response = httpx.post(
        server.url + "/jsonrpc",
        headers={"A2A-Version": "1.0"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": user_message("bound and answering")},
        },
    )
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "bound and answering"}]

    assert rows(tmp_path / "a2a.db", "SELECT id FROM tasks") == [(task["id"],)]
    _, _, err = server.stop()
    assert f" INFO a2a_trio.cli: serving echo on {server.url}\n" in err


@contextmanager
def busy(url: str, clients: int = 4) -> Iterator[None]:
    """Keep the server busy with card requests from ``clients`` threads until the block ends."""
    stop = threading.Event()
    answered = threading.Semaphore(0)

    def fetch_cards() -> None:
        with httpx.Client(timeout=2.0) as http:
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    http.get(url + CARD_PATH)
                    answered.release()

    threads = [threading.Thread(target=fetch_cards, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(20 * clients):  # under way on every connection
            assert answered.acquire(timeout=STARTUP_TIMEOUT)
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(STOP_TIMEOUT)


def test_ctrl_c_stops_a_busy_server_with_exit_0(tmp_path: Path, serving: list[Served]) -> None:
    for attempt in range(5):  # where the interrupt lands is luck: try several times
        server = Served.start(tmp_path)
        serving.append(server)
        with busy(server.url):
            server.process.send_signal(signal.SIGINT)
        status, _, err = server.wait(timeout=4.0)
        assert status == 0, f"attempt {attempt}: exit status {status}\n{err[-3000:]}"


def test_serve_logs_each_request(tmp_path: Path, serving: list[Served]) -> None:
    server = Served.start(tmp_path)
    serving.append(server)
    httpx.get(server.url + "/no/such/page?api_key=kept-out-of-the-log")
    post_message(server.url, "leave a trace")
    _, _, out = server.stop(signal.SIGTERM)  # the log, access lines too, is on standard error
    assert re.search(r'INFO hypercorn.access: .*"GET /no/such/page 1\.1" 404 ', out), out
    assert re.search(r'"POST /jsonrpc 1\.1" 200 ', out), out
    assert "kept-out-of-the-log" not in out


def test_serve_shuts_down_gracefully_on_sigterm(tmp_path: Path, serving: list[Served]) -> None:
    server = Served.start(tmp_path)
    serving.append(server)
    status, _, _ = server.stop(signal.SIGTERM)
    assert status == 0


def test_serve_on_a_database_another_server_serves_exits_1_saying_why(
    tmp_path: Path, serving: list[Served]
) -> None:
    first = Served.start(tmp_path)
    serving.append(first)
    result = a2a("serve", "--bind", f"127.0.0.1:{free_port()}", cwd=tmp_path)
    assert result.status == 1
    assert "Traceback" not in result.err
    assert result.err.splitlines()[-1].startswith(
        "error: a2a.db is already served by another process (pid "
    )
    assert a2a_here("send", first.url, "still here", cwd=tmp_path).status == 0


def test_serve_with_a_bad_config_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "a2a.toml").write_text("[storage]\npath = 3\n")
    result = a2a("serve", "--bind", f"127.0.0.1:{free_port()}", cwd=tmp_path)
    assert result.status == 2
    assert "storage.path" in result.err


# --- the client verbs against a live server ---------------------------------------------


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The scripted agent (tests.scripted_app) served by hypercorn in a child process."""
    directory = tmp_path_factory.mktemp("cli-agent")
    server = ServerProcess.start(directory / "a2a.db", directory / "server.log")
    try:
        yield server
    finally:
        server.stop()


TASK_LINE = re.compile(r"^task (?P<id>\S+) (?P<state>TASK_STATE_\w+)(?:: (?P<text>.*))?$")


def task_line(line: str) -> dict[str, str]:
    match = TASK_LINE.match(line)
    assert match, line
    return match.groupdict()


@binding_param
def test_send_prints_the_answer(tmp_path: Path, agent: ServerProcess, binding: str) -> None:
    result = a2a_here("send", agent.url, "echo hello there", "--binding", binding, cwd=tmp_path)
    assert result.status == 0, result.err
    assert len(result.lines) == 1
    line = task_line(result.lines[0])
    assert (line["state"], line["text"]) == ("TASK_STATE_COMPLETED", "hello there")


def test_send_into_pipes_writes_the_answer_and_nothing_else(
    tmp_path: Path, agent: ServerProcess
) -> None:
    # Standard error is a pipe here, as in a script or `2>log`: no progress line.
    result = a2a("send", agent.url, "echo piped", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.err == ""
    assert task_line(result.out.strip())["text"] == "piped"


@binding_param
def test_send_events_prints_each_event(tmp_path: Path, agent: ServerProcess, binding: str) -> None:
    result = a2a_here(
        "send", agent.url, "echo hello there", "--events", "--binding", binding, cwd=tmp_path
    )
    assert result.status == 0, result.err
    assert task_line(result.lines[0])["state"] == "TASK_STATE_SUBMITTED"
    assert result.lines[1:] == [
        "status TASK_STATE_WORKING",
        "artifact: hello there",
        "status TASK_STATE_COMPLETED",
    ]


def test_send_json_prints_one_stream_response_per_line(
    tmp_path: Path, agent: ServerProcess
) -> None:
    result = a2a_here("send", agent.url, "echo as json", "--stream", "--json", cwd=tmp_path)
    assert result.status == 0, result.err
    events = [StreamResponse.model_validate_json(line) for line in result.lines]
    assert [type(event.payload).__name__ for event in events] == [
        "Task",
        "TaskStatusUpdateEvent",
        "TaskArtifactUpdateEvent",
        "TaskStatusUpdateEvent",
    ]


def test_send_prints_a_direct_message(tmp_path: Path, agent: ServerProcess) -> None:
    result = a2a_here("send", agent.url, "reply hey", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.lines == ["message: you said: hey"]


def test_send_task_continues_a_task(tmp_path: Path, agent: ServerProcess) -> None:
    asked = {"id": post_message(agent.url, "ask me")}
    result = a2a_here("send", agent.url, "Ada", "--task", asked["id"], cwd=tmp_path)
    assert result.status == 0, result.err
    line = task_line(result.lines[0])
    assert (line["id"], line["state"], line["text"]) == (
        asked["id"],
        "TASK_STATE_COMPLETED",
        "continued with: Ada",
    )


def test_send_shows_the_question_of_a_task_that_needs_input(
    tmp_path: Path, agent: ServerProcess
) -> None:
    result = a2a_here("send", agent.url, "ask me", cwd=tmp_path)
    assert "What is your name?" in result.out


def test_send_to_nothing_listening_exits_1(tmp_path: Path) -> None:
    result = a2a_here("send", f"http://127.0.0.1:{free_port()}", "hello", cwd=tmp_path)
    assert result.status == 1
    assert result.err.startswith("error: ")


@binding_param
def test_get_shows_a_task(tmp_path: Path, agent: ServerProcess, binding: str) -> None:
    sent = {"id": post_message(agent.url, "echo keep me")}
    result = a2a_here("get", agent.url, sent["id"], "--binding", binding, cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.lines == [f"task {sent['id']} TASK_STATE_COMPLETED: keep me"]
    as_json = a2a_here("get", agent.url, sent["id"], "--json", "--history", "1", cwd=tmp_path)
    task = Task.model_validate_json(as_json.out)
    assert task.id == sent["id"] and task.history is not None and len(task.history) == 1


def test_get_of_an_unknown_task_exits_1(tmp_path: Path, agent: ServerProcess) -> None:
    result = a2a_here("get", agent.url, "no-such-task", "--binding", "rest", cwd=tmp_path)
    assert result.status == 1
    assert result.err.startswith("error -32001 TaskNotFoundError: ")
    assert result.out == ""


def test_list_filters_by_context_and_state_and_pages(tmp_path: Path, agent: ServerProcess) -> None:
    context = str(uuid.uuid4())

    sent = a2a_here("send", agent.url, "echo one", "--context", context, cwd=tmp_path)
    done = [task_line(sent.lines[0])["id"], post_message(agent.url, "echo two", contextId=context)]
    waiting = post_message(agent.url, "ask three", contextId=context)

    listed = a2a_here("list", agent.url, "--context", context, cwd=tmp_path)
    assert listed.status == 0, listed.err
    assert listed.lines[-1] == "3 of 3 tasks"
    assert [line.split()[0] for line in listed.lines[:-1]] == [waiting, *done[::-1]]
    assert f"{waiting}  TASK_STATE_INPUT_REQUIRED  context {context}" in listed.lines

    completed = a2a_here(
        "list", agent.url, "--context", context, "--state", "completed", cwd=tmp_path
    )
    assert completed.lines[-1] == "2 of 2 tasks"

    first = a2a_here("list", agent.url, "--context", context, "--page-size", "2", cwd=tmp_path)
    summary = re.fullmatch(r"2 of 3 tasks; next page: --page-token (\S+)", first.lines[-1])
    assert summary, first.lines[-1]
    second = a2a_here(
        "list", agent.url, "--context", context, "--page-token", summary.group(1), cwd=tmp_path
    )
    assert second.lines[-1] == "1 of 3 tasks"
    assert [line.split()[0] for line in first.lines[:-1] + second.lines[:-1]] == [
        waiting,
        *done[::-1],
    ]


def test_list_with_an_unknown_state_is_a_usage_error(tmp_path: Path, agent: ServerProcess) -> None:
    result = a2a_here("list", agent.url, "--state", "bogus", cwd=tmp_path)
    assert result.status == 2


@binding_param
def test_cancel_cancels_a_running_task(tmp_path: Path, agent: ServerProcess, binding: str) -> None:
    held = a2a_here("send", agent.url, "hold", "--no-wait", cwd=tmp_path)
    assert held.status == 0, held.err
    task = task_line(held.lines[0])
    assert task["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")

    result = a2a_here("cancel", agent.url, task["id"], "--binding", binding, cwd=tmp_path)
    assert result.status == 0, result.err
    assert task_line(result.lines[0])["state"] == "TASK_STATE_CANCELED"

    again = a2a_here("cancel", agent.url, task["id"], "--binding", binding, cwd=tmp_path)
    assert again.status == 1
    assert again.err.startswith("error -32002 TaskNotCancelableError: ")


@binding_param
async def test_subscribe_follows_a_task_until_it_ends(
    tmp_path: Path, agent: ServerProcess, binding: str
) -> None:
    asked = {"id": post_message(agent.url, "ask me")}
    with trio.fail_after(COMMAND_TIMEOUT):
        process = await trio.lowlevel.open_process(
            [*CLI, "subscribe", agent.url, asked["id"], "--binding", binding],
            cwd=tmp_path,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert process.stdout is not None
        output = b""
        try:
            while b"\n" not in output:  # the snapshot comes first
                chunk = await process.stdout.receive_some()
                assert chunk, "subscribe ended before printing the task"
                output += chunk
            follow_up = await a2a_beside(
                "send", agent.url, "Ada", "--task", asked["id"], cwd=tmp_path
            )
            assert follow_up.status == 0, follow_up.err
            while chunk := await process.stdout.receive_some():
                output += chunk
            await process.wait()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                await process.stdout.aclose()
    assert process.returncode == 0
    assert output.decode().splitlines() == [
        f"task {asked['id']} TASK_STATE_INPUT_REQUIRED: What is your name?",
        "status TASK_STATE_WORKING",
        "artifact: continued with: Ada",
        "status TASK_STATE_COMPLETED: done",
    ]


def test_subscribe_last_event_id_replays_what_came_after(
    tmp_path: Path, agent: ServerProcess
) -> None:
    asked = {"id": post_message(agent.url, "ask me")}
    post_message(agent.url, "Ada", taskId=asked["id"])
    # Events 1 and 2 are the new task and WORKING; the rest comes again.
    result = a2a_here("subscribe", agent.url, asked["id"], "--last-event-id", "2", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.lines == [
        "status TASK_STATE_INPUT_REQUIRED: What is your name?",
        "status TASK_STATE_WORKING",
        "artifact: continued with: Ada",
        "status TASK_STATE_COMPLETED: done",
    ]


def test_subscribe_to_a_finished_task_exits_1(tmp_path: Path, agent: ServerProcess) -> None:
    sent = {"id": post_message(agent.url, "echo over")}
    result = a2a_here("subscribe", agent.url, sent["id"], cwd=tmp_path)
    assert result.status == 1
    assert result.err.startswith("error -32004 UnsupportedOperationError: ")
    assert len(result.err.splitlines()) == 1


def test_discover_prints_a_valid_card_and_exits_0(tmp_path: Path, agent: ServerProcess) -> None:
    result = a2a_here("discover", agent.url, cwd=tmp_path)
    assert result.status == 0, result.err
    card = AgentCard.model_validate(json.loads(result.out))
    assert card.name == "Test Agent"
    assert [i.url for i in card.supported_interfaces or []] == [
        agent.url + "/jsonrpc",
        agent.url + "/rest",
        agent.url.removeprefix("http://"),
    ]
    assert result.err.strip() == "the card is valid"


async def test_discover_lists_the_problems_of_an_invalid_card_and_exits_1(tmp_path: Path) -> None:
    invalid = {
        "name": "Half an agent",
        "description": "It has no skills and no interfaces.",
        "version": "1.0.0",
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }
    card_reply = Reply(
        headers={"content-type": "application/json"}, body=json.dumps(invalid).encode()
    )
    async with webhook_receiver(default=card_reply) as host:
        result = await a2a_beside("discover", host.base_url, cwd=tmp_path)
        assert [request.path for request in host.requests] == [CARD_PATH]
    assert result.status == 1
    assert json.loads(result.out)["name"] == "Half an agent"
    assert result.err.splitlines()[-3:] == [
        "the card is invalid:",
        "  - skills: at least one skill is required",
        "  - supportedInterfaces: at least one interface is required",
    ]


def test_discover_of_nothing_listening_exits_1(tmp_path: Path) -> None:
    result = a2a_here("discover", f"http://127.0.0.1:{free_port()}", cwd=tmp_path)
    assert result.status == 1
    assert result.err.startswith("error: ")


# --- deliveries -------------------------------------------------------------------------


async def send_with_webhook(server: ServerProcess, hook_url: str) -> str:
    """An echo task whose every event goes to ``hook_url``; returns its id."""
    configuration = SendMessageConfiguration(
        task_push_notification_config=TaskPushNotificationConfig(id="hook", url=hook_url)
    )
    async with await A2AClient.connect(server.url) as client:
        task = await client.send_message("echo pushed", configuration=configuration)
    assert isinstance(task, Task)
    return task.id


async def until_settled(database: str, task_id: str, count: int) -> list[tuple[Any, ...]]:
    """Wait until ``count`` notifications of the task are no longer pending; returns them."""
    with trio.fail_after(COMMAND_TIMEOUT):
        while True:
            found = rows(
                database,
                "SELECT id, state, attempts FROM push_outbox WHERE task_id = ? ORDER BY id",
                task_id,
            )
            if len(found) == count and all(state != "pending" for _, state, _ in found):
                return found
            await trio.sleep(0.05)


async def test_deliveries_lists_every_attempt_after_a_delivery(
    tmp_path: Path, database: str
) -> None:
    env = clean_env(A2A_TRIO_DATABASE=database)
    async with webhook_receiver() as hook:
        server = ServerProcess.start(database, tmp_path / "server.log", app="tests.push_app:app")
        try:
            task_id = await send_with_webhook(server, hook.url)
            settled = await until_settled(database, task_id, 4)
            result = await a2a_beside("deliveries", task_id, cwd=tmp_path, env=env)
        finally:
            server.stop()
    assert [state for _, state, _ in settled] == ["delivered"] * 4
    assert result.status == 0, result.err
    assert len(result.lines) == 8  # a line per notification and one per attempt
    for (outbox_id, _, _), (row, attempt) in zip(
        settled, zip(result.lines[::2], result.lines[1::2], strict=True), strict=True
    ):
        assert re.fullmatch(
            rf"\s*{outbox_id}  delivered task {task_id}  event \d+  config hook  attempts 1", row
        ), row
        assert re.fullmatch(r"\s+#1 \S+  HTTP 200  \d+ ms", attempt), attempt
    assert len(hook.requests) == 4


async def test_deliveries_retry_requeues_a_dead_letter(tmp_path: Path, database: str) -> None:
    env = clean_env(A2A_TRIO_DATABASE=database)
    async with webhook_receiver(default=Reply(503)) as hook:
        server = ServerProcess.start(
            database,
            tmp_path / "server.log",
            app="tests.push_app:app",
            env={"A2A_TRIO_PUSH_MAX_ATTEMPTS": "1"},
        )
        try:
            task_id = await send_with_webhook(server, hook.url)
            dead = await until_settled(database, task_id, 4)
            assert [state for _, state, _ in dead] == ["failed"] * 4
            listed = await a2a_beside("deliveries", cwd=tmp_path, env=env)
            assert listed.status == 0, listed.err
            assert "last error: HTTP 503 (gave up after 1 attempts)" in listed.lines[0]

            hook.default = Reply(200)
            first = dead[0][0]
            result = await a2a_beside("deliveries", "retry", str(first), cwd=tmp_path, env=env)
            assert result.status == 0, result.err
            assert result.out.strip() == (
                f"delivery {first} queued again; the server delivers it shortly"
            )
            again = await until_settled(database, task_id, 4)
        finally:
            server.stop()
    # The re-queued one is delivered on its second attempt; the others stay dead letters.
    assert again == [(first, "delivered", 2), *dead[1:]]
    assert [r.reply.status for r in hook.requests] == [503] * 4 + [200]
    assert hook.requests[-1].notification_id == hook.requests[0].notification_id


def test_deliveries_retry_of_an_unknown_id_exits_1(tmp_path: Path, database: str) -> None:
    env = clean_env(A2A_TRIO_DATABASE=database)
    result = a2a_here("deliveries", "retry", "999", cwd=tmp_path, env=env)
    assert result.status == 1
    assert result.err.splitlines()[-1] == "no failed delivery 999"


@pytest.mark.parametrize("args", [["retry"], ["retry", "first"], ["one-task", "two-tasks"]])
def test_deliveries_with_bad_arguments_is_a_usage_error(tmp_path: Path, args: list[str]) -> None:
    env = clean_env(A2A_TRIO_DATABASE=str(tmp_path / "push.db"))
    result = a2a_here("deliveries", *args, cwd=tmp_path, env=env)
    assert result.status == 2
    assert "usage: a2a-trio deliveries" in result.err


def test_deliveries_of_an_empty_outbox_says_so(tmp_path: Path, database: str) -> None:
    env = clean_env(A2A_TRIO_DATABASE=database)
    result = a2a_here("deliveries", cwd=tmp_path, env=env)
    assert result.status == 0, result.err
    assert result.lines == ["no deliveries"]


def test_send_shows_progress_on_a_terminal(tmp_path: Path, agent: ServerProcess) -> None:
    """On a TTY the wait is a spinner on standard error, erased before the answer."""
    process, written = with_terminal_stderr(["send", agent.url, "echo spun"], cwd=tmp_path)
    assert process.returncode == 0
    assert b"\r| waiting for the agent" in written
    assert process.stdout.decode().strip().endswith("TASK_STATE_COMPLETED: spun")


def with_terminal_stderr(
    args: list[str], *, cwd: Path
) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run ``a2a-trio ARGS`` with a pseudo-terminal as standard error; what it wrote there."""
    import pty

    leader, follower = pty.openpty()
    try:
        process = subprocess.run(
            [sys.executable, "-m", "a2a_trio.cli", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=60,
        )
    finally:
        os.close(follower)
    written = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    return process, written


# --- worker --------------------------------------------------------------------------


QUEUED_CONFIG = """
[[agents]]
name = "slow"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"
execution = "queued"
"""


def test_a_worker_on_a_sqlite_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a2a.toml").write_text(QUEUED_CONFIG)
    result = a2a("worker", cwd=tmp_path)
    assert result.status == 1
    assert result.err.strip().endswith(
        "error: a queue worker needs a database several processes share (PostgreSQL);"
        " a2a.db is not one: set storage.url (or A2A_TRIO_DATABASE) to a postgresql:// URL"
    )


def test_a_worker_without_a_queued_agent_has_nothing_to_do(tmp_path: Path) -> None:
    result = a2a("worker", cwd=tmp_path)
    assert result.status == 1
    assert "error: no agent is mounted with execution = 'queued': nothing to work on" in result.err


def test_a_worker_for_an_agent_that_is_not_queued_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a2a.toml").write_text(QUEUED_CONFIG)
    result = a2a("worker", "--agent", "echo", cwd=tmp_path)
    assert result.status == 1
    assert "error: 'echo' is not an agent mounted with execution = 'queued'" in result.err

"""Agents that name their own storage: a deployment spread over several databases.

In one process, two agents on two SQLite files; over a fleet (2 web
processes and a worker, real subprocesses), two agents on two PostgreSQL
databases (``tests.multidb_app``, and the worker from a2a.toml). Each agent's tasks live only
in its database; the console lists them all.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from cryptography.fernet import Fernet
from trio_websocket import open_websocket_url

from a2a_trio import A2AApp
from a2a_trio.config import ConfigError, build_app, load_settings
from a2a_trio.protocol import AgentCapabilities
from a2a_trio.push import PushSettings
from a2a_trio.runtime.retention import RetentionSettings
from a2a_trio.store.url import DatabaseURLError, PostgresLocation
from bench.retention_seed import seed_old_tasks

from .agents import ScriptedExecutor
from .conftest import live_server, make_card, user_message
from .console_helpers import TOKEN, console_server
from .postgres import fresh_database, opened_store, postgres_url, rows, sqlite_url
from .servers import REPO, STARTUP_TIMEOUT, ServerProcess, free_port
from .store_contract import T0, finished_task_with_everything
from .test_cluster import VERSION, call, state_of, wait_for_file
from .test_console_metrics import scrape, value
from .test_lifecycle import AGENT, CLI, UNREACHABLE, only_line, run
from .webhooks import Reply, webhook_receiver
from .writes import AGENT as STORED_AGENT

OPERATOR = {"Authorization": f"Bearer {TOKEN}"}


def task_ids(path: Path) -> set[tuple[str, str]]:
    """(agent, task id) of every task the SQLite file at ``path`` holds."""
    with closing(sqlite3.connect(path)) as db:
        return {(agent, task) for agent, task in db.execute("SELECT agent, id FROM tasks")}


async def test_two_agents_keep_their_tasks_in_their_own_sqlite_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a2a.db", tmp_path / "other.db"

    def mount_other(app: A2AApp) -> None:
        app.mount(
            "/other",
            card=make_card(),
            executor=ScriptedExecutor(),
            name="other",
            storage=f"sqlite:///{second}",
        )

    async with console_server(tmp_path, configure=mount_other, database=first) as (server, _, _):
        assert server.app.mounts["other"].host.store is not server.app.store
        mine, theirs = [], []
        for number in range(3):
            reply = await server.jsonrpc("SendMessage", {"message": user_message(f"echo {number}")})
            mine.append(reply["result"]["task"]["id"])
            reply = await server.jsonrpc(
                "SendMessage", {"message": user_message(f"echo {number}")}, prefix="/other"
            )
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            theirs.append(reply["result"]["task"]["id"])
        # Each agent finds its own tasks, and only its own.
        got = await server.jsonrpc("GetTask", {"id": theirs[0]}, prefix="/other")
        assert got["result"]["id"] == theirs[0]
        missing = await server.jsonrpc("GetTask", {"id": theirs[0]})
        assert missing["error"]["code"] == -32001
        # The console lists both databases' tasks, newest first, page by page.
        seen: list[str] = []
        token = ""
        while True:
            page = await server.client.get(
                "/_a2a/api/tasks", params={"pageSize": 2, "pageToken": token}, headers=OPERATOR
            )
            assert page.status_code == 200, page.text
            body = page.json()
            assert len(body["tasks"]) <= 2
            seen += [task["id"] for task in body["tasks"]]
            token = body["nextPageToken"]
            if not token:
                break
        only = await server.client.get(
            "/_a2a/api/tasks", params={"agent": "other"}, headers=OPERATOR
        )
        timeline = await server.client.get(f"/_a2a/api/tasks/other/{theirs[1]}", headers=OPERATOR)
        ready = await server.client.get("/_a2a/health/ready")
        samples = await scrape(server.client, OPERATOR)
    assert sorted(seen) == sorted(mine + theirs) and len(seen) == 6
    assert [task["id"] for task in only.json()["tasks"]] == list(reversed(theirs))
    assert timeline.status_code == 200 and timeline.json()["state"] == "TASK_STATE_COMPLETED"
    assert ready.status_code == 200, ready.text
    assert f"database {second}" in ready.json()["checks"]
    for agent in ("scripted", "other"):  # each counted from its own database
        assert value(samples, "a2a_tasks", agent=agent, state="TASK_STATE_COMPLETED") == 3
    assert task_ids(first) == {("scripted", task) for task in mine}
    assert task_ids(second) == {("other", task) for task in theirs}


async def test_webhooks_of_an_agent_go_out_from_its_own_databases_outbox(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    card = make_card(capabilities=AgentCapabilities(streaming=True, push_notifications=True))

    def mount(app: A2AApp) -> None:
        app.mount("/other", card=card, executor=ScriptedExecutor(), name="other", storage=other)

    push = PushSettings(allowed_hosts=("127.0.0.1",))
    async with (
        webhook_receiver() as hook,
        live_server(tmp_path, mount, push_settings=push, console=False) as server,
    ):
        configuration = {"taskPushNotificationConfig": {"url": hook.url_for("/hook")}}
        reply = await server.jsonrpc(
            "SendMessage",
            {"message": user_message("echo hi"), "configuration": configuration},
            prefix="/other",
        )
        task_id = reply["result"]["task"]["id"]
        with trio.fail_after(10):
            received = await hook.wait_for(1)
    assert task_id in received[0].body.decode()
    outbox = "SELECT task_id FROM push_outbox"
    assert {task for (task,) in rows(f"sqlite:///{other}", outbox)} == {task_id}
    assert rows(f"sqlite:///{tmp_path / 'a2a.db'}", outbox) == []


async def test_the_console_redrives_a_dead_letter_in_its_agents_database(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    card = make_card(capabilities=AgentCapabilities(streaming=True, push_notifications=True))

    def mount(app: A2AApp) -> None:
        app.mount("/other", card=card, executor=ScriptedExecutor(), name="other", storage=other)

    push = PushSettings(allowed_hosts=("127.0.0.1",), max_attempts=1)
    async with (
        webhook_receiver(default=Reply(500)) as hook,
        console_server(tmp_path, configure=mount, push_settings=push) as (server, _, _),
    ):
        configuration = {"taskPushNotificationConfig": {"url": hook.url_for("/hook")}}
        await server.jsonrpc(
            "SendMessage",
            {"message": user_message("echo hi"), "configuration": configuration},
            prefix="/other",
        )
        with trio.fail_after(10):
            while True:
                page = await server.client.get(
                    "/_a2a/api/deliveries", params={"agent": "other"}, headers=OPERATOR
                )
                dead = [d for d in page.json()["deliveries"] if d["state"] == "failed"]
                if dead:
                    break
                await trio.sleep(0.02)
        hook.default = Reply(200)
        redrive = f"/_a2a/api/deliveries/{dead[0]['id']}/redrive"
        elsewhere = await server.client.post(redrive, headers=OPERATOR)  # not in storage.url
        redriven = await server.client.post(redrive, params={"agent": "other"}, headers=OPERATOR)
        with trio.fail_after(10):
            await hook.wait_for(len(hook.requests) + 1)
    assert elsewhere.status_code == 404
    assert redriven.status_code == 200, redriven.text


async def test_each_database_is_pruned_on_its_own_schedule(tmp_path: Path) -> None:
    first, second = sqlite_url(tmp_path / "a2a.db"), sqlite_url(tmp_path / "other.db")
    for database in (first, second):  # a task of now, and 30 copies finished long ago
        async with opened_store(database) as store:
            await finished_task_with_everything(store, "t", at=datetime.now(UTC))
        seed_old_tasks(database, STORED_AGENT, "t", 30, at=T0)

    def mount(app: A2AApp) -> None:
        app.mount("/b", card=make_card(), executor=ScriptedExecutor(), name="b", storage=second)

    retention = RetentionSettings(max_age=86400.0, batch=10, interval=0.05, pause=0.0)
    async with live_server(tmp_path, mount, database=first, retention=retention) as server:
        with trio.fail_after(10):
            while server.app.retention_stats.pruned.tasks < 60:  # noqa: ASYNC110 (a counter)
                await trio.sleep(0.02)
    assert server.app.retention_stats.pruned.tasks == 60  # 30 in each, none twice
    for database in (first, second):
        assert rows(database, "SELECT id FROM tasks") == [("t",)]


def test_agents_naming_one_database_share_it_and_the_default_is_the_apps(tmp_path: Path) -> None:
    app = A2AApp(database=tmp_path / "a2a.db", console=False)
    here = app.mount(
        "/a",
        card=make_card(),
        executor=ScriptedExecutor(),
        name="a",
        storage=f"sqlite:///{tmp_path / 'a2a.db'}",
    )
    one = app.mount(
        "/b", card=make_card(), executor=ScriptedExecutor(), name="b", storage=tmp_path / "b.db"
    )
    two = app.mount(
        "/c",
        card=make_card(),
        executor=ScriptedExecutor(),
        name="c",
        storage=str(tmp_path / "b.db"),
    )
    assert here.host.store is app.store
    assert one.host.store is two.host.store is not app.store
    assert len(app.databases.all) == 2


def test_a_database_named_through_a_symbolic_link_is_the_same_database(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    app = A2AApp(database=tmp_path / "data" / "a2a.db", console=False)
    mount = app.mount(
        "/a",
        card=make_card(),
        executor=ScriptedExecutor(),
        name="a",
        storage=tmp_path / "link" / "a2a.db",
    )
    assert mount.host.store is app.store  # else the second store is refused at start
    assert len(app.databases.all) == 1


def test_an_agent_naming_an_unknown_scheme_is_refused_with_the_key(tmp_path: Path) -> None:
    app = A2AApp(database=tmp_path / "a2a.db", console=False)
    with pytest.raises(DatabaseURLError, match=r"^storage: unsupported scheme 'mysql'"):
        app.mount("/a", card=make_card(), executor=ScriptedExecutor(), storage="mysql://h/db")
    assert app.mounts == {}
    (tmp_path / "a2a.toml").write_text(
        '[[agents]]\nname = "echo"\nexecutor = "a2a_trio.echo:EchoExecutor"\n'
        'card = "a2a_trio.echo:echo_card"\nstorage = "mysql://db.example/agents"\n'
    )
    with pytest.raises(ConfigError) as refused:
        build_app(load_settings(tmp_path / "a2a.toml"))
    assert str(refused.value) == (
        "agents[0].storage: unsupported scheme 'mysql'; use sqlite:///path or postgresql://host/db"
    )


def test_serve_refuses_an_agent_naming_an_unknown_scheme_with_one_line(tmp_path: Path) -> None:
    config = AGENT + 'storage = "mysql://db.example/agents"\n'
    done = run(tmp_path, *CLI, "serve", "--bind", f"127.0.0.1:{free_port()}", config=config)
    assert done.returncode != 0, done.stdout
    assert "agents[0].storage: unsupported scheme 'mysql'" in only_line(done)


def test_serve_refuses_an_agent_whose_own_database_is_out_of_reach(tmp_path: Path) -> None:
    # storage.url (a SQLite file here) answers; the agent's own database does not.
    key = Fernet.generate_key().decode()  # no warning about a development key
    config = f'[storage]\nsecret_key = "{key}"\n' + AGENT + f'storage = "{UNREACHABLE}"\n'
    done = run(tmp_path, *CLI, "serve", "--bind", f"127.0.0.1:{free_port()}", config=config)
    assert done.returncode == 1, done.stdout
    line = only_line(done)
    assert "agents[0].storage: cannot connect to PostgreSQL at postgres@127.0.0.1:1/nowhere" in line
    assert "serving" not in line


# --- two PostgreSQL databases: 2 web processes and a worker ----------------------------------

WORKER_CONFIG = """
[storage]
url = "{first}"

[cluster]
lease_seconds = {lease}

[console]
token = "{token}"

[[agents]]
name = "a"
executor = "tests.cluster_app:ClusterExecutor"
card = "tests.conftest:make_card"
execution = "queued"

[[agents]]
name = "b"
prefix = "/b"
executor = "tests.cluster_app:ClusterExecutor"
card = "tests.conftest:make_card"
execution = "queued"
storage = "{second}"
"""
#: No test here kills a process: the default lease, which a heartbeat late on a
#: loaded machine does not outlive (as the clusters' 2 s can).
LEASE_SECONDS = 10.0
#: Each agent of the fleet by its prefix.
PREFIXES = {"a": "", "b": "/b"}


class Fleet:
    """``tests.multidb_app`` served by 2 hypercorn processes, and ``a2a-trio worker``."""

    def __init__(self, first: str, second: str, directory: Path) -> None:
        self.databases = {"a": first, "b": second}
        self.directory = directory
        env = {"MULTIDB_SECOND": second}
        self.web: list[ServerProcess] = []
        self.worker: subprocess.Popen[bytes] | None = None
        config = directory / "a2a.toml"
        config.write_text(
            WORKER_CONFIG.format(first=first, second=second, lease=LEASE_SECONDS, token=TOKEN)
        )
        self.worker_log = directory / "w0.log"
        try:
            for n in range(2):
                log = directory / f"web{n}.log"
                self.web.append(
                    ServerProcess.start(
                        first,
                        log,
                        app="tests.multidb_app:app",
                        env={
                            "CLUSTER_TEST_DIR": str(directory),
                            "CLUSTER_PROCESS_NAME": f"web{n}",
                            "A2A_TRIO_LEASE_SECONDS": str(LEASE_SECONDS),
                            **env,
                        },
                    )
                )
            self._start_worker(config)
        except BaseException:
            self.stop()
            raise

    def _start_worker(self, config: Path) -> None:
        env = {
            **os.environ,
            # tests.cluster_app, which the configuration names, reads it on import.
            "A2A_TRIO_DATABASE": self.databases["a"],
            "CLUSTER_TEST_DIR": str(self.directory),
            "CLUSTER_PROCESS_NAME": "w0",
        }
        with self.worker_log.open("ab") as log:
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "a2a_trio.cli", "worker", "--config", str(config)],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while "working for a, b" not in self.worker_log.read_text(errors="replace"):
            assert self.worker.poll() is None, self.worker_log.read_text(errors="replace")
            assert time.monotonic() < deadline, self.worker_log.read_text(errors="replace")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            try:
                self.worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.worker.pid, signal.SIGKILL)
                self.worker.wait(10)
        for server in self.web:
            server.stop()


@pytest.fixture(scope="module")
def fleet(postgres: PostgresLocation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with (
        fresh_database(postgres, prefix="h_multidb_a") as first,
        fresh_database(postgres, prefix="h_multidb_b") as second,
    ):
        running = Fleet(
            postgres_url(first), postgres_url(second), tmp_path_factory.mktemp("multidb")
        )
        try:
            yield running
        finally:
            running.stop()


def agent_client(server: ServerProcess, agent: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.url + PREFIXES[agent], headers=VERSION, timeout=30, trust_env=False
    )


async def rpc_to(server: ServerProcess, agent: str, method: str, **params: Any) -> dict[str, Any]:
    async with agent_client(server, agent) as http:
        return await call(http, method, params)


async def started(server: ServerProcess, agent: str, text: str) -> str:
    configuration = {"returnImmediately": True}
    answer = await rpc_to(
        server, agent, "SendMessage", message=user_message(text), configuration=configuration
    )
    task_id: str = answer["task"]["id"]
    return task_id


async def streamed_states(
    server: ServerProcess, agent: str, method: str, **params: Any
) -> list[str | None]:
    """The states of a streaming call's events, until the stream ends."""
    body = {"jsonrpc": "2.0", "id": "s", "method": method, "params": params}
    states: list[str | None] = []
    async with (
        agent_client(server, agent) as http,
        http.stream("POST", "/jsonrpc", json=body, headers={"Accept": "text/event-stream"}) as sse,
    ):
        assert sse.status_code == 200
        if not sse.headers["content-type"].startswith("text/event-stream"):
            # A refused call (a task that ended before its subscription came) answers
            # one JSON-RPC error: read as a stream, it would pass for one with no frame.
            pytest.fail(f"not an event stream: {(await sse.aread()).decode()}")
        async for line in sse.aiter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                assert "error" not in data, data
                states.append(state_of(data["result"]))
    return states


async def state_becomes(server: ServerProcess, agent: str, task_id: str, state: str) -> None:
    with trio.fail_after(10):
        while True:
            task = await rpc_to(server, agent, "GetTask", id=task_id)
            if task["status"]["state"] == state:
                return
            await trio.sleep(0.02)


@pytest.mark.parametrize("agent", ["a", "b"])
async def test_each_agents_tasks_live_only_in_its_database(fleet: Fleet, agent: str) -> None:
    web0, web1 = fleet.web
    done = await rpc_to(web0, agent, "SendMessage", message=user_message("tick 2"))
    task_id = done["task"]["id"]
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (await rpc_to(web1, agent, "GetTask", id=task_id))["id"] == task_id
    other = "b" if agent == "a" else "a"
    found = {
        name: rows(database, "SELECT agent FROM tasks WHERE id = ?", task_id)
        for name, database in fleet.databases.items()
    }
    assert found == {agent: [(agent,)], other: []}
    for name, database in fleet.databases.items():  # never a row of the other agent
        assert rows(database, "SELECT DISTINCT agent FROM tasks") in ([], [(name,)])
        assert rows(database, "SELECT DISTINCT agent FROM task_events") in ([], [(name,)])
    assert (fleet.directory / f"{task_id}.holder.w0").exists()  # ran on the worker


@pytest.mark.parametrize("agent", ["a", "b"])
async def test_a_stream_on_one_process_sees_an_execution_elsewhere(
    fleet: Fleet, agent: str
) -> None:
    web0, web1 = fleet.web
    states = await streamed_states(
        web0, agent, "SendStreamingMessage", message=user_message("tick 4")
    )
    assert states[0] == "TASK_STATE_SUBMITTED" or states[0] == "TASK_STATE_WORKING"
    assert states[-1] == "TASK_STATE_COMPLETED"
    task_id = await started(web0, agent, "tick 20")  # 1 s: still running when subscribed
    states = await streamed_states(web1, agent, "SubscribeToTask", id=task_id)
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert states.count("TASK_STATE_WORKING") >= 2  # the ticks, recorded on the worker


@pytest.mark.parametrize("agent", ["a", "b"])
async def test_a_cancel_from_the_other_process_stops_the_execution(
    fleet: Fleet, agent: str
) -> None:
    web0, web1 = fleet.web
    task_id = await started(web0, agent, "hold")
    await state_becomes(web1, agent, task_id, "TASK_STATE_WORKING")
    canceled = await rpc_to(web1, agent, "CancelTask", id=task_id)
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    stopped = fleet.directory / f"{task_id}.stopped"
    await wait_for_file(stopped)
    assert stopped.read_text().split()[1] == "w0"


async def test_the_console_lists_the_tasks_of_both_databases(fleet: Fleet) -> None:
    web0, web1 = fleet.web
    ids = {agent: await started(web0, agent, "tick 1") for agent in PREFIXES}
    for agent, task_id in ids.items():
        await state_becomes(web0, agent, task_id, "TASK_STATE_COMPLETED")
    async with httpx.AsyncClient(base_url=web1.url, headers=OPERATOR, trust_env=False) as http:
        listed = (await http.get("/_a2a/api/tasks", params={"pageSize": 500})).json()["tasks"]
        only_b = (await http.get("/_a2a/api/tasks", params={"agent": "b"})).json()["tasks"]
        timeline = await http.get(f"/_a2a/api/tasks/b/{ids['b']}")
        ready = await http.get("/_a2a/health/ready")
    assert {(task["agent"], task["id"]) for task in listed} >= set(ids.items())
    assert {task["agent"] for task in only_b} == {"b"}
    assert timeline.json()["state"] == "TASK_STATE_COMPLETED"
    assert ready.status_code == 200, ready.text


@pytest.mark.parametrize("agent", ["a", "b"])
async def test_the_feed_of_a_web_process_shows_what_the_worker_records(
    fleet: Fleet, agent: str
) -> None:
    web0, web1 = fleet.web
    address = web1.url.replace("http://", "ws://") + "/_a2a/feed?kind=task"
    auth = [(b"Authorization", f"Bearer {TOKEN}".encode())]
    async with open_websocket_url(address, extra_headers=auth) as ws:
        assert json.loads(await ws.get_message())["kind"] == "feed.hello"
        task_id = await started(web0, agent, "tick 2")  # run on the worker, sent to web0
        seen: list[dict[str, Any]] = []
        with trio.fail_after(10):
            while not any(event.get("state") == "TASK_STATE_COMPLETED" for event in seen):
                lines = (await ws.get_message()).splitlines()
                seen += [e for e in map(json.loads, lines) if e.get("task") == task_id]
    assert {event["agent"] for event in seen} == {agent}
    assert seen[0]["kind"] == "task.created"


async def test_the_console_shows_each_process_once_with_the_databases_it_serves(
    fleet: Fleet,
) -> None:
    async with httpx.AsyncClient(
        base_url=fleet.web[1].url, headers=OPERATOR, trust_env=False
    ) as http:
        # Every process joined both databases; each reports to both with its heartbeat.
        with trio.fail_after(10):
            while True:
                members = (await http.get("/_a2a/api/members")).json()["members"]
                if len(members) == 3 and all(len(m["databases"]) == 2 for m in members):
                    break
                await trio.sleep(0.05)
        samples = await scrape(http)
    assert sorted(m["role"] for m in members) == ["web", "web", "worker"]
    assert [m["me"] for m in members].count(True) == 1
    assert all(sorted(m["agents"]) == ["a", "b"] for m in members)
    assert value(samples, "a2a_cluster_members", role="web") == 2
    assert value(samples, "a2a_cluster_members", role="worker") == 1
    # Each queued agent's gauge, read in the database it lives in.
    for agent in ("a", "b"):
        assert (
            "a2a_queued_executions",
            frozenset({("agent", agent), ("state", "queued")}),
        ) in samples

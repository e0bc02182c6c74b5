"""A fleet on PostgreSQL: two ``a2a-trio serve`` web processes and two ``a2a-trio worker``s.

The agent is queued, so the workers record every event. What an operator
looks at, on a web process that never saw the message, shows all of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from a2a_trio.store.url import PostgresLocation

from .conftest import user_message
from .postgres import fresh_database, postgres_url, rows
from .servers import ServerProcess, free_port, serve_command
from .test_cluster import LEASE_SECONDS, rpc
from .test_console_metrics import Samples, parse, total, value
from .test_queue_workers import WORKER_CONFIG, Deployment, Worker
from .webhooks import Reply, webhook_receiver

# Development mode without a console token: the deployment makes one up, once.
FLEET_CONFIG = (
    WORKER_CONFIG
    + '\n[push]\nallowed_hosts = ["127.0.0.1"]\nmax_attempts = 2\nbackoff = 0.1\nmax_wait = 0.5\n'
)
TIMEOUT = 30.0
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DOCS = Path(__file__).resolve().parent.parent / "docs"
WAIT_MS = 20_000
CONSOLE_LINK = re.compile(r"(http://\S+)/_a2a/console#token=(\S+)")


class Fleet(Deployment):
    """Web processes served by ``a2a-trio serve`` (with the console) and workers."""

    def __init__(self, database: str, directory: Path) -> None:
        super().__init__(database, directory)
        self.metrics_ports: list[int] = []
        self.config.write_text(FLEET_CONFIG.format(database=database, lease=LEASE_SECONDS))

    def start_web(self, count: int) -> None:
        for n in range(len(self.web), len(self.web) + count):
            env = {
                "A2A_TRIO_CONFIG": str(self.config),
                "CLUSTER_TEST_DIR": str(self.directory),
                "CLUSTER_PROCESS_NAME": f"web{n}",
            }
            log = self.directory / f"web{n}.log"
            self.web.append(ServerProcess.start(self.database, log, env=env, command=serve_command))

    def start_worker(self, *, config: Path | None = None, options: tuple[str, ...] = ()) -> Worker:
        self.metrics_ports.append(free_port())
        worker = Worker(
            self,
            f"w{len(self.workers)}",
            config=config,
            options=("--metrics-bind", f"127.0.0.1:{self.metrics_ports[-1]}", *options),
        )
        self.workers.append(worker)
        return worker


@pytest.fixture(scope="module")
def fleet(postgres: PostgresLocation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with fresh_database(postgres) as location:
        running = Fleet(postgres_url(location), tmp_path_factory.mktemp("fleet"))
        try:
            running.start_web(2)
            running.start_worker()
            running.start_worker()
            yield running
        finally:
            running.stop()


def console_links(fleet: Fleet) -> list[tuple[str, str]]:
    """The console links the web processes logged: (address, token)."""
    return [link for web in fleet.web for link in CONSOLE_LINK.findall(web.output())]


def token_of(fleet: Fleet) -> str:
    """The deployment's console token, as the one link logged has it."""
    [(_, token)] = console_links(fleet)
    return token


def feed_address(server: ServerProcess, query: str = "") -> str:
    return server.url.replace("http://", "ws://") + "/_a2a/feed" + (f"?{query}" if query else "")


@asynccontextmanager
async def feed(
    fleet: Fleet, server: ServerProcess, query: str = ""
) -> AsyncIterator[WebSocketConnection]:
    """A feed connection whose hello has been read."""
    async with open_websocket_url(
        feed_address(server, query),
        extra_headers=[(b"Authorization", f"Bearer {token_of(fleet)}".encode())],
    ) as ws:
        assert json.loads(await ws.get_message())["kind"] == "feed.hello"
        yield ws


async def task_events(ws: WebSocketConnection, task_id: str, final: str) -> list[dict[str, Any]]:
    """The feed's events of the task, up to its ``final`` state."""
    seen: list[dict[str, Any]] = []
    with trio.fail_after(TIMEOUT):
        while True:
            for line in (await ws.get_message()).splitlines():
                event = json.loads(line)
                if event.get("task") == task_id:
                    seen.append(event)
                    if event["kind"] == "task.status" and event["state"] == final:
                        return seen


async def test_a_queued_tasks_events_reach_the_feed_of_a_web_process_that_never_saw_it(
    fleet: Fleet,
) -> None:
    web0, web1 = fleet.web
    async with feed(fleet, web1, "kind=task") as ws:
        task = (await rpc(web0, "SendMessage", {"message": user_message("tick 3")}))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        events = await task_events(ws, task["id"], "TASK_STATE_COMPLETED")
    sequences = [event["eventSeq"] for event in events]
    assert sequences == list(range(1, len(sequences) + 1))  # each once, in log order
    assert events[0]["kind"] == "task.created"
    assert events[0]["owner"] == task_owner(fleet, task["id"])
    texts = [event["text"] for event in events if event["kind"] == "task.status"]
    assert "tick 3" in texts
    assert {event["agent"] for event in events} == {"default"}


async def test_a_feed_resumed_after_a_drop_misses_nothing_another_process_recorded(
    fleet: Fleet,
) -> None:
    web0, web1 = fleet.web
    async with feed(fleet, web1, "kind=task") as ws:
        first = (await rpc(web0, "SendMessage", {"message": user_message("tick 1")}))["task"]
        seen = await task_events(ws, first["id"], "TASK_STATE_COMPLETED")
        last_seq = seen[-1]["seq"]
    # Dropped: the task runs while the client is away, then it resumes.
    missed = (await rpc(web0, "SendMessage", {"message": user_message("tick 2")}))["task"]
    async with feed(fleet, web1, f"kind=task&after={last_seq}") as ws:
        events = await task_events(ws, missed["id"], "TASK_STATE_COMPLETED")
    assert events[0]["kind"] == "task.created"
    assert [e["eventSeq"] for e in events] == list(range(1, len(events) + 1))


async def test_watch_on_a_web_process_prints_what_a_worker_recorded(fleet: Fleet) -> None:
    web0, web1 = fleet.web
    env = {**os.environ, "A2A_TRIO_CONSOLE_TOKEN": token_of(fleet)}
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "a2a_trio.cli", "watch", web1.url, "--no-color"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert process.stdout is not None
    try:
        pending = b""
        with trio.fail_after(TIMEOUT):
            while b"-- watching" not in pending:  # subscribed: now the message
                chunk = await process.stdout.receive_some()
                assert chunk, pending.decode()
                pending += chunk
            task = (await rpc(web0, "SendMessage", {"message": user_message("tick 2")}))["task"]
            while f"{task['id']}".encode() not in pending or b"COMPLETED" not in pending:
                chunk = await process.stdout.receive_some()
                assert chunk, pending.decode()
                pending += chunk
    finally:
        with trio.CancelScope(shield=True):
            process.kill()
            await process.wait()
            await process.stdout.aclose()
    lines = [line for line in pending.decode().splitlines() if task["id"] in line]
    assert any("task.created" in line for line in lines), lines
    assert any("COMPLETED" in line for line in lines), lines


def task_owner(fleet: Fleet, task_id: str) -> str:
    return str(rows(fleet.database, "SELECT owner FROM tasks WHERE id = %s", task_id)[0][0])


async def test_each_worker_serves_metrics_that_prometheus_parses(fleet: Fleet) -> None:
    web0 = fleet.web[0]
    async with httpx.AsyncClient(trust_env=False) as client:

        async def scrape() -> list[Samples]:
            scraped = []
            for port in fleet.metrics_ports:
                response = await client.get(f"http://127.0.0.1:{port}/metrics")
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/plain")
                scraped.append(parse(response.text))
            return scraped

        # Until every worker has run one: whichever claims first may take them all.
        for sent in range(1, 51):
            task = (await rpc(web0, "SendMessage", {"message": user_message("tick 1")}))["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            scraped = await scrape()
            ran = [total(samples, "a2a_executions_started_total") for samples in scraped]
            if sent >= 3 and all(ran):
                break
        other = await client.get(f"http://127.0.0.1:{fleet.metrics_ports[0]}/other")
        assert other.status_code == 404
    started = sum(total(samples, "a2a_executions_started_total") for samples in scraped)
    assert started >= 3  # the workers ran them, not the web processes
    for samples in scraped:
        assert value(samples, "a2a_cluster_listening") == 1
        assert value(samples, "a2a_cluster_members", role="worker") == 2
        assert value(samples, "a2a_cluster_members", role="web") == 2
        assert value(samples, "a2a_queued_executions", agent="default", state="queued") == 0
        assert ("a2a_task_leases_held", frozenset()) in samples
        assert total(samples, "a2a_commit_seconds_count", agent="default") > 0


async def test_a_worker_logs_each_execution_it_runs_at_info(fleet: Fleet) -> None:
    task = (await rpc(fleet.web[0], "SendMessage", {"message": user_message("tick 1")}))["task"]
    ended = f"execution ended: task {task['id']} of agent default after "
    with trio.fail_after(TIMEOUT):
        while not any(ended in worker.output() for worker in fleet.workers):  # noqa: ASYNC110
            await trio.sleep(0.05)  # another process writes it
    [output] = [worker.output() for worker in fleet.workers if ended in worker.output()]
    [line] = [line for line in output.splitlines() if ended in line]
    assert " INFO a2a_trio.worker: " in line and line.endswith(": COMPLETED")
    assert f"INFO a2a_trio.worker: execution started: task {task['id']}" in output


# --- one console for the deployment ---------------------------------------------------------


async def test_the_web_processes_share_one_console_token_logged_once_with_their_address(
    fleet: Fleet,
) -> None:
    [(address, token)] = console_links(fleet)  # one line for the deployment, not per process
    assert address in {web.url for web in fleet.web}  # the real address, not <this server>
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(trust_env=False, headers=headers) as client:
        for _ in range(5):
            for web in fleet.web:
                response = await client.get(web.url + "/_a2a/api/counters")
                assert response.status_code == 200, response.text


async def test_the_counters_and_members_are_the_whole_deployments(fleet: Fleet) -> None:
    web0, web1 = fleet.web
    headers = {"Authorization": f"Bearer {token_of(fleet)}"}
    async with httpx.AsyncClient(trust_env=False, headers=headers, timeout=TIMEOUT) as client:
        started = await client.post(
            web0.url + "/jsonrpc",
            json=jsonrpc("SendMessage", message=user_message("tick 60"), returnImmediately=True),
            headers={"A2A-Version": "1.0"},
        )
        task_id = started.json()["result"]["task"]["id"]
        with trio.fail_after(TIMEOUT):
            while True:  # the worker running it reports it with its next heartbeat
                counters = (await client.get(web1.url + "/_a2a/api/counters")).json()
                if counters["runningExecutions"] >= 1:
                    break
                await trio.sleep(0.1)
        workers = [share for share in counters["members"] if share["role"] == "worker"]
        assert len(workers) == 2 and sum(w["runningExecutions"] for w in workers) >= 1
        members = (await client.get(web1.url + "/_a2a/api/members")).json()["members"]
        assert sorted(m["role"] for m in members) == ["web", "web", "worker", "worker"]
        running = [m for m in members if m["role"] == "worker" and m["leases"] >= 1]
        assert running and running[0]["agents"] == ["default"] and running[0]["pid"] > 0
        assert all(m["heartbeatAgeSeconds"] < LEASE_SECONDS for m in members)
        await rpc(web1, "CancelTask", {"id": task_id})


async def test_a_dead_letter_names_its_webhooks_host_only(fleet: Fleet) -> None:
    async with webhook_receiver(default=Reply(503)) as hook:
        config = {"url": hook.url_for("/hook/path?key=query-secret"), "token": "hook-token"}
        await rpc(
            fleet.web[0],
            "SendMessage",
            {
                "message": user_message("tick 1"),
                "configuration": {"taskPushNotificationConfig": config},
            },
        )
        headers = {"Authorization": f"Bearer {token_of(fleet)}"}
        async with httpx.AsyncClient(trust_env=False, headers=headers) as client:
            with trio.fail_after(TIMEOUT):
                while True:
                    response = await client.get(
                        fleet.web[1].url + "/_a2a/api/deliveries?state=failed"
                    )
                    dead = response.json()["deliveries"]
                    if dead:
                        break
                    await trio.sleep(0.1)
    assert dead[0]["webhookHost"] == "127.0.0.1"
    for secret in ("/hook/path", "query-secret", "hook-token"):
        assert secret not in response.text


def jsonrpc(method: str, **params: Any) -> dict[str, Any]:
    configuration = (
        {"returnImmediately": params.pop("returnImmediately")}
        if "returnImmediately" in params
        else {}
    )
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**params, "configuration": configuration},
    }


def drive_console(fleet: Fleet, shot: Path) -> None:
    """The console of the web process that takes no message, in Chromium, as an operator."""
    from playwright.sync_api import expect, sync_playwright

    web0, web1 = fleet.web
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{web1.url}/_a2a/console#token={token_of(fleet)}")
            expect(page.get_by_test_id("feed-status")).to_have_text("feed: live")
            members = page.get_by_test_id("member")
            expect(members.and_(page.locator('[data-role="worker"]'))).to_have_count(2)
            expect(members.and_(page.locator('[data-role="web"]'))).to_have_count(2)

            # A queued task sent to the other web process appears without a reload.
            body = jsonrpc("SendMessage", message=user_message("tick 40"), returnImmediately=True)
            answer = httpx.post(
                web0.url + "/jsonrpc", json=body, headers={"A2A-Version": "1.0"}, timeout=TIMEOUT
            )
            task_id = answer.json()["result"]["task"]["id"]
            row = page.locator(f'#tasks tr[data-task="{task_id}"]')
            expect(row.get_by_test_id("state")).to_have_text("WORKING")
            expect(page.locator("#c-running")).not_to_have_text("0")  # a worker runs it
            expect(row.get_by_test_id("state")).to_have_text("COMPLETED")
            expect(page.locator("#c-events")).not_to_have_text("0.0")

            # Its timeline: every event the worker recorded.
            row.click()
            expect(page.locator("#task-id")).to_have_text(task_id)
            entries = page.get_by_test_id("timeline-entry")
            expect(entries.first).to_have_attribute("data-kind", "task")
            expect(entries.last).to_contain_text("COMPLETED")
            expect(page.get_by_test_id("timeline")).to_contain_text("tick 40")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="no chromium on PATH")
async def test_the_console_of_one_web_process_shows_the_whole_deployment_in_a_browser(
    fleet: Fleet, tmp_path: Path
) -> None:
    pytest.importorskip("playwright.sync_api", reason="the dev extra installs Playwright")
    shot = tmp_path / "console-fleet.png"
    with trio.fail_after(120):
        await trio.to_thread.run_sync(drive_console, fleet, shot)
    assert shot.stat().st_size > 10_000
    if os.environ.get("A2A_TRIO_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, DOCS / "console-fleet.png")


async def test_hypercorn_workers_share_one_console_token_and_log_their_real_address(
    postgres: PostgresLocation, tmp_path: Path
) -> None:
    with fresh_database(postgres) as location:
        (tmp_path / "a2a.toml").write_text(f'[storage]\nurl = "{postgres_url(location)}"\n')
        with ServerProcess.configured_app_served(tmp_path, options=("--workers", "2")) as server:
            with trio.fail_after(TIMEOUT):
                while not CONSOLE_LINK.search(server.output()):  # noqa: ASYNC110
                    await trio.sleep(0.05)  # another process writes it
            await trio.sleep(1)  # both workers are up: a second link would be there by now
            [(address, token)] = CONSOLE_LINK.findall(server.output())
            assert address == server.url  # hypercorn's --bind, not "<this server>"
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(trust_env=False, headers=headers) as client:
                for _ in range(10):  # each a new connection: either worker may answer
                    response = await client.get(
                        address + "/_a2a/api/counters", headers={"Connection": "close"}
                    )
                    assert response.status_code == 200, response.text

"""Queued agents: web processes take the messages, ``a2a-trio worker`` processes run them.

Two hypercorn processes serve ``tests.cluster_app`` with the agent queued,
and ``a2a-trio worker`` processes (the real command, configured by an
a2a.toml naming the same executor) run its executions, all on one
PostgreSQL database of this module's own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest
import trio

from a2a_trio.store.url import PostgresLocation

from .conftest import user_message
from .postgres import execute, fresh_database, postgres_url
from .servers import REPO, STARTUP_TIMEOUT, ServerProcess
from .test_cluster import (
    LEASE_SECONDS,
    frames,
    rpc,
    start_server,
    start_task,
    state_of,
    wait_for_file,
    wait_for_state,
)

WORKER_CONFIG = """
[storage]
url = "{database}"

[cluster]
lease_seconds = {lease}

[runtime]
shutdown_grace = 10.0

[[agents]]
name = "default"
executor = "tests.cluster_app:ClusterExecutor"
card = "tests.conftest:make_card"
execution = "queued"
"""


class Worker:
    """``a2a-trio worker`` in a process group of its own."""

    def __init__(self, deployment: Deployment, name: str, *options: str) -> None:
        self.name = name
        self.log_path = deployment.directory / f"{name}.log"
        self._log: IO[bytes] = self.log_path.open("ab")
        env = {
            **os.environ,
            "A2A_TRIO_DATABASE": deployment.database,
            "CLUSTER_TEST_DIR": str(deployment.directory),
            "CLUSTER_PROCESS_NAME": name,
        }
        command = [
            sys.executable,
            "-m",
            "a2a_trio.cli",
            "worker",
            "--config",
            str(deployment.config),
            *options,
        ]
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while "working for default" not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.05)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()
        return self.process.returncode


class Deployment:
    def __init__(self, database: str, directory: Path) -> None:
        self.database = database
        self.directory = directory
        self.config = directory / "a2a.toml"
        self.config.write_text(WORKER_CONFIG.format(database=database, lease=LEASE_SECONDS))
        self.web: list[ServerProcess] = []
        self.workers: list[Worker] = []

    def start_web(self, count: int) -> None:
        for n in range(count):
            self.web.append(
                start_server(self.database, self.directory, f"web{n}", CLUSTER_EXECUTION="queued")
            )

    def start_worker(self) -> Worker:
        worker = Worker(self, f"w{len(self.workers)}")
        self.workers.append(worker)
        return worker

    @contextmanager
    def only(self, worker: Worker) -> Iterator[None]:
        """Only ``worker`` claims work in the block: the others are paused, well within a lease."""
        others = [w for w in self.workers if w is not worker and w.process.poll() is None]
        for other in others:
            os.kill(other.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for other in others:
                os.kill(other.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        for server in self.web:
            server.stop()


@pytest.fixture(scope="module")
def deployment(
    postgres: PostgresLocation, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    with fresh_database(postgres) as location:
        running = Deployment(postgres_url(location), tmp_path_factory.mktemp("queued"))
        try:
            running.start_web(2)
            running.start_worker()
            yield running
        finally:
            running.stop()


async def test_a_queued_message_runs_on_a_worker_and_continues_through_another_web_process(
    deployment: Deployment,
) -> None:
    web0, web1 = deployment.web
    paused = (await rpc(web0, "SendMessage", {"message": user_message("ask")}))["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow_up = user_message("Ada", taskId=paused["id"])
    done = (await rpc(web1, "SendMessage", {"message": follow_up}))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["text"] == "continued on w0"


async def test_a_web_process_streams_what_the_worker_records(deployment: Deployment) -> None:
    received = await frames(
        deployment.web[0], "SendStreamingMessage", {"message": user_message("tick 5")}
    )
    states = [state_of(result) for _, result in received]
    assert states[-1] == "TASK_STATE_COMPLETED"
    ids = [int(event_id) for event_id, _ in received if event_id is not None]
    assert ids == list(range(1, len(ids) + 1))


async def test_a_cancel_on_a_web_process_stops_the_execution_on_its_worker(
    deployment: Deployment,
) -> None:
    web = deployment.web[1]
    task = await start_task(web, "hold")
    await wait_for_state(web, task["id"], "TASK_STATE_WORKING")
    canceled = await rpc(web, "CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    stopped = deployment.directory / f"{task['id']}.stopped"
    await wait_for_file(stopped)
    assert stopped.read_text().split()[1].startswith("w")  # where it ran: on a worker


async def test_a_task_of_a_killed_worker_fails_within_the_lease(deployment: Deployment) -> None:
    doomed = deployment.start_worker()
    survivor = deployment.workers[0]
    web = deployment.web[0]
    with deployment.only(doomed):
        held = [await start_task(web, "hold") for _ in range(2)]
    for task in held:
        await wait_for_file(deployment.directory / f"{task['id']}.holder.{doomed.name}")
    with deployment.only(survivor):
        started = [*held, await start_task(web, "hold")]  # and one on the survivor
    doomed.kill()
    killed = time.monotonic()
    for task in held:
        failed = await wait_for_state(
            web, task["id"], "TASK_STATE_FAILED", within=LEASE_SECONDS + 5
        )
        assert "server stopped" in failed["status"]["message"]["parts"][0]["text"]
    assert time.monotonic() - killed <= LEASE_SECONDS + 2
    assert survivor.process.poll() is None
    for task in started:  # the survivor's: they would hold it up at the end
        if task not in held:
            await rpc(web, "CancelTask", {"id": task["id"]})


async def test_a_queued_execution_whose_worker_died_before_starting_runs_once_elsewhere(
    deployment: Deployment,
) -> None:
    web = deployment.web[1]
    # A worker that claimed the next execution and died before starting it: a
    # member whose heartbeat ran out, holding the row in state "claimed".
    execute(
        deployment.database,
        "INSERT INTO a2a_members (id, host, pid, lease_seconds, started_at, heartbeat_at)"
        " VALUES ('ghost', 'elsewhere', 1, 1, now(), '-infinity')",
    )
    execute(
        deployment.database,
        "CREATE FUNCTION ghost_claims() RETURNS trigger AS $$ BEGIN"
        " NEW.state := 'claimed'; NEW.claimed_by := 'ghost'; RETURN NEW; END $$ LANGUAGE plpgsql",
    )
    execute(
        deployment.database,
        "CREATE TRIGGER ghost_claims BEFORE INSERT ON queued_executions"
        " FOR EACH ROW EXECUTE FUNCTION ghost_claims()",
    )
    try:
        with trio.fail_after(LEASE_SECONDS + 10):
            answer = await rpc(web, "SendMessage", {"message": user_message("count")})
    finally:
        execute(deployment.database, "DROP TRIGGER ghost_claims ON queued_executions")
        execute(deployment.database, "DROP FUNCTION ghost_claims()")
    task = answer["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    runs = (deployment.directory / f"{task['id']}.runs").read_text().split()
    assert len(runs) == 1, runs  # run once, by a live worker


async def test_sigterm_lets_a_worker_finish_what_it_runs(deployment: Deployment) -> None:
    draining = deployment.start_worker()
    web = deployment.web[0]
    with deployment.only(draining):
        tasks = [await start_task(web, "tick 20") for _ in range(4)]
    for task in tasks:
        await wait_for_file(deployment.directory / f"{task['id']}.holder.{draining.name}")
    status = await trio.to_thread.run_sync(draining.stop)
    assert status == 0, draining.output()
    for task in tasks:  # finished on the draining worker, not ended by the shutdown
        done = await wait_for_state(web, task["id"], "TASK_STATE_COMPLETED", within=10)
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"

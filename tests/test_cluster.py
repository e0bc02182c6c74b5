"""Several server processes on one PostgreSQL database, as a deployment runs them.

Three hypercorn processes serve ``tests.cluster_app`` on one database of
this module's own; a test sends to one process and reads, continues or
cancels on another. What the executions did is in files they share
(``tests/cluster_app.py``).
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from a2a_trio.store.postgres.listener import LISTENER_APPLICATION
from a2a_trio.store.url import PostgresLocation, parse_database_url

from .conftest import user_message
from .postgres import admin_connect, execute, fresh_database, postgres_url, rows
from .servers import ServerProcess
from .webhooks import Reply, webhook_receiver

VERSION = {"A2A-Version": "1.0"}
#: A task's logged sequence numbers, in order.
LOGGED_SEQS = "SELECT seq FROM task_events WHERE task_id = %s ORDER BY seq"
LEASE_SECONDS = 2.0


def start_server(database: str, directory: Path, name: str, **env: str) -> ServerProcess:
    """``tests.cluster_app`` served as process ``name``, its files in ``directory``."""
    env = {
        "CLUSTER_TEST_DIR": str(directory),
        "CLUSTER_PROCESS_NAME": name,
        "A2A_TRIO_LEASE_SECONDS": str(LEASE_SECONDS),
        **env,
    }
    log = directory / f"{name}.log"
    return ServerProcess.start(database, log, app="tests.cluster_app:app", env=env)


class Cluster:
    def __init__(self, database: str, directory: Path) -> None:
        self.database = database
        self.directory = directory
        self.processes: list[ServerProcess] = []

    def start(self, count: int) -> list[ServerProcess]:
        started = []
        for _ in range(count):
            server = start_server(self.database, self.directory, f"p{len(self.processes)}")
            self.processes.append(server)
            started.append(server)
        return started

    def stop(self) -> None:
        for server in self.processes:
            server.stop()


@pytest.fixture(scope="module")
def cluster(
    postgres: PostgresLocation, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with fresh_database(postgres) as location:
        running = Cluster(postgres_url(location), tmp_path_factory.mktemp("cluster"))
        try:
            running.start(3)
            yield running
        finally:
            running.stop()


def client(server: ServerProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, headers=VERSION, timeout=30, trust_env=False)


async def rpc(server: ServerProcess, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with client(server) as http:
        return await call(http, method, params)


async def call(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    response = await http.post("/jsonrpc", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    assert "error" not in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def frames(
    server: ServerProcess,
    method: str,
    params: dict[str, Any],
    *,
    last_event_id: str | None = None,
    limit: int | None = None,
    after_first: Callable[[], None] = lambda: None,
) -> list[tuple[str | None, dict[str, Any]]]:
    """A streaming call's SSE frames as (id, result), until the stream ends or ``limit``.

    ``after_first`` runs once the first frame is in.
    """
    body = {"jsonrpc": "2.0", "id": "s", "method": method, "params": params}
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    received: list[tuple[str | None, dict[str, Any]]] = []
    async with (
        client(server) as http,
        http.stream("POST", "/jsonrpc", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        if not response.headers["content-type"].startswith("text/event-stream"):
            # A refused call answers one JSON-RPC error, not a stream: read as
            # one, it would pass for a stream that ended with no frame.
            pytest.fail(f"not an event stream: {(await response.aread()).decode()}")
        event_id = None
        # At ``limit``, a cancel, not a ``break``: it raises in httpx's innermost
        # generator, so that each of its nested generators ends here. A ``break``
        # (even in ``aclosing``) ends only the outer one and leaves the others, with
        # the connection's stream, to the collector: a ResourceWarning in whichever
        # test runs then. The rest of a chunk already read is skipped.
        with trio.CancelScope() as reading:
            async for line in response.aiter_lines():
                if reading.cancel_called:
                    continue
                if line.startswith("id:"):
                    event_id = line[3:].strip()
                elif line.startswith("data:"):
                    data = json.loads(line[5:])
                    assert "error" not in data, data
                    received.append((event_id, data["result"]))
                    if len(received) == 1:
                        after_first()
                    if limit is not None and len(received) == limit:
                        reading.cancel()
    return received


def state_of(result: dict[str, Any]) -> str | None:
    for kind in ("task", "statusUpdate"):
        if kind in result:
            return str(result[kind]["status"]["state"])
    return None


async def wait_for_state(
    server: ServerProcess, task_id: str, state: str, *, within: float = 10
) -> dict[str, Any]:
    with trio.fail_after(within):
        while True:
            task = await rpc(server, "GetTask", {"id": task_id})
            if task["status"]["state"] == state:
                return task
            await trio.sleep(0.02)


async def wait_for_file(path: Path) -> None:
    """Until another process writes ``path`` (a file system offers nothing to wait on)."""
    with trio.fail_after(5):
        while not path.exists():  # noqa: ASYNC110, ASYNC240
            await trio.sleep(0.005)


async def start_task(server: ServerProcess, text: str) -> dict[str, Any]:
    answer = await rpc(
        server,
        "SendMessage",
        {"message": user_message(text), "configuration": {"returnImmediately": True}},
    )
    task: dict[str, Any] = answer["task"]
    return task


# --- one task, two processes ------------------------------------------------------------------


async def test_a_subscriber_on_one_process_sees_what_another_process_records(
    cluster: Cluster,
) -> None:
    a, b, _ = cluster.processes
    # Updates 50 ms apart once the subscriber has its first frame: a task that
    # could end before the subscription arrives (a loaded machine) would refuse it.
    task = await start_task(a, "burst 6 50")
    go = cluster.directory / f"{task['id']}.go"
    received = await frames(b, "SubscribeToTask", {"id": task["id"]}, after_first=go.touch)
    states = [state_of(result) for _, result in received]
    assert states[-1] == "TASK_STATE_COMPLETED"
    ids = [int(event_id) for event_id, _ in received if event_id is not None]
    assert ids == sorted(set(ids)), "each event once, in log order"
    # Every event after the opening snapshot, none missed: the log has the same.
    logged = rows(
        cluster.database, "SELECT seq FROM task_events WHERE task_id = %s ORDER BY seq", task["id"]
    )
    assert ids[1:] == [seq for (seq,) in logged if seq > ids[0]]


async def test_a_subscription_to_a_task_another_process_ended_is_refused_as_unsupported(
    cluster: Cluster,
) -> None:
    # What a subscription that comes after the end gets: one JSON-RPC error, not a
    # stream (the subscriber tests once took it for a stream with no frame).
    a, b, _ = cluster.processes
    task = await start_task(a, "tick 1")
    await wait_for_state(a, task["id"], "TASK_STATE_COMPLETED")
    body = {"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": task["id"]}}
    async with client(b) as http:
        response = await http.post("/jsonrpc", json=body, headers={"Accept": "text/event-stream"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == -32004
    assert error["data"][0]["reason"] == "UNSUPPORTED_OPERATION"
    assert error["data"][0]["metadata"] == {"taskId": task["id"], "state": "TASK_STATE_COMPLETED"}


async def test_a_subscriber_on_another_process_misses_none_of_a_burst_of_updates(
    cluster: Cluster,
) -> None:
    # Updates 1 ms apart, each its own commit: the other process reads them back
    # while more are being committed (it once skipped the events committed between
    # its read of the log and its read of the task).
    a, b, _ = cluster.processes
    for _ in range(3):
        task = await start_task(a, "burst 150")
        go = cluster.directory / f"{task['id']}.go"
        received = await frames(b, "SubscribeToTask", {"id": task["id"]}, after_first=go.touch)
        assert state_of(received[-1][1]) == "TASK_STATE_COMPLETED"
        texts = [
            result["statusUpdate"]["status"]["message"]["parts"][0]["text"]
            for _, result in received
            if "statusUpdate" in result and "message" in result["statusUpdate"]["status"]
        ]
        first = int(texts[0].split()[1]) if texts else 151
        assert texts == [f"burst {n}" for n in range(first, 151)], "every update, once, in order"
        ids = [int(event_id) for event_id, _ in received if event_id is not None]
        logged = rows(
            cluster.database,
            "SELECT seq FROM task_events WHERE task_id = %s ORDER BY seq",
            task["id"],
        )
        assert ids[1:] == [seq for (seq,) in logged if seq > ids[0]]


async def test_a_task_paused_on_one_process_continues_on_another_with_its_id_alone(
    cluster: Cluster,
) -> None:
    a, b, _ = cluster.processes
    paused = (await rpc(a, "SendMessage", {"message": user_message("ask")}))["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow_up = user_message("Ada", taskId=paused["id"])
    done = (await rpc(b, "SendMessage", {"message": follow_up}))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["text"] == "continued on p1"
    assert [m["parts"][0]["text"] for m in done["history"] if m["role"] == "ROLE_USER"] == [
        "ask",
        "Ada",
    ]


async def test_a_stream_begun_on_one_process_resumes_on_another_from_last_event_id(
    cluster: Cluster,
) -> None:
    a, b, _ = cluster.processes
    first = await frames(a, "SendStreamingMessage", {"message": user_message("tick 6")}, limit=3)
    task_id = first[0][1]["task"]["id"]
    last_id = first[-1][0]
    assert last_id is not None
    rest = await frames(b, "SubscribeToTask", {"id": task_id}, last_event_id=last_id)
    ids = [int(event_id) for event_id, _ in [*first, *rest] if event_id is not None]
    assert ids == list(range(1, len(ids) + 1)), "the stream goes on where it stopped"
    assert state_of(rest[-1][1]) == "TASK_STATE_COMPLETED"


async def test_a_cancel_on_one_process_stops_the_execution_on_another_at_once(
    cluster: Cluster,
) -> None:
    a, b, _ = cluster.processes
    delays = []
    for _ in range(5):
        task = await start_task(a, "hold")
        await wait_for_state(b, task["id"], "TASK_STATE_WORKING")
        canceled = await rpc(b, "CancelTask", {"id": task["id"]})
        answered = time.time()
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        stopped_file = cluster.directory / f"{task['id']}.stopped"
        await wait_for_file(stopped_file)
        stopped_at, name = stopped_file.read_text().split()
        assert name == "p0"
        delays.append(float(stopped_at) - answered)
    # The holder stops the execution before the canceller hears of the ending.
    assert statistics.median(delays) <= 0.05, delays


async def test_a_subscriber_misses_nothing_when_its_process_loses_its_wake_ups(
    cluster: Cluster,
) -> None:
    a, b, _ = cluster.processes
    task = await start_task(a, "burst 10 50")

    def lose_wake_ups() -> None:
        # Once the subscription is in: every listening connection of the cluster
        # goes (each reconnects and reads its live tasks back from the log), and
        # only then does the task go on, so that it cannot end before it is followed.
        execute(
            cluster.database,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            LISTENER_APPLICATION,
        )
        (cluster.directory / f"{task['id']}.go").touch()

    with trio.fail_after(20):  # without the catch-up, the stream would wait for good
        received = await frames(b, "SubscribeToTask", {"id": task["id"]}, after_first=lose_wake_ups)
    states = [state_of(result) for _, result in received]
    assert states[-1] == "TASK_STATE_COMPLETED"
    ids = [int(event_id) for event_id, _ in received if event_id is not None]
    logged = rows(
        cluster.database, "SELECT seq FROM task_events WHERE task_id = %s ORDER BY seq", task["id"]
    )
    assert ids[1:] == [seq for (seq,) in logged if seq > ids[0]], "nothing missed, nothing twice"


# --- many messages to the same tasks, from every process ------------------------------------


# Serial (noxfile.py): 2,000 messages through three processes within 120 s, which
# four workers' servers beside it on two cores would crowd out.
@pytest.mark.serial
async def test_no_task_ever_runs_twice_at_once(cluster: Cluster) -> None:
    processes = cluster.processes
    tasks = [
        (await rpc(processes[n % 3], "SendMessage", {"message": user_message("count")}))["task"]
        for n in range(50)
    ]
    assert {t["status"]["state"] for t in tasks} == {"TASK_STATE_INPUT_REQUIRED"}
    answers: list[str] = []

    async def send(n: int, http: httpx.AsyncClient, limit: trio.Semaphore) -> None:
        async with limit:
            message = user_message("count", taskId=tasks[n % 50]["id"])
            task = (await call(http, "SendMessage", {"message": message}))["task"]
            answers.append(task["status"]["state"])

    clients = [client(server) for server in processes]
    limit = trio.Semaphore(150)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            for n in range(2000):
                nursery.start_soon(send, n, clients[n % 3], limit)
    for http in clients:
        await http.aclose()
    assert answers == ["TASK_STATE_INPUT_REQUIRED"] * 2000
    assert not (cluster.directory / "violations").exists()
    for task in tasks:
        runs = (cluster.directory / f"{task['id']}.runs").read_text().split()
        assert len(runs) == 41  # the first message and 40 follow-ups, each once


# --- a process that dies ----------------------------------------------------------------------


async def test_a_task_of_a_killed_process_fails_within_the_lease(cluster: Cluster) -> None:
    [doomed] = cluster.start(1)
    survivor = cluster.processes[0]
    task = await start_task(doomed, "hold")
    await wait_for_state(survivor, task["id"], "TASK_STATE_WORKING")
    doomed.kill()
    killed = time.monotonic()
    failed = await wait_for_state(
        survivor, task["id"], "TASK_STATE_FAILED", within=LEASE_SECONDS + 5
    )
    assert time.monotonic() - killed <= LEASE_SECONDS + 2
    assert "server stopped" in failed["status"]["message"]["parts"][0]["text"]


async def test_webhooks_of_a_task_go_out_in_order_and_none_is_lost_when_a_process_dies(
    cluster: Cluster,
) -> None:
    [doomed] = cluster.start(1)
    async with webhook_receiver(default=Reply(delay=0.1)) as hook:
        config = {"url": hook.url}
        answer = await rpc(
            doomed,
            "SendMessage",
            {
                "message": user_message("tick 20"),
                "configuration": {"returnImmediately": True, "taskPushNotificationConfig": config},
            },
        )
        task_id = answer["task"]["id"]
        await hook.wait_for(3)
        doomed.kill()
        survivor = cluster.processes[0]
        await wait_for_state(survivor, task_id, "TASK_STATE_FAILED", within=LEASE_SECONDS + 5)
        queued = rows(
            cluster.database,
            "SELECT notification_id, payload::text, state FROM push_outbox"
            " WHERE task_id = %s ORDER BY id",
            task_id,
        )
        with trio.fail_after(20):
            while {state for _, _, state in queued} != {"delivered"}:
                await trio.sleep(0.1)
                queued = rows(
                    cluster.database,
                    "SELECT notification_id, payload::text, state FROM push_outbox"
                    " WHERE task_id = %s ORDER BY id",
                    task_id,
                )
    # The one in flight at the kill may come twice (same id): the receiver dedupes.
    first_arrivals: dict[str, bytes] = {}
    for request in hook.requests:
        first_arrivals.setdefault(request.notification_id, request.body)
    assert list(first_arrivals) == [notification_id for notification_id, _, _ in queued]
    assert [json.loads(body) for body in first_arrivals.values()] == [
        json.loads(payload) for _, payload, _ in queued
    ]
    assert state_of(json.loads(queued[-1][1])) == "TASK_STATE_FAILED"
    assert len(hook.requests) - len(first_arrivals) <= 1


# --- a database connection lost under a live stream -------------------------------------------


async def test_a_stream_ends_with_the_failure_recorded_after_its_connection_was_killed(
    cluster: Cluster,
) -> None:
    # The execution's next write waits on a row lock this test holds; its
    # connection is killed there, then the connection of the host's attempt to
    # end the task FAILED too. Once the lock goes, the host's retry records the
    # FAILED ending: the stream, still open, must relay it as its last event.
    server = cluster.processes[0]
    location = parse_database_url(cluster.database)
    assert isinstance(location, PostgresLocation)
    received: list[tuple[str | None, dict[str, Any]]] = []
    first = trio.Event()
    body = {
        "jsonrpc": "2.0",
        "id": "s",
        "method": "SendStreamingMessage",
        "params": {"message": user_message("tick 200")},
    }

    async def stream() -> None:
        headers = {"Accept": "text/event-stream"}
        async with (
            client(server) as http,
            http.stream("POST", "/jsonrpc", json=body, headers=headers) as response,
        ):
            event_id = None
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    event_id = line[3:].strip()
                elif line.startswith("data:"):
                    received.append((event_id, json.loads(line[5:])["result"]))
                    first.set()

    with trio.fail_after(30), admin_connect(location) as admin:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream)
            await first.wait()
            task_id = received[0][1]["task"]["id"]
            admin.autocommit = False
            admin.execute("SELECT 1 FROM tasks WHERE id = %s FOR UPDATE", (task_id,))
            killed: set[object] = set()
            while len(killed) < 2:  # the execution's write, then the host's ending
                await trio.sleep(0.02)
                for pid, _ in admin.execute(
                    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    " AND wait_event_type = 'Lock'"
                ).fetchall():
                    killed.add(pid)
            admin.commit()
    states = [state_of(result) for _, result in received]
    assert states[-1] == "TASK_STATE_FAILED", states[-3:]
    ids = [int(event_id) for event_id, _ in received if event_id is not None]
    logged = rows(cluster.database, LOGGED_SEQS, task_id)
    assert ids == [seq for (seq,) in logged], "the stream relays the log to its last event"

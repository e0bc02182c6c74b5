"""Webhook notifications survive SIGKILL: what was pending is delivered after the restart, once.

One crash serves every test here. A server process (``tests.push_app:app``)
delivers the first updates of an ``ask`` task to a receiver that answers 200;
then the receiver answers 503 to everything, the task is answered (three more
updates) and a ``hold`` task starts (two updates), so five notifications are
pending, retried again and again. The server is killed with SIGKILL (all of
its processes: hypercorn serves from a worker it spawns), the
receiver turns to 200, and a new server process starts on the same database.
The receiver runs in this process; the store is read from the database, as the
CLI does. The crash happens once per backend: on a SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from a2a_trio.store import Delivery
from a2a_trio.store.factory import store_at

from .conftest import VERSION_HEADERS, user_message
from .postgres import BACKENDS, database_for
from .servers import ServerProcess
from .webhooks import Received, Reply, webhook_receiver

APP = "tests.push_app:app"
#: What tests/push_app.py reads (importing it here would build its app).
DATABASE_ENV = "A2A_TRIO_DATABASE"
#: Retry quickly and never give up while the receiver refuses.
PUSH_ENV = {
    "A2A_TRIO_PUSH_BACKOFF": "0.1",
    "A2A_TRIO_PUSH_MAX_WAIT": "0.5",
    "A2A_TRIO_PUSH_MAX_ATTEMPTS": "1000",
}
TIMEOUT = 30.0
#: Time for requests the killed server had already sent to reach the receiver.
#: How long the killed server's workers may take to go (their sockets with them).
SETTLE_AFTER_KILL = 10.0
ASKED, HELD = "/asked", "/held"


async def _still_listens(port: int, within: float) -> bool:
    """Whether something still accepts on ``port`` after ``within`` seconds of trying."""
    with trio.move_on_after(within):
        while True:
            try:
                leftover = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                return False
            await leftover.aclose()
            await trio.sleep(0.05)
    return True


def start_server(database: str, log_path: Path) -> ServerProcess:
    """``tests.push_app:app`` on ``database``, answering once its card does."""
    return ServerProcess.start(database, log_path, app=APP, env=PUSH_ENV)


async def rpc(client: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = (await client.post("/jsonrpc", json=body)).json()
    assert "error" not in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def send(
    client: httpx.AsyncClient,
    text: str,
    *,
    configuration: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    params: dict[str, Any] = {"message": user_message(text, **fields)}
    if configuration:
        params["configuration"] = configuration
    task: dict[str, Any] = (await rpc(client, "SendMessage", params))["task"]
    return task


async def replayed_log(client: httpx.AsyncClient, task_id: str) -> list[tuple[int, bytes]]:
    """The task's streamed events as SSE carries them: (event id, data bytes)."""
    frames: list[tuple[int, bytes]] = []
    event_id = -1
    async with client.stream(
        "POST", f"/rest/tasks/{task_id}:subscribe", headers={"Last-Event-ID": "0"}
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:])
            elif line.startswith("data:"):
                frames.append((event_id, line[5:].removeprefix(" ").encode()))
    return frames


async def store_until(
    database: str, task_id: str, done: Callable[[list[Delivery]], bool]
) -> list[Delivery]:
    """The task's deliveries once ``done`` says so, read from the database."""
    store = store_at(database)
    await store.open()
    try:
        with trio.fail_after(TIMEOUT):
            # Another process writes the database: there is nothing to wait on but time.
            while not done(deliveries := await store.deliveries(task_id=task_id)):  # noqa: ASYNC110
                await trio.sleep(0.05)
        return deliveries
    finally:
        await store.aclose()


def all_delivered(count: int) -> Callable[[list[Delivery]], bool]:
    return lambda deliveries: (
        len(deliveries) == count and all(d.state == "delivered" for d in deliveries)
    )


@dataclass
class Crash:
    asked_id: str
    held_id: str
    #: Notifications the store had recorded delivered when the server was killed.
    delivered_before: list[Delivery]
    #: Notifications still pending when the server was killed, oldest first.
    pending_before: list[Delivery]
    requests_before: list[Received]
    requests_after: list[Received]
    deliveries_after: dict[str, list[Delivery]]
    logs: dict[str, list[tuple[int, bytes]]]
    #: Whether anything still accepted connections on the killed server's port.
    killed_server_listens: bool


async def crash_scenario(directory: Path, database: str) -> Crash:
    async with webhook_receiver() as hook:
        webhook_of: Callable[[str], dict[str, Any]] = lambda path: {  # noqa: E731
            "taskPushNotificationConfig": {"url": hook.url_for(path), "token": "t"}
        }
        first = await trio.to_thread.run_sync(start_server, database, directory / "first.log")
        try:
            async with httpx.AsyncClient(
                base_url=first.url, headers=VERSION_HEADERS, timeout=TIMEOUT, trust_env=False
            ) as client:
                asked = await send(client, "ask me", configuration=webhook_of(ASKED))
                assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                await store_until(database, asked["id"], all_delivered(3))
                hook.default = Reply(503)
                answered = await send(client, "Ada", taskId=asked["id"])
                assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
                held = await send(
                    client,
                    "hold the line",
                    configuration={**webhook_of(HELD), "returnImmediately": True},
                )
                with trio.fail_after(TIMEOUT):
                    # Refused more than once each: the lanes are retrying.
                    await hook.wait_answered(3 + 2, ASKED)
                    await hook.wait_answered(2, HELD)
            status = await trio.to_thread.run_sync(first.kill)
        finally:
            await trio.to_thread.run_sync(first.stop)
        assert status == -signal.SIGKILL, first.output()
        killed_server_listens = await _still_listens(first.port, SETTLE_AFTER_KILL)
        store = store_at(database)
        await store.open()
        try:
            at_kill = await store.deliveries()
        finally:
            await store.aclose()
        requests_before = list(hook.requests)
        hook.default = Reply(200)

        restarted = await trio.to_thread.run_sync(
            start_server, database, directory / "restarted.log"
        )
        try:
            deliveries_after = {
                asked["id"]: await store_until(database, asked["id"], all_delivered(6)),
                # The restart ends the held task FAILED: one more update to deliver.
                held["id"]: await store_until(database, held["id"], all_delivered(3)),
            }
            async with httpx.AsyncClient(
                base_url=restarted.url, headers=VERSION_HEADERS, timeout=TIMEOUT, trust_env=False
            ) as client:
                logs = {
                    task_id: await replayed_log(client, task_id)
                    for task_id in (asked["id"], held["id"])
                }
        finally:
            await trio.to_thread.run_sync(restarted.stop)
        return Crash(
            asked_id=asked["id"],
            held_id=held["id"],
            delivered_before=[d for d in at_kill if d.state == "delivered"],
            pending_before=[d for d in at_kill if d.state == "pending"],
            requests_before=requests_before,
            requests_after=hook.requests[len(requests_before) :],
            deliveries_after=deliveries_after,
            logs=logs,
            killed_server_listens=killed_server_listens,
        )


@pytest.fixture(scope="module", params=BACKENDS)
def crash(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Crash]:
    directory = tmp_path_factory.mktemp("push-restart")
    yield trio.run(crash_scenario, directory, database_for(request.param, directory, request))


def on_path(requests: list[Received], path: str) -> list[Received]:
    return [request for request in requests if request.path == path]


def test_nothing_of_the_killed_server_is_left_listening(crash: Crash) -> None:
    assert not crash.killed_server_listens


def test_the_kill_left_the_first_updates_delivered_and_the_later_ones_pending(
    crash: Crash,
) -> None:
    assert [(d.task_id, d.seq) for d in crash.delivered_before] == [
        (crash.asked_id, seq) for seq in (1, 2, 3)
    ]
    assert sorted((d.task_id == crash.held_id, d.seq) for d in crash.pending_before) == [
        (False, 5),
        (False, 6),
        (False, 7),
        (True, 1),
        (True, 2),
    ]
    refused = [r for r in crash.requests_before if r.reply.status == 503]
    assert {r.notification_id for r in refused} <= {d.notification_id for d in crash.pending_before}


def test_every_pending_notification_is_delivered_after_the_restart_in_order(
    crash: Crash,
) -> None:
    for path, task_id, seqs in ((ASKED, crash.asked_id, [5, 6, 7]), (HELD, crash.held_id, [1, 2])):
        pending = [d for d in crash.pending_before if d.task_id == task_id]
        after = on_path(crash.requests_after, path)
        assert [d.seq for d in pending] == seqs
        assert [r.notification_id for r in after[: len(seqs)]] == [
            d.notification_id for d in pending
        ]
        assert all(r.reply.status == 200 for r in after)


def test_the_bodies_delivered_after_the_restart_are_the_events_the_stream_replays(
    crash: Crash,
) -> None:
    asked_log, held_log = crash.logs[crash.asked_id], crash.logs[crash.held_id]
    assert [seq for seq, _ in asked_log] == [1, 2, 3, 5, 6, 7]
    assert [r.body for r in on_path(crash.requests_after, ASKED)] == [d for _, d in asked_log[3:]]
    assert [seq for seq, _ in held_log] == [1, 2, 3]
    assert [r.body for r in on_path(crash.requests_after, HELD)] == [d for _, d in held_log]


def test_no_notification_delivered_before_the_kill_is_sent_again(crash: Crash) -> None:
    delivered = {d.notification_id for d in crash.delivered_before}
    assert len(delivered) == 3
    assert delivered.isdisjoint(r.notification_id for r in crash.requests_after)


def test_each_notification_is_delivered_exactly_once_after_the_restart(crash: Crash) -> None:
    [ending] = [d for d in crash.deliveries_after[crash.held_id] if d.seq == 3]
    expected = [d.notification_id for d in crash.pending_before] + [ending.notification_id]
    ids = [r.notification_id for r in crash.requests_after]
    assert sorted(ids) == sorted(expected)
    assert len(set(ids)) == len(ids) == 6


def test_the_ending_of_a_task_running_at_the_kill_is_notified_after_the_restart(
    crash: Crash,
) -> None:
    [*_, failed] = on_path(crash.requests_after, HELD)
    update = failed.json()["statusUpdate"]
    assert update["taskId"] == crash.held_id
    assert update["status"]["state"] == "TASK_STATE_FAILED"
    assert "server stopped" in update["status"]["message"]["parts"][0]["text"]


def test_retries_before_and_after_the_restart_keep_the_notification_id(crash: Crash) -> None:
    for path in (ASKED, HELD):
        refused = [r for r in on_path(crash.requests_before, path) if r.reply.status == 503]
        first_after = on_path(crash.requests_after, path)[0]
        assert refused[0].notification_id == first_after.notification_id
        assert refused[0].body == first_after.body

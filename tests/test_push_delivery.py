"""Webhook delivery end to end: a live a2a-trio server POSTs each task update to a real receiver.

The server and the receiver (tests/webhooks.py) listen on 127.0.0.1 in the
test's trio run. Tests about waits run on a mock clock that jumps ahead only
when nothing has happened for a moment of real time (see ``idle_clock``), so a
30 s backoff takes milliseconds while socket I/O in flight is still awaited.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from a2a_trio import A2AApp
from a2a_trio.protocol import AgentCapabilities
from a2a_trio.push import AddressScreen, PushDispatcher, PushSettings, ScreenedTarget
from a2a_trio.push.screening import system_resolver
from a2a_trio.store import Delivery

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message, worker_aware
from .postgres import broken, raising_trigger
from .webhooks import Received, Reply, WebhookReceiver, webhook_receiver

#: The receiver listens on loopback, which screening refuses unless allow-listed.
LOOPBACK = ("127.0.0.1",)
ALLOW_RECEIVER = PushSettings(allowed_hosts=LOOPBACK)
TOKEN = "per-task-token"
CREDENTIALS = "receiver-credential"
#: Bound on waiting for deliveries (trio's clock: mock seconds on the mock clock).
SETTLE_TIMEOUT = 60.0
#: The states of an ``echo`` task's updates, in the order they happen.
ECHO_UPDATES = [
    ("task", "TASK_STATE_SUBMITTED"),
    ("statusUpdate", "TASK_STATE_WORKING"),
    ("artifactUpdate", "hello"),
    ("statusUpdate", "TASK_STATE_COMPLETED"),
]


@pytest.fixture
def idle_clock(monkeypatch: pytest.MonkeyPatch) -> trio.testing.MockClock:
    """trio's clock for this run: jumps to the next deadline after 50 ms of real idleness.

    (A threshold of 0 would jump while a request is on the wire and time out
    every attempt.) Nor does it jump while a worker thread runs a query.
    """
    return worker_aware(trio.testing.MockClock(autojump_threshold=0.05), monkeypatch)


#: A wall clock that moves with trio's clock. The dispatcher stores due times on
#: the wall clock (for restarts) and re-checks them after its own trio sleep; on
#: the mock clock the real wall clock would stand still and every wait would be
#: waited twice.
_WALL_EPOCH = time.time()


def trio_wall_clock() -> float:
    return _WALL_EPOCH + trio.current_time()


# --- helpers ------------------------------------------------------------------------


@asynccontextmanager
async def push_server(
    tmp_path: Path,
    settings: PushSettings = ALLOW_RECEIVER,
    *,
    executor: ScriptedExecutor | None = None,
    database: str | None = None,
    screen: AddressScreen | None = None,
    on_trio_clock: bool = False,
    push_notifications: bool = True,
) -> AsyncIterator[LiveServer]:
    """A live server with the scripted agent; ``screen`` and the clock replace the defaults.

    Its database is ``database`` (a URL), or a SQLite file in ``tmp_path``.
    """

    def configure(app: A2AApp) -> None:
        if screen is not None or on_trio_clock:
            app.push = PushDispatcher(
                app.store,
                app.push_settings,
                screen=screen,
                wall_clock=trio_wall_clock if on_trio_clock else time.time,
            )
        app.mount(
            "",
            card=make_card(
                capabilities=AgentCapabilities(
                    streaming=True, push_notifications=push_notifications
                )
            ),
            executor=executor or ScriptedExecutor(),
        )

    async with live_server(
        tmp_path, configure, push_settings=settings, database=database or tmp_path / "a2a.db"
    ) as server:
        yield server


def webhook(
    url: str,
    *,
    config_id: str | None = None,
    token: str | None = TOKEN,
    credentials: str | None = CREDENTIALS,
) -> dict[str, Any]:
    """A TaskPushNotificationConfig in ProtoJSON."""
    config: dict[str, Any] = {"url": url}
    if config_id:
        config["id"] = config_id
    if token:
        config["token"] = token
    if credentials:
        config["authentication"] = {"scheme": "Bearer", "credentials": credentials}
    return config


async def rpc(server: LiveServer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call that must succeed; its result."""
    body = await server.jsonrpc(method, params)
    assert "error" not in body, body
    result: dict[str, Any] = body["result"]
    return result


async def rpc_error(server: LiveServer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call that must fail; its error object."""
    body = await server.jsonrpc(method, params)
    assert "error" in body, body
    error: dict[str, Any] = body["error"]
    return error


async def send(
    server: LiveServer,
    text: str,
    *,
    config: dict[str, Any] | None = None,
    return_immediately: bool = False,
    **message_fields: Any,
) -> dict[str, Any]:
    """SendMessage (blocking unless told); the task it answers with."""
    configuration: dict[str, Any] = {}
    if config is not None:
        configuration["taskPushNotificationConfig"] = config
    if return_immediately:
        configuration["returnImmediately"] = True
    params: dict[str, Any] = {"message": user_message(text, **message_fields)}
    if configuration:
        params["configuration"] = configuration
    result = await rpc(server, "SendMessage", params)
    task: dict[str, Any] = result["task"]
    return task


async def replayed_log(server: LiveServer, task_id: str) -> list[tuple[int, bytes]]:
    """Every streamed event of a finished task as SSE sends it: (event id, data bytes).

    SubscribeToTask (HTTP+JSON) with ``Last-Event-ID: 0`` replays the whole log.
    """
    frames: list[tuple[int, bytes]] = []
    event_id = -1
    data: list[str] = []
    async with server.client.stream(
        "POST", f"/rest/tasks/{task_id}:subscribe", headers={"Last-Event-ID": "0"}
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:])
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                frames.append((event_id, "\n".join(data).encode()))
                data = []
    return frames


def describe(body: dict[str, Any]) -> tuple[str, str]:
    """A StreamResponse as (its kind, the state or the artifact text)."""
    [(kind, event)] = body.items()
    if kind == "task":
        return kind, event["status"]["state"]
    if kind == "statusUpdate":
        return kind, event["status"]["state"]
    return kind, "".join(part["text"] for part in event["artifact"]["parts"])


def described(requests: list[Received]) -> list[tuple[str, str]]:
    return [describe(request.json()) for request in requests]


async def settled(
    server: LiveServer, task_id: str, count: int, *, poll: float = 0.01
) -> list[Delivery]:
    """The task's ``count`` notifications once none of them is pending any more."""
    with trio.fail_after(SETTLE_TIMEOUT):
        while True:
            deliveries = await server.app.store.deliveries(task_id=task_id)
            if len(deliveries) >= count and all(d.state != "pending" for d in deliveries):
                assert len(deliveries) == count, deliveries
                return deliveries
            await trio.sleep(poll)


async def echo_delivered(
    server: LiveServer, hook: WebhookReceiver, requests: int, **config: Any
) -> tuple[dict[str, Any], list[Received], list[Delivery]]:
    """Send ``echo hello`` with a webhook; wait for ``requests`` answered and all settled."""
    task = await send(server, "echo hello", config=webhook(hook.url, **config))
    with trio.fail_after(SETTLE_TIMEOUT):
        received = await hook.wait_answered(requests)
    return task, received, await settled(server, task["id"], len(ECHO_UPDATES))


def statuses(delivery: Delivery) -> list[int | None]:
    return [attempt.status for attempt in delivery.attempts]


async def _judged(server: LiveServer, answers: list[int | None]) -> bool:
    """Whether a delivery's attempts are stored with exactly these answers."""
    return any(statuses(delivery) == answers for delivery in await server.app.store.deliveries())


# --- what a receiver gets --------------------------------------------------------------


async def test_each_update_is_posted_in_order_as_the_event_its_stream_carries(
    tmp_path: Path,
    database: str,
) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        task, received, _ = await echo_delivered(server, hook, 4)
        log = await replayed_log(server, task["id"])
    assert [seq for seq, _ in log] == [1, 2, 3, 4]
    assert [request.body for request in received] == [data for _, data in log]
    assert described(received) == ECHO_UPDATES
    assert all(
        request.json()[kind]["id" if kind == "task" else "taskId"] == task["id"]
        for request, (kind, _) in zip(received, ECHO_UPDATES, strict=True)
    )


async def test_a_notification_is_a_json_post_with_its_length(tmp_path: Path, database: str) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        _, received, _ = await echo_delivered(server, hook, 4)
    for request in received:
        assert (request.method, request.path) == ("POST", "/hook")
        assert request.headers["content-type"] == "application/json"
        assert request.headers["content-length"] == str(len(request.body))
        assert request.headers["host"] == f"127.0.0.1:{hook.port}"


async def test_a_notification_carries_the_credentials_and_token_of_its_config(
    tmp_path: Path,
    database: str,
) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        _, received, _ = await echo_delivered(server, hook, 4)
    assert {request.headers["authorization"] for request in received} == {f"Bearer {CREDENTIALS}"}
    assert {request.headers["x-a2a-notification-token"] for request in received} == {TOKEN}


async def test_each_notification_has_its_own_id_as_the_store_records_it(
    tmp_path: Path, database: str
) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        _, received, deliveries = await echo_delivered(server, hook, 4)
    ids = [request.notification_id for request in received]
    assert len(set(ids)) == 4
    assert all(re.fullmatch(r"[0-9a-f]{32}", notification_id) for notification_id in ids)
    assert ids == [delivery.notification_id for delivery in deliveries]
    assert [(d.state, d.attempts_made, statuses(d)) for d in deliveries] == [
        ("delivered", 1, [200])
    ] * 4


async def test_a_config_without_token_or_authentication_sends_neither_header(
    tmp_path: Path,
    database: str,
) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        _, received, _ = await echo_delivered(server, hook, 4, token=None, credentials=None)
    for request in received:
        assert "authorization" not in request.headers
        assert "x-a2a-notification-token" not in request.headers


async def test_a_config_created_for_a_running_task_gets_the_updates_from_then_on(
    tmp_path: Path,
    database: str,
) -> None:
    executor = ScriptedExecutor()
    async with (
        webhook_receiver() as hook,
        push_server(tmp_path, database=database, executor=executor) as server,
    ):
        task = await send(server, "hold on", return_immediately=True)
        with trio.fail_after(10):
            await executor.gate.reached.wait()
        created = await rpc(
            server,
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], **webhook(hook.url, config_id="later")},
        )
        assert created["id"] == "later"
        executor.gate.release.set()
        with trio.fail_after(10):
            received = await hook.wait_answered(2)
        deliveries = await settled(server, task["id"], 2)
        log = await replayed_log(server, task["id"])
    assert [seq for seq, _ in log] == [1, 2, 3, 4]
    assert [request.body for request in received] == [data for _, data in log[2:]]
    assert described(received) == [
        ("artifactUpdate", "released"),
        ("statusUpdate", "TASK_STATE_COMPLETED"),
    ]
    assert {d.config_id for d in deliveries} == {"later"}
    assert {request.headers["authorization"] for request in received} == {f"Bearer {CREDENTIALS}"}


async def test_two_configs_of_one_task_each_receive_every_update_in_order(
    tmp_path: Path,
    database: str,
) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        asked = await send(
            server, "ask me", config=webhook(hook.url_for("/a"), config_id="a", token="token-a")
        )
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        await rpc(
            server,
            "CreateTaskPushNotificationConfig",
            {"taskId": asked["id"], **webhook(hook.url_for("/b"), config_id="b", token="token-b")},
        )
        await send(server, "Ada", taskId=asked["id"])
        with trio.fail_after(10):
            to_a = await hook.wait_answered(6, "/a")
            to_b = await hook.wait_answered(3, "/b")
        await settled(server, asked["id"], 9)
        log = await replayed_log(server, asked["id"])
    # Event 4 is the client's second message: history, not a streamed update.
    assert [seq for seq, _ in log] == [1, 2, 3, 5, 6, 7]
    assert [request.body for request in to_a] == [data for _, data in log]
    assert [request.body for request in to_b] == [data for _, data in log[3:]]
    assert {request.headers["x-a2a-notification-token"] for request in to_a} == {"token-a"}
    assert {request.headers["x-a2a-notification-token"] for request in to_b} == {"token-b"}
    assert not {r.notification_id for r in to_a} & {r.notification_id for r in to_b}


# --- retries -------------------------------------------------------------------------------


async def test_a_5xx_is_retried_with_the_same_notification_id_until_delivered(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    async with (
        webhook_receiver(Reply(503), Reply(503)) as hook,
        push_server(tmp_path, database=database, on_trio_clock=True) as server,
    ):
        _, received, deliveries = await echo_delivered(server, hook, 6)
    first = received[:3]
    assert [request.reply.status for request in first] == [503, 503, 200]
    assert len({request.notification_id for request in first}) == 1
    assert first[0].body == first[1].body == first[2].body
    assert first[0].notification_id == deliveries[0].notification_id
    assert (deliveries[0].state, deliveries[0].attempts_made) == ("delivered", 3)
    assert statuses(deliveries[0]) == [503, 503, 200]
    assert [a.error for a in deliveries[0].attempts] == ["HTTP 503", "HTTP 503", None]
    assert deliveries[0].last_error is None
    # The lane waited for its first notification: the rest follow, once each.
    assert described(received[2:]) == ECHO_UPDATES
    assert [d.state for d in deliveries[1:]] == ["delivered"] * 3


async def test_retries_wait_the_backoff_doubling_from_its_base(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    settings = dataclasses.replace(ALLOW_RECEIVER, backoff=0.5, max_attempts=4)
    async with (
        webhook_receiver(Reply(500), Reply(502), Reply(503)) as hook,
        push_server(tmp_path, settings, database=database, on_trio_clock=True) as server,
    ):
        _, received, deliveries = await echo_delivered(server, hook, 7)
    times = [request.at for request in received[:4]]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert gaps == pytest.approx([0.5, 1.0, 2.0], abs=0.01)
    assert statuses(deliveries[0]) == [500, 502, 503, 200]


async def test_retry_after_in_seconds_sets_the_wait_before_the_retry(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    async with (
        webhook_receiver(Reply(429, headers={"Retry-After": "2"})) as hook,
        push_server(tmp_path, database=database, on_trio_clock=True) as server,
    ):
        _, received, deliveries = await echo_delivered(server, hook, 5)
    assert received[1].at - received[0].at == pytest.approx(2.0, abs=0.01)
    assert received[0].notification_id == received[1].notification_id
    assert statuses(deliveries[0]) == [429, 200]


async def test_a_receiver_that_keeps_failing_leaves_a_dead_letter_and_the_lane_goes_on(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    settings = dataclasses.replace(ALLOW_RECEIVER, max_attempts=3)
    async with (
        webhook_receiver(Reply(500), Reply(500), Reply(500)) as hook,
        push_server(tmp_path, settings, database=database, on_trio_clock=True) as server,
    ):
        _, received, deliveries = await echo_delivered(server, hook, 6)
    assert (deliveries[0].state, deliveries[0].attempts_made) == ("failed", 3)
    assert deliveries[0].last_error == "HTTP 500 (gave up after 3 attempts)"
    assert described(received[3:]) == ECHO_UPDATES[1:]
    assert [d.state for d in deliveries[1:]] == ["delivered"] * 3


async def test_a_receiver_that_does_not_answer_in_time_fails_each_attempt_then_gives_up(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    settings = dataclasses.replace(ALLOW_RECEIVER, timeout=1.0, max_attempts=3)
    async with (
        webhook_receiver(default=Reply(delay=600)) as hook,
        push_server(tmp_path, settings, database=database, on_trio_clock=True) as server,
    ):
        task = await send(server, "echo hello", config=webhook(hook.url))
        with trio.fail_after(SETTLE_TIMEOUT):
            # The lane moves on to the second update only once the first has failed.
            received = await hook.wait_for(4)
        [first, *_] = await server.app.store.deliveries(task_id=task["id"])
    assert len({request.notification_id for request in received[:3]}) == 1
    assert received[3].notification_id != received[0].notification_id
    assert all(request.answered_at is None for request in received)
    # Each attempt is given exactly the timeout, then the backoff: 0.5 s, 1 s.
    gaps = [b.at - a.at for a, b in itertools.pairwise(received[:3])]
    assert gaps == pytest.approx([1.5, 2.0], abs=0.01)
    assert (first.state, first.attempts_made) == ("failed", 3)
    assert [a.error for a in first.attempts] == ["no answer within 1 s"] * 2 + [
        "no answer within 1 s (gave up after 3 attempts)"
    ]
    assert [a.status for a in first.attempts] == [None] * 3
    assert [a.duration_ms for a in first.attempts] == pytest.approx([1000.0] * 3, abs=10)
    assert first.last_error == "no answer within 1 s (gave up after 3 attempts)"


# --- not retried ---------------------------------------------------------------------------


async def test_a_redirect_is_not_followed_and_the_notification_is_a_dead_letter(
    tmp_path: Path,
    database: str,
) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        hook.script(Reply(302, headers={"Location": hook.url_for("/elsewhere")}))
        _, received, deliveries = await echo_delivered(server, hook, 4)
    assert [request.path for request in received] == ["/hook"] * 4
    assert hook.on_path("/elsewhere") == []
    assert (deliveries[0].state, deliveries[0].attempts_made) == ("failed", 1)
    assert statuses(deliveries[0]) == [302]
    assert deliveries[0].last_error is not None and "redirect" in deliveries[0].last_error


async def test_updates_after_a_redirected_one_are_still_delivered(
    tmp_path: Path, database: str
) -> None:
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        hook.script(Reply(302, headers={"Location": hook.url_for("/elsewhere")}))
        _, received, deliveries = await echo_delivered(server, hook, 4)
    assert described(received) == ECHO_UPDATES
    assert len({request.notification_id for request in received}) == 4
    assert [d.state for d in deliveries] == ["failed", "delivered", "delivered", "delivered"]


@pytest.mark.parametrize("status", [400, 404])
async def test_a_client_error_is_not_retried(tmp_path: Path, database: str, status: int) -> None:
    async with (
        webhook_receiver(Reply(status)) as hook,
        push_server(tmp_path, database=database) as server,
    ):
        _, received, deliveries = await echo_delivered(server, hook, 4)
    # Four requests for four updates: the refused one was not sent again.
    assert len({request.notification_id for request in received}) == 4
    assert (deliveries[0].state, deliveries[0].attempts_made) == ("failed", 1)
    assert deliveries[0].last_error == f"HTTP {status}"
    assert [d.state for d in deliveries[1:]] == ["delivered"] * 3


async def test_a_malformed_retry_after_falls_back_to_the_backoff(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    async with (
        webhook_receiver(Reply(503, headers={"Retry-After": "²"})) as hook,
        push_server(tmp_path, database=database, on_trio_clock=True) as server,
    ):
        _, received, deliveries = await echo_delivered(server, hook, 5)
    assert received[1].at - received[0].at == pytest.approx(0.5, abs=0.01)
    assert statuses(deliveries[0]) == [503, 200]


async def test_a_receiver_answering_a_malformed_retry_after_does_not_stop_the_agent(
    tmp_path: Path,
    database: str,
) -> None:
    async with (
        webhook_receiver(Reply(503, headers={"Retry-After": "²"})) as hook,
        push_server(tmp_path, database=database) as server,
    ):
        await send(server, "echo hello", config=webhook(hook.url))
        with trio.fail_after(10):
            await hook.wait_answered(1)
        # The dispatcher has read the answer and judged it: its attempt is stored.
        with trio.fail_after(10):
            while not await _judged(server, [503]):  # noqa: ASYNC110  (polled: nothing tells)
                await trio.sleep(0.02)
        body = await server.jsonrpc("SendMessage", {"message": user_message("echo again")})
    assert body.get("result", {}).get("task", {}).get("status", {}).get("state") == (
        "TASK_STATE_COMPLETED"
    ), body


# --- queued and direct mode ------------------------------------------------------------------


async def timed_send(server: LiveServer, text: str, **kw: Any) -> tuple[float, float]:
    started = trio.current_time()
    task = await send(server, text, **kw)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return started, trio.current_time()


# Serial (noxfile.py): it compares two answers' real times within 50 ms, which four
# workers on two cores spread (0.099 s against 0.003 s once on -n 4).
@pytest.mark.serial
async def test_a_slow_webhook_does_not_delay_a_blocking_send_in_queued_mode(
    tmp_path: Path,
    database: str,
) -> None:
    # Real time, on purpose: the claim is about what a client waits.
    async with webhook_receiver() as hook, push_server(tmp_path, database=database) as server:
        # A first task to the same webhook, answered at once: the dispatcher's
        # HTTP client for the receiver exists before anything is measured.
        await timed_send(server, "echo warm up", config=webhook(hook.url))
        with trio.fail_after(10):
            await hook.wait_answered(4)
        started, answered = await timed_send(server, "echo without a webhook")
        without_webhook = answered - started
        hook.script(Reply(delay=3.0))
        started, answered = await timed_send(server, "echo hello", config=webhook(hook.url))
        with_webhook = answered - started
        with trio.fail_after(15):
            received = (await hook.wait_answered(8))[4:]
        task_id = received[0].json()["task"]["id"]
        deliveries = await settled(server, task_id, 4)
    assert with_webhook - without_webhook < 0.05, (with_webhook, without_webhook)
    # The answer came while the webhook was still taking its time.
    assert received[0].answered_at is not None and received[0].answered_at - answered > 2.5
    assert [d.state for d in deliveries] == ["delivered"] * 4
    assert described(received) == ECHO_UPDATES


DIRECT = dataclasses.replace(ALLOW_RECEIVER, queue=False)


async def test_direct_mode_delivers_every_update_in_order(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    async with (
        webhook_receiver(default=Reply(delay=1.0)) as hook,
        push_server(tmp_path, DIRECT, database=database) as server,
    ):
        task, received, deliveries = await echo_delivered(server, hook, 4)
        log = await replayed_log(server, task["id"])
    assert [request.body for request in received] == [data for _, data in log]
    assert [d.state for d in deliveries] == ["delivered"] * 4


async def test_direct_mode_delivers_each_update_before_the_agent_goes_on(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    arrivals: list[float] = []
    async with (
        webhook_receiver(default=Reply(delay=1.0)) as hook,
        push_server(tmp_path, DIRECT, database=database) as server,
    ):
        body = {
            "message": user_message("echo hello"),
            "configuration": {"taskPushNotificationConfig": webhook(hook.url)},
        }
        async with server.client.stream("POST", "/rest/message:stream", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    arrivals.append(trio.current_time())
        with trio.fail_after(SETTLE_TIMEOUT):
            received = await hook.wait_answered(4)
    assert len(arrivals) == 4
    # Update n+1 exists (and is streamed) only after update n was delivered.
    for delivered, next_event in zip(received, arrivals[1:], strict=False):
        assert delivered.answered_at is not None and next_event >= delivered.answered_at


async def test_direct_mode_answers_a_blocking_send_after_every_update_was_delivered(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    async with (
        webhook_receiver(default=Reply(delay=1.0)) as hook,
        push_server(tmp_path, DIRECT, database=database) as server,
    ):
        _, answered = await timed_send(server, "echo hello", config=webhook(hook.url))
        delivered_before = [r for r in hook.requests if r.answered_at is not None]
        with trio.fail_after(SETTLE_TIMEOUT):
            await hook.wait_answered(4)
    assert described(delivered_before) == ECHO_UPDATES
    assert all(r.answered_at is not None and r.answered_at <= answered for r in delivered_before)


# --- pinning and screening at delivery -----------------------------------------------------------


class PinnedNameScreen(AddressScreen):
    """Accepts ``hook.test`` as if it had been resolved and checked, and found at 127.0.0.1.

    Everything but the address comes from the real screen (with screening off,
    it only parses the URL), so the dispatcher gets a target like any other.
    """

    def __init__(self) -> None:
        super().__init__()
        self.screened: list[str] = []

    async def screen(self, url: str) -> ScreenedTarget:
        self.screened.append(url)
        target = await AddressScreen(enabled=False).screen(url)
        assert target.host == "hook.test", url
        return dataclasses.replace(target, address="127.0.0.1")


async def test_delivery_connects_to_the_checked_address_and_names_the_host(
    tmp_path: Path,
    database: str,
) -> None:
    screen = PinnedNameScreen()
    async with (
        webhook_receiver() as hook,
        push_server(tmp_path, database=database, screen=screen) as server,
    ):
        url = f"http://hook.test:{hook.port}/pinned"
        # Were the name resolved again, delivery would fail: it is not in any DNS.
        assert await system_resolver("hook.test", hook.port) == []
        task = await send(server, "echo hello", config=webhook(url))
        with trio.fail_after(10):
            received = await hook.wait_answered(4)
        deliveries = await settled(server, task["id"], 4)
    assert [request.path for request in received] == ["/pinned"] * 4
    assert {request.headers["host"] for request in received} == {f"hook.test:{hook.port}"}
    assert [d.state for d in deliveries] == ["delivered"] * 4
    # Screened when the config was registered, and again before every attempt.
    assert screen.screened == [url] * 5


class ChangingResolver:
    """Answers ``first`` to the first lookup and ``later`` to every one after it."""

    def __init__(self, first: list[str], later: list[str]) -> None:
        self.answers = [first]
        self.later = later
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return self.answers.pop(0) if self.answers else self.later


@pytest.mark.parametrize(
    ("rebound_to", "reason"),
    [
        ("10.0.0.1", "10.0.0.1 is a private address"),
        ("127.0.0.1", "127.0.0.1 is a loopback address"),
    ],
)
async def test_a_name_that_resolves_to_a_refused_address_at_delivery_fails_the_attempt(
    tmp_path: Path, database: str, rebound_to: str, reason: str
) -> None:
    resolver = ChangingResolver(["93.184.215.14"], [rebound_to])
    screen = AddressScreen(resolver=resolver)
    async with (
        webhook_receiver() as hook,
        push_server(tmp_path, database=database, screen=screen) as server,
    ):
        url = f"http://hook.test:{hook.port}/hook"
        task = await send(server, "echo hello", config=webhook(url))
        deliveries = await settled(server, task["id"], 4)
    assert hook.requests == []
    error = f"refused: hook.test resolves to a refused address: {reason}"
    for delivery in deliveries:
        assert (delivery.state, delivery.attempts_made, delivery.last_error) == ("failed", 1, error)
        assert statuses(delivery) == [None]
    assert resolver.calls == [("hook.test", hook.port)] * 5


# --- screening at registration ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.0.0.1/hook", "10.0.0.1 is a private address"),
        ("http://localhost/hook", "a loopback address"),
        ("ftp://127.0.0.1/hook", "scheme must be http or https, not 'ftp'"),
    ],
)
async def test_creating_a_config_for_a_refused_url_is_invalid_params_naming_the_reason(
    tmp_path: Path, url: str, reason: str
) -> None:
    async with push_server(tmp_path) as server:
        task = await send(server, "echo hello")
        error = await rpc_error(
            server, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url}
        )
        listing = await rpc(server, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert error["code"] == -32602
    assert "webhook refused" in error["message"] and reason in error["message"]
    assert listing.get("configs", []) == []


async def test_sending_a_message_with_a_refused_webhook_is_invalid_params(tmp_path: Path) -> None:
    async with push_server(tmp_path) as server:
        error = await rpc_error(
            server,
            "SendMessage",
            {
                "message": user_message("echo hello"),
                "configuration": {"taskPushNotificationConfig": {"url": "http://10.0.0.1/h"}},
            },
        )
        listed = await rpc(server, "ListTasks", {})
    assert error["code"] == -32602
    assert "10.0.0.1 is a private address" in error["message"]
    assert listed["tasks"] == []


# --- push not supported ---------------------------------------------------------------------


def push_operations(task_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": "http://127.0.0.1/h"}),
        ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "any"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "any"}),
        (
            "SendMessage",
            {
                "message": user_message("echo hello"),
                "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1/h"}},
            },
        ),
    ]


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param({"push_notifications": False}, id="card-without-push"),
        pytest.param(
            {"settings": dataclasses.replace(ALLOW_RECEIVER, enabled=False)}, id="push-disabled"
        ),
    ],
)
async def test_push_operations_are_not_supported_when_push_is_off(
    tmp_path: Path, variant: dict[str, Any]
) -> None:
    async with push_server(tmp_path, **variant) as server:
        task = await send(server, "echo hello")
        codes = {}
        for method, params in push_operations(task["id"]):
            error = await rpc_error(server, method, params)
            codes[method] = error["code"]
    assert codes == dict.fromkeys(codes, -32003)
    assert len(codes) == 5


async def test_a_card_served_with_push_disabled_does_not_declare_push(tmp_path: Path) -> None:
    settings = dataclasses.replace(ALLOW_RECEIVER, enabled=False)
    async with push_server(tmp_path, settings) as server:
        card = (await server.client.get("/.well-known/agent-card.json")).json()
    assert card["capabilities"].get("pushNotifications", False) is False


async def test_direct_mode_survives_a_delivery_that_cannot_be_recorded(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    # A real database failure whenever a delivery attempt is recorded.
    async with (
        webhook_receiver() as hook,
        push_server(tmp_path, DIRECT, database=database) as server,
    ):
        no_attempts = broken(
            server.app.store,
            sqlite="CREATE TRIGGER no_attempts BEFORE INSERT ON push_attempts"
            " BEGIN SELECT RAISE(ABORT, 'no attempts'); END",
            postgresql=raising_trigger("no_attempts", "push_attempts", "true"),
        )
        with no_attempts:
            await timed_send(server, "echo hello", config=webhook(hook.url))
            # The agent's answer came, and the server goes on serving.
            await timed_send(server, "echo again")


async def test_the_dispatcher_survives_an_outbox_it_cannot_read(
    tmp_path: Path, database: str, idle_clock: trio.testing.MockClock
) -> None:
    async with push_server(tmp_path, database=database) as server:
        # A real database failure at every look for pending deliveries.
        gone = broken(
            server.app.store,
            sqlite="ALTER TABLE push_outbox RENAME TO gone",
            postgresql=(
                ["ALTER TABLE push_outbox RENAME TO gone"],
                ["ALTER TABLE gone RENAME TO push_outbox"],
            ),
        )
        with gone:
            server.app.push.notify()
            await trio.sleep(120)  # many polls
            await timed_send(server, "echo still here")

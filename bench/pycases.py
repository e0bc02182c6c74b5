"""The cases wrk cannot drive, written with trio: idle streams, and push notifications.

``streams``: one task is held WORKING (``hold``, ``returnImmediately``), and
N connections each subscribe to it (JSON-RPC ``SubscribeToTask`` over SSE),
opened in batches so the listen backlog never overflows. Every stream must
deliver its first event -- the task itself -- before it counts as open. The
server's resident memory is read before, with all streams open, and after
they are closed and memory has settled; then a second round opens and closes
as many again, so memory kept by the first round shows as growth.

``push``: a webhook receiver in this process; M blocking SendMessage calls
at a fixed concurrency, each registering the receiver as the task's webhook.
Deliveries per second run from the first send to the last delivery.

``push-slow``: K sequential blocking SendMessage calls without a webhook,
then K whose webhook answers only after 3 s: how much a slow receiver adds
to the caller's latency.

All of them return plain dicts that the report and the JSON output use.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from typing import Any

import httpx
import trio

from .common import (
    COMPLETED,
    ECHO_TEXT,
    FEED_TOKEN,
    HOLD_PREFIX,
    JSONRPC_PATH,
    raise_nofile_limit,
    rss_kib,
)
from .http1 import Delivery, Http1Client, HttpError, WebhookReceiver

__all__ = [
    "CaseError",
    "FeedCaseSettings",
    "PushCaseSettings",
    "StreamSettings",
    "run_feed",
    "run_push",
    "run_push_slow",
    "run_streams",
]

_ids = count(1)
TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}


class CaseError(RuntimeError):
    """The case could not be measured; the message says why."""


def _message(text: str, nonce: str) -> dict[str, Any]:
    return {
        "messageId": f"{nonce}-{next(_ids)}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}


def _task_of(document: Any) -> dict[str, Any]:
    """The task in a JSON-RPC SendMessage answer; CaseError if it is an error or a message."""
    if not isinstance(document, dict) or "result" not in document:
        raise CaseError(f"not a JSON-RPC result: {str(document)[:300]}")
    task = document["result"].get("task")
    if not isinstance(task, dict):
        raise CaseError(f"the result is not a task: {str(document)[:300]}")
    return task


async def _send(
    client: Http1Client, text: str, nonce: str, configuration: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One JSON-RPC SendMessage; returns the task of a 200 answer."""
    params: dict[str, Any] = {"message": _message(text, nonce)}
    if configuration:
        params["configuration"] = configuration
    response = await client.request("POST", JSONRPC_PATH, _rpc("SendMessage", params))
    if response.status != 200:
        raise CaseError(f"SendMessage answered {response.status}: {response.body[:300]!r}")
    return _task_of(response.json())


# --- streams ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """How many idle streams to open, in what batches, and how long memory may settle."""

    count: int
    batch: int = 200
    settle_bound_s: float = 10.0


def _open_fds(pid: int) -> int:
    """How many file descriptors process ``pid`` holds (sockets included)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass(frozen=True, slots=True)
class Settled:
    """The server's memory and descriptors once they stopped changing (or the bound hit)."""

    rss_kib: int
    fds: int
    seconds: float
    settled: bool


async def _settle(
    pid: int, bound_s: float, fds_target: int | None = None, tolerance_kib: int = 256
) -> Settled:
    """Wait until RSS is stable and (if given) the fds are down to ``fds_target``; bounded.

    Stable means two readings 0.5 s apart differ by less than ``tolerance_kib``.
    A closed client connection is released only when the server notices, so
    RSS alone can look settled while thousands of sockets are still held.
    """
    started = trio.current_time()
    await trio.sleep(1.0)
    previous = rss_kib(pid)
    while True:
        await trio.sleep(0.5)
        current, fds = rss_kib(pid), _open_fds(pid)
        elapsed = trio.current_time() - started
        if abs(current - previous) < tolerance_kib and (fds_target is None or fds <= fds_target):
            return Settled(current, fds, elapsed, True)
        if elapsed >= bound_s:
            return Settled(current, fds, elapsed, False)
        previous = current


async def _subscribe(port: int, task_id: str) -> Http1Client:
    """Open one SubscribeToTask stream and check its first event is the held task."""
    client = await Http1Client.connect(port)
    try:
        status, first = await client.open_event_stream(
            JSONRPC_PATH, _rpc("SubscribeToTask", {"id": task_id})
        )
        task = first.get("result", {}).get("task") if isinstance(first, dict) else None
        if status != 200 or not isinstance(task, dict) or task.get("id") != task_id:
            raise CaseError(f"bad first event ({status}): {json.dumps(first)[:300]}")
    except BaseException:
        await client.aclose()
        raise
    return client


async def _open_batch(port: int, task_id: str, size: int, into: list[Http1Client]) -> list[str]:
    """Open ``size`` streams at once; append them to ``into``; return the errors."""
    errors: list[str] = []

    async def one() -> None:
        try:
            into.append(await _subscribe(port, task_id))
        except (OSError, HttpError, CaseError, ValueError) as error:
            errors.append(f"{type(error).__name__}: {error}")

    async with trio.open_nursery() as nursery:
        for _ in range(size):
            nursery.start_soon(one)
    return errors


async def _close_all(clients: list[Http1Client]) -> None:
    for client in clients:
        with trio.CancelScope(shield=True):
            await client.aclose()
    clients.clear()


async def _cancel(port: int, task_id: str) -> str:
    """CancelTask on a fresh connection (an idle one may have been closed); the outcome."""
    client = await Http1Client.connect(port)
    try:
        response = await client.request("POST", JSONRPC_PATH, _rpc("CancelTask", {"id": task_id}))
    finally:
        await client.aclose()
    state = response.json().get("result", {}).get("status", {}).get("state")
    return f"{response.status} {state or response.body[:200]!r}"


async def _round(
    port: int,
    pid: int,
    task_id: str,
    settings: StreamSettings,
    clients: list[Http1Client],
    before: Settled,
) -> dict[str, Any]:
    """Open ``settings.count`` streams, measure the server, close them, measure again."""
    errors: list[str] = []
    started = trio.current_time()
    remaining = settings.count
    while remaining > 0:
        size = min(settings.batch, remaining)
        with trio.fail_after(120):
            errors += await _open_batch(port, task_id, size, clients)
        remaining -= size
    open_seconds = trio.current_time() - started
    await trio.sleep(1.0)
    during, fds_open = rss_kib(pid), _open_fds(pid)
    opened = len(clients)
    # "Released" allows for a few descriptors the server opens for other reasons.
    fds_target = before.fds + max(10, opened // 100)
    await _close_all(clients)
    after = await _settle(pid, settings.settle_bound_s, fds_target)
    return {
        "opened": opened,
        "failed": len(errors),
        "first_error": errors[0] if errors else None,
        "open_seconds": open_seconds,
        "rss_open_kib": during,
        "rss_after_close_kib": after.rss_kib,
        "kib_per_stream": (during - before.rss_kib) / opened if opened else math.nan,
        "after_minus_before_kib": after.rss_kib - before.rss_kib,
        "server_fds": {"before": before.fds, "open": fds_open, "after_close": after.fds},
        "fds_released_at_most": fds_target,
        "close_wait_s": after.seconds,
        "close_settled": after.settled,
    }


async def _streams(port: int, pid: int, settings: StreamSettings, nonce: str) -> dict[str, Any]:
    limit = raise_nofile_limit()
    if limit < settings.count + 100:
        raise CaseError(f"RLIMIT_NOFILE is {limit}: too low for {settings.count} streams")
    clients: list[Http1Client] = []
    task_id = ""
    cancelled = False
    try:
        control = await Http1Client.connect(port)
        try:
            held = await _send(control, f"{HOLD_PREFIX} on", nonce, {"returnImmediately": True})
        finally:
            await control.aclose()
        task_id = held["id"]
        state = held.get("status", {}).get("state")
        if state in TERMINAL:
            raise CaseError(f"the hold task is already {state}")
        # Warm up the subscribe path (lazy imports, first-use caches) before measuring.
        warm_errors = await _open_batch(port, task_id, 10, clients)
        if warm_errors:
            raise CaseError(f"warm-up subscribe failed: {warm_errors[0]}")
        await _close_all(clients)
        before = await _settle(pid, settings.settle_bound_s)

        first = await _round(port, pid, task_id, settings, clients, before)
        # The same again: a server that keeps what the first round left behind
        # grows here; one that reuses its freed memory does not.
        second = await _round(port, pid, task_id, settings, clients, before)
        # Cancelling writes a final event to every stream the server still holds.
        cancel_outcome = await _cancel(port, task_id)
        cancelled = True
        fds_target = before.fds + max(10, settings.count // 100)
        after_cancel = await _settle(pid, settings.settle_bound_s, fds_target)

        return {
            "requested": settings.count,
            **first,
            "rss_before_kib": before.rss_kib,
            "second_round": second,
            "growth_kib": second["rss_open_kib"] - first["rss_open_kib"],
            "cancel": cancel_outcome,
            "rss_after_cancel_kib": after_cancel.rss_kib,
            "fds_after_cancel": after_cancel.fds,
        }
    finally:
        await _close_all(clients)
        if task_id and not cancelled:
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(15),
                contextlib.suppress(OSError, HttpError, ValueError),
            ):
                await _cancel(port, task_id)


def run_streams(port: int, pid: int, settings: StreamSettings, nonce: str) -> dict[str, Any]:
    """The ``streams`` case against the server on ``port`` whose process is ``pid``."""
    result: dict[str, Any] = trio.run(_streams, port, pid, settings, nonce)
    return result


# --- push ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PushCaseSettings:
    """How many tasks to push for, how hard, and how long to wait for stragglers."""

    tasks: int
    concurrency: int = 16
    #: Deliveries are over once none arrived for this long...
    quiet_s: float = 2.0
    #: ...or this long after the last send, whichever comes first.
    bound_s: float = 60.0
    #: push-slow: sequential sends with, and as many without, the slow webhook.
    slow_sends: int = 10
    slow_delay_s: float = 3.0


def _push_config(receiver_port: int, path: str) -> dict[str, Any]:
    return {
        "taskPushNotificationConfig": {
            "url": f"http://127.0.0.1:{receiver_port}{path}",
            "token": "t",
        }
    }


def _delivered_task(delivery: Delivery) -> tuple[str | None, bool]:
    """The task a webhook payload (a StreamResponse) is about, and whether it says COMPLETED."""
    try:
        document = json.loads(delivery.body)
    except ValueError:
        return None, False
    task_id = None
    if isinstance(document, dict):
        for value in document.values():
            if isinstance(value, dict):
                task_id = value.get("taskId") or value.get("id")
                break
    return task_id, COMPLETED.encode() in delivery.body


async def _push(port: int, settings: PushCaseSettings, nonce: str) -> dict[str, Any]:
    receiver = WebhookReceiver(slow_delay=settings.slow_delay_s)
    async with trio.open_nursery() as nursery:
        receiver_port: int = await nursery.start(receiver.serve)
        configuration = _push_config(receiver_port, "/hook")
        sent_ids: set[str] = set()
        bad: list[str] = []
        tickets = iter(range(settings.tasks))

        async def worker() -> None:
            client = await Http1Client.connect(port)
            try:
                for _ in tickets:
                    try:
                        task = await _send(client, ECHO_TEXT, nonce, configuration)
                    except CaseError as error:
                        bad.append(str(error))
                        continue
                    if task.get("status", {}).get("state") != COMPLETED:
                        bad.append(f"task ended {task.get('status')}")
                    sent_ids.add(task["id"])
            finally:
                await client.aclose()

        first_send = trio.current_time()
        with trio.fail_after(settings.bound_s * 4):
            async with trio.open_nursery() as senders:
                for _ in range(settings.concurrency):
                    senders.start_soon(worker)
        sends_done = trio.current_time()

        # Wait until deliveries stop: no new one for quiet_s seconds (bounded).
        deadline = sends_done + settings.bound_s
        while trio.current_time() < deadline:
            last = receiver.deliveries[-1].time if receiver.deliveries else sends_done
            if trio.current_time() - max(last, sends_done) >= settings.quiet_s:
                break
            await trio.sleep(0.1)
        timed_out = trio.current_time() >= deadline
        nursery.cancel_scope.cancel()

    deliveries = receiver.deliveries
    notified: set[str] = set()
    completed: set[str] = set()
    for delivery in deliveries:
        task_id, is_completed = _delivered_task(delivery)
        if task_id is not None:
            notified.add(task_id)
            if is_completed:
                completed.add(task_id)
    last_delivery = deliveries[-1].time if deliveries else math.nan
    span = last_delivery - first_send
    return {
        "tasks": settings.tasks,
        "concurrency": settings.concurrency,
        "sent_ok": len(sent_ids),
        "bad_sends": len(bad),
        "first_bad": bad[0] if bad else None,
        "send_seconds": sends_done - first_send,
        "deliveries": len(deliveries),
        "bad_tokens": sum(1 for d in deliveries if d.token != "t"),
        "delivery_seconds": span,
        "deliveries_per_s": len(deliveries) / span if deliveries and span > 0 else 0.0,
        "deliveries_per_task": len(deliveries) / settings.tasks,
        "tasks_notified": len(notified & sent_ids),
        "tasks_completion_notified": len(completed & sent_ids),
        "last_delivery_after_sends_s": last_delivery - sends_done if deliveries else math.nan,
        "wait_timed_out": timed_out,
    }


def run_push(port: int, settings: PushCaseSettings, nonce: str) -> dict[str, Any]:
    """The ``push`` case against the server on ``port``."""
    result: dict[str, Any] = trio.run(_push, port, settings, nonce)
    return result


async def _timed_sends(
    client: Http1Client, sends: int, nonce: str, configuration: Callable[[], dict[str, Any] | None]
) -> list[float]:
    latencies: list[float] = []
    for _ in range(sends):
        started = trio.current_time()
        task = await _send(client, ECHO_TEXT, nonce, configuration())
        latencies.append((trio.current_time() - started) * 1000)
        if task.get("status", {}).get("state") != COMPLETED:
            raise CaseError(f"task ended {task.get('status')}")
    return latencies


async def _push_slow(port: int, settings: PushCaseSettings, nonce: str) -> dict[str, Any]:
    receiver = WebhookReceiver(slow_delay=settings.slow_delay_s)
    async with trio.open_nursery() as nursery:
        receiver_port: int = await nursery.start(receiver.serve)
        client = await Http1Client.connect(port)
        try:
            # Each call may wait for several slow deliveries: allow for that, but bounded.
            with trio.fail_after(settings.slow_sends * (8 * settings.slow_delay_s + 10) + 30):
                plain = await _timed_sends(client, settings.slow_sends, nonce, lambda: None)
                slow = await _timed_sends(
                    client,
                    settings.slow_sends,
                    nonce,
                    lambda: _push_config(receiver_port, "/slow/hook"),
                )
        finally:
            await client.aclose()
        nursery.cancel_scope.cancel()
    plain_median = statistics.median(plain)
    slow_median = statistics.median(slow)
    return {
        "sends": settings.slow_sends,
        "webhook_delay_s": settings.slow_delay_s,
        "plain_ms": plain,
        "slow_ms": slow,
        "plain_median_ms": plain_median,
        "slow_median_ms": slow_median,
        "added_ms": slow_median - plain_median,
        "slow_deliveries_started": len(receiver.deliveries),
    }


def run_push_slow(port: int, settings: PushCaseSettings, nonce: str) -> dict[str, Any]:
    """The ``push-slow`` case against the server on ``port``."""
    result: dict[str, Any] = trio.run(_push_slow, port, settings, nonce)
    return result


# --- feed ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedCaseSettings:
    """SendMessage throughput with and without live feed clients attached."""

    sends: int
    concurrency: int = 16
    clients: int = 10
    #: Rounds of (none attached, clients attached), alternated against drift.
    rounds: int = 3
    token: str = FEED_TOKEN


async def _sends_per_second(port: int, settings: FeedCaseSettings, nonce: str) -> float:
    tickets = iter(range(settings.sends))
    bad: list[str] = []

    async def worker() -> None:
        client = await Http1Client.connect(port)
        try:
            for _ in tickets:
                task = await _send(client, ECHO_TEXT, nonce)
                if task.get("status", {}).get("state") != COMPLETED:
                    bad.append(str(task.get("status")))
        finally:
            await client.aclose()

    started = trio.current_time()
    with trio.fail_after(settings.sends + 60):
        async with trio.open_nursery() as nursery:
            for _ in range(settings.concurrency):
                nursery.start_soon(worker)
    if bad:
        raise CaseError(f"{len(bad)} sends did not complete: {bad[0]}")
    return settings.sends / (trio.current_time() - started)


async def _feed_clients(
    port: int, settings: FeedCaseSettings, task_status: trio.TaskStatus[list[int]]
) -> None:
    """``clients`` feed connections, the last of which never reads after its hello."""
    from trio_websocket import ConnectionClosed, open_websocket_url

    url = f"ws://127.0.0.1:{port}/_a2a/feed"
    headers = [(b"Authorization", f"Bearer {settings.token}".encode())]
    received = [0] * settings.clients
    ready = trio.Semaphore(0)

    async def reader(index: int, stalled: bool) -> None:
        with contextlib.suppress(ConnectionClosed):
            async with open_websocket_url(url, extra_headers=headers) as ws:
                await ws.get_message()  # the hello
                ready.release()
                if stalled:
                    await trio.sleep_forever()
                while True:  # a message holds one event per line
                    received[index] += (await ws.get_message()).count("\n") + 1

    async with trio.open_nursery() as nursery:
        for index in range(settings.clients):
            nursery.start_soon(reader, index, index == settings.clients - 1)
        for _ in range(settings.clients):
            await ready.acquire()
        task_status.started(received)


async def _feed(port: int, settings: FeedCaseSettings, nonce: str) -> dict[str, Any]:
    alone: list[float] = []
    watched: list[float] = []
    received: list[int] = []
    for _ in range(settings.rounds):
        alone.append(await _sends_per_second(port, settings, nonce))
        async with trio.open_nursery() as nursery:
            received = await nursery.start(_feed_clients, port, settings)
            watched.append(await _sends_per_second(port, settings, nonce))
            nursery.cancel_scope.cancel()
    async with httpx.AsyncClient() as http:
        metrics = await http.get(f"http://127.0.0.1:{port}/metrics")
    dropped = math.nan
    if metrics.status_code == 200:
        for line in metrics.text.splitlines():
            if line.startswith("a2a_feed_dropped "):
                dropped = float(line.split()[1])
    best_alone, best_watched = max(alone), max(watched)
    median_ratio = statistics.median(watched) / statistics.median(alone)
    return {
        "sends": settings.sends,
        "concurrency": settings.concurrency,
        "clients": settings.clients,
        "alone_per_s": alone,
        "watched_per_s": watched,
        "best_alone_per_s": best_alone,
        "best_watched_per_s": best_watched,
        "ratio": best_watched / best_alone,
        "median_ratio": median_ratio,
        "events_per_reader_last_round": received[:-1],
        "stalled_received": received[-1],
        "feed_clients_dropped": dropped,
    }


def run_feed(port: int, settings: FeedCaseSettings, nonce: str) -> dict[str, Any]:
    """The ``feed`` case against the (a2a-trio) server on ``port``."""
    result: dict[str, Any] = trio.run(_feed, port, settings, nonce)
    return result

"""/metrics: Prometheus text that prometheus-client parses, counting the traffic sent."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import trio
from prometheus_client.parser import text_string_to_metric_families

from a2a_trio.console import ConsoleSettings
from a2a_trio.protocol.proto.a2a_pb2 import GetTaskRequest
from a2a_trio.push import PushSettings

from .conftest import user_message
from .console_helpers import TOKEN, console_server
from .test_grpc_binding import Channel, send_request
from .webhooks import Reply, webhook_receiver

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(v for (n, got), v in samples.items() if n == name and wanted <= set(got))


async def scrape(client: object, headers: Mapping[str, str] | None = None) -> Samples:
    response = await client.get("/metrics", headers=headers or {})  # type: ignore[attr-defined]
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


async def test_the_counters_match_the_traffic_sent(tmp_path: Path) -> None:
    push = PushSettings(allowed_hosts=("127.0.0.1",), max_attempts=2, backoff=0)
    async with (
        webhook_receiver(default=Reply(503)) as hook,
        console_server(tmp_path, push_settings=push) as (server, console, _),
    ):
        for number in range(5):
            reply = await server.jsonrpc("SendMessage", {"message": user_message(f"echo {number}")})
            assert "result" in reply
        for number in range(3):
            response = await server.rest(
                "POST", "/message:send", json={"message": user_message(f"echo r{number}")}
            )
            assert response.status_code == 200
        missing = await server.jsonrpc("GetTask", {"id": "no-such-task"})
        assert missing["error"]["code"] == -32001
        config = {"url": hook.url_for("/hook")}
        await server.jsonrpc(
            "SendMessage",
            {
                "message": user_message("echo hooked"),
                "configuration": {"taskPushNotificationConfig": config},
            },
        )
        with trio.fail_after(10):
            while (await server.app.store.outbox_summary()).pending:  # noqa: ASYNC110 (polled)
                await trio.sleep(0.05)
        samples = await scrape(server.client)
        store = server.app.store
        recorded = 0
        page = await store.browse_tasks(page_size=100)
        for task in page.tasks:
            recorded += len(await store.timeline(task.agent, task.id))
    requests = "a2a_requests_total"
    assert value(samples, requests, agent="scripted", operation="SendMessage",
                 binding="jsonrpc", outcome="ok") == 6  # fmt: skip
    assert value(samples, requests, agent="scripted", operation="SendMessage",
                 binding="rest", outcome="ok") == 3  # fmt: skip
    assert value(samples, requests, agent="scripted", operation="GetTask",
                 binding="jsonrpc", outcome="TASK_NOT_FOUND") == 1  # fmt: skip
    assert total(samples, "a2a_request_duration_seconds_count") == 10
    assert total(samples, "a2a_events_recorded_total", agent="scripted") == recorded
    assert value(samples, "a2a_tasks", agent="scripted", state="TASK_STATE_COMPLETED") == 9
    assert value(samples, "a2a_tasks", agent="scripted", state="TASK_STATE_WORKING") == 0
    assert total(samples, "a2a_executions_started_total") == 9
    assert value(samples, "a2a_executions_running", agent="scripted") == 0
    assert total(samples, "a2a_commit_seconds_count", agent="scripted") > 0
    # The webhook answered 503 twice: one retry, then a dead letter per event.
    hooked_events = len(hook.on_path("/hook"))
    assert value(samples, "a2a_webhook_attempts_total", agent="scripted",
                 outcome="retry") + value(samples, "a2a_webhook_attempts_total",
                 agent="scripted", outcome="failed") == hooked_events  # fmt: skip
    assert value(samples, "a2a_outbox_dead_letters") == hooked_events / 2
    assert value(samples, "a2a_outbox_backlog") == 0
    assert value(samples, "a2a_outbox_oldest_pending_seconds") == 0
    assert value(samples, "a2a_open_streams") == 0
    assert console.metrics is not None


async def test_a_metrics_token_guards_metrics(tmp_path: Path) -> None:
    settings = ConsoleSettings(token=TOKEN, metrics_token="scraper")
    async with console_server(tmp_path, settings=settings) as (server, _, _):
        assert (await server.client.get("/metrics")).status_code == 401
        assert (
            await server.client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        ).status_code == 401
        samples = await scrape(server.client, {"Authorization": "Bearer scraper"})
        assert value(samples, "a2a_feed_subscribers") == 0


async def test_an_open_stream_is_counted_while_it_is_relayed(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, executor):
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": user_message("hold")},
        }
        async with server.client.stream("POST", "/jsonrpc", json=body) as response:
            lines = response.aiter_lines()
            while not (await lines.__anext__()).startswith("data:"):
                pass
            samples = await scrape(server.client)
            assert value(samples, "a2a_open_streams") == 1
            assert value(samples, "a2a_executions_running", agent="scripted") == 1
            executor.gate.release.set()
            async for _ in lines:
                pass
        samples = await scrape(server.client)
        assert value(samples, "a2a_open_streams") == 0


async def test_grpc_calls_are_counted_with_their_binding(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        channel = Channel(server)
        try:
            await channel.call("SendMessage", send_request("echo hi"), "SendMessageResponse")
            await channel.failure("GetTask", GetTaskRequest(id="no-such-task"), "Task")
            stream = channel.stream("SendStreamingMessage", send_request("echo streamed"))
            await trio.to_thread.run_sync(lambda: list(stream))
        finally:
            channel.close()
        samples = await scrape(server.client)
    requests = "a2a_requests_total"
    assert value(samples, requests, agent="scripted", operation="SendMessage",
                 binding="grpc", outcome="ok") == 1  # fmt: skip
    assert value(samples, requests, agent="scripted", operation="GetTask",
                 binding="grpc", outcome="TASK_NOT_FOUND") == 1  # fmt: skip
    assert value(samples, requests, agent="scripted", operation="SendStreamingMessage",
                 binding="grpc", outcome="ok") == 1  # fmt: skip
    assert total(samples, "a2a_request_duration_seconds_count", binding="grpc") == 3

"""OpenTelemetry traces of servers in child processes, configured by ``OTEL_*`` variables only.

Every server here exports to an OTLP/HTTP receiver the test runs
(tests/otel_receivers.py decodes each ExportTraceServiceRequest): the
``[otel]`` extra's own exporter, endpoint and protocol chosen by the
environment as an operator sets them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_trio.store.url import PostgresLocation

from .conftest import user_message
from .otel_receivers import ExportedSpan, OtlpReceiver, WebhookReceiver, wait_until
from .postgres import fresh_database, postgres_url
from .servers import REPO, STARTUP_TIMEOUT, ServerProcess
from .test_queue_workers import WORKER_CONFIG

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACED = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "A2A-Version": "1.0"}
SEND = "a2a.v1.A2AService/SendMessage"
# SpanKind in OTLP's protobuf.
INTERNAL, SERVER, CLIENT = 1, 2, 3


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver().serving() as receiver:
        yield receiver


def otel_env(receiver: OtlpReceiver, service: str) -> dict[str, str]:
    """What an operator sets: the collector's address and the service's name."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": service,
        # Batches go out every 50 ms, not every 5 s: the test waits less.
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }


@contextmanager
def otel_server(
    tmp_path: Path, receiver: OtlpReceiver, service: str, **env: str
) -> Iterator[ServerProcess]:
    """tests/otel_app.py served by hypercorn in a child process, exporting as ``service``."""
    server = ServerProcess.start(
        tmp_path / f"{service}.db",
        tmp_path / f"{service}.log",
        app="tests.otel_app:app",
        env={**otel_env(receiver, service), **env},
    )
    try:
        yield server
    finally:
        server.stop()


async def send(url: str, text: str, **params: Any) -> dict[str, Any]:
    """A blocking SendMessage over JSON-RPC, with the caller's ``traceparent``."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": user_message(text), **params},
    }
    async with httpx.AsyncClient(headers=TRACED, timeout=30, trust_env=False) as http:
        answer: dict[str, Any] = (await http.post(url, json=body)).json()
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    return task


def the(
    spans: list[ExportedSpan], name: str, kind: int | None = None, **where: Any
) -> ExportedSpan:
    """The one span called ``name`` (of ``kind``) whose attributes include ``where``."""
    [span] = [
        span
        for span in spans
        if span.name == name
        and (kind is None or span.kind == kind)
        and all(span.attributes.get(key) == value for key, value in where.items())
    ]
    return span


def names(receiver: OtlpReceiver) -> set[tuple[str, str]]:
    return {(span.service, span.name) for span in receiver.of_trace(TRACE_ID)}


async def test_a_traced_call_exports_its_operation_execution_round_and_webhook(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    # Standard variables the SDK reads: the resource's attributes, the exporter's headers.
    more = {
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test,team=agents",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-token=s3cret",
    }
    with (
        WebhookReceiver().serving() as hooks,
        otel_server(tmp_path, receiver, "echo-svc", **more) as b,
    ):
        configuration = {"taskPushNotificationConfig": {"url": hooks.url}}
        task = await send(b.url + "/echo/jsonrpc", "echo hi", configuration=configuration)
        expected = {SEND, "a2a.execute", "a2a.store.record", "a2a.webhook.attempt"}
        await wait_until(lambda: expected <= {name for _, name in names(receiver)})
        await wait_until(lambda: any(b"TASK_STATE_COMPLETED" in post.body for post in hooks.posts))

    spans = receiver.of_trace(TRACE_ID)
    assert {span.service for span in spans} == {"echo-svc"}
    assert spans[0].resource["deployment.environment"] == "test"
    assert spans[0].resource["team"] == "agents"
    assert {post.headers["x-collector-token"] for post in receiver.requests} == {"s3cret"}
    operation = the(spans, SEND)
    assert (operation.kind, operation.parent_span_id) == (SERVER, PARENT_ID)
    assert operation.attributes["a2a.agent"] == "echo"
    assert operation.attributes["a2a.binding"] == "jsonrpc"
    assert operation.attributes["a2a.task.id"] == task["id"]
    assert operation.attributes["a2a.context.id"] == task["contextId"]
    execution = the(spans, "a2a.execute")
    assert execution.parent_span_id == operation.span_id
    rounds = [span for span in spans if span.name == "a2a.store.record"]
    assert execution.span_id in {span.parent_span_id for span in rounds}
    attempts = [span for span in spans if span.name == "a2a.webhook.attempt"]
    assert {span.parent_span_id for span in attempts} <= {span.span_id for span in rounds}
    assert all(span.kind == CLIENT for span in attempts)
    sent = {post.headers["traceparent"].split("-")[1] for post in hooks.posts}
    assert sent == {TRACE_ID}


async def test_agent_a_calling_agent_b_in_other_processes_is_one_trace(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    with otel_server(tmp_path, receiver, "agent-b") as b:
        peer = {"OTEL_TEST_PEER": b.url + "/echo"}
        with otel_server(tmp_path, receiver, "agent-a", **peer) as a:
            task = await send(a.url + "/relay/jsonrpc", "echo across")
            assert task["artifacts"][0]["parts"][0]["text"] == "across"
            await wait_until(lambda: ("agent-b", "a2a.execute") in names(receiver))
            await wait_until(lambda: ("agent-a", "a2a.execute") in names(receiver))

    spans = receiver.of_trace(TRACE_ID)
    a_operation = the(spans, SEND, SERVER, **{"a2a.agent": "relay"})
    a_execution = the(spans, "a2a.execute", None, **{"a2a.agent": "relay"})
    a_call = the(spans, SEND, CLIENT)
    b_operation = the(spans, SEND, SERVER, **{"a2a.agent": "echo"})
    b_execution = the(spans, "a2a.execute", None, **{"a2a.agent": "echo"})
    assert [a_operation.service, a_call.service, b_operation.service] == [
        "agent-a",
        "agent-a",
        "agent-b",
    ]
    assert a_operation.parent_span_id == PARENT_ID
    assert a_execution.parent_span_id == a_operation.span_id
    assert a_call.parent_span_id == a_execution.span_id
    assert b_operation.parent_span_id == a_call.span_id  # the traceparent A2AClient sent
    assert b_execution.parent_span_id == b_operation.span_id


@contextmanager
def worker(directory: Path, database: str, env: dict[str, str]) -> Iterator[Path]:
    """``a2a-trio worker`` for tests/cluster_app.py's agent, queued; yields its log."""
    config = directory / "a2a.toml"
    config.write_text(WORKER_CONFIG.format(database=database, lease=10))
    log_path = directory / "worker.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "a2a_trio.cli", "worker", "--config", str(config)],
            cwd=REPO,
            env={
                **os.environ,
                "A2A_TRIO_DATABASE": database,
                "CLUSTER_TEST_DIR": str(directory),
                "CLUSTER_PROCESS_NAME": "w0",
                **env,
            },
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while "working for default" not in log_path.read_text(errors="replace"):
                assert process.poll() is None, log_path.read_text(errors="replace")
                assert time.monotonic() < deadline, log_path.read_text(errors="replace")
                time.sleep(0.05)
            yield log_path
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


async def test_a_queued_execution_run_by_a_worker_joins_the_trace(
    tmp_path: Path, receiver: OtlpReceiver, postgres: PostgresLocation
) -> None:
    with fresh_database(postgres) as location:
        database = postgres_url(location)
        web_env = {
            **otel_env(receiver, "web"),
            "CLUSTER_EXECUTION": "queued",
            "CLUSTER_TEST_DIR": str(tmp_path),
        }
        web = ServerProcess.start(
            database, tmp_path / "web.log", app="tests.cluster_app:app", env=web_env
        )
        try:
            with worker(tmp_path, database, otel_env(receiver, "worker")):
                task = await send(web.url + "/jsonrpc", "tick 1")
                assert task["status"]["state"] == "TASK_STATE_COMPLETED"
                await wait_until(lambda: ("worker", "a2a.execute") in names(receiver))
                await wait_until(lambda: ("worker", "a2a.store.record") in names(receiver))
        finally:
            web.stop()

    spans = receiver.of_trace(TRACE_ID)
    operation = the(spans, SEND, SERVER)
    assert (operation.service, operation.parent_span_id) == ("web", PARENT_ID)
    execution = the(spans, "a2a.execute")
    assert execution.service == "worker"
    assert execution.parent_span_id == operation.span_id  # carried with the queued row
    assert execution.attributes["a2a.task.id"] == task["id"]
    rounds = [span for span in spans if span.name == "a2a.store.record"]
    assert {span.service for span in rounds} == {"worker"}
    assert execution.span_id in {span.parent_span_id for span in rounds}

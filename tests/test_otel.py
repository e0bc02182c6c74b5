"""OpenTelemetry traces, made in this process and kept by the SDK's in-memory exporter.

The app serves on a real socket; the provider is handed over in code
(:func:`a2a_trio.telemetry.use_tracer_provider`), as an embedding program does.
tests/test_otel_export.py runs servers in child processes configured by
``OTEL_*`` variables only, exporting to an OTLP receiver of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from a2a_trio import A2AApp, A2AClient, telemetry
from a2a_trio.client import text_of

from .conftest import LiveServer, live_server, user_message
from .otel_app import PUSH_SETTINGS, mount_all
from .otel_receivers import WebhookReceiver, wait_until
from .servers import REPO

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
OPERATION = "a2a.v1.A2AService/{}"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Spans of this test, ended ones first; tracing off again afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_tracer_provider(provider)
    try:
        yield exporter
    finally:
        telemetry.use_tracer_provider(None)
        provider.shutdown()


@asynccontextmanager
async def agents(tmp_path: Path) -> AsyncIterator[LiveServer]:
    """``/relay`` (asking this same server's ``/echo``), ``/echo`` and ``/asyncio``, served."""
    relay_peer: list[str] = []

    def mount(app: A2AApp) -> None:
        mount_all(app)

    async with live_server(tmp_path, mount, push_settings=PUSH_SETTINGS) as live:
        relay_peer.append(live.url + "/echo")
        live.app.mounts["relay"].host.executor.peer = relay_peer[0]  # type: ignore[attr-defined]
        yield live


def hex_id(value: int, width: int = 16) -> str:
    return format(value, f"0{width}x")


def trace_of(span: ReadableSpan) -> str:
    assert span.context is not None
    return hex_id(span.context.trace_id, 32)


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return hex_id(span.context.span_id)


def parent_id(span: ReadableSpan) -> str | None:
    return None if span.parent is None else hex_id(span.parent.span_id)


def named(
    exporter: InMemorySpanExporter,
    name: str,
    kind: SpanKind | None = None,
    attributes: Mapping[str, Any] = MappingProxyType({}),
) -> list[ReadableSpan]:
    """The ended spans called ``name`` (of ``kind``) whose attributes include ``attributes``."""
    return [
        span
        for span in exporter.get_finished_spans()
        if span.name == name
        and (kind is None or span.kind is kind)
        and all((span.attributes or {}).get(key) == value for key, value in attributes.items())
    ]


async def one(
    exporter: InMemorySpanExporter,
    name: str,
    kind: SpanKind | None = None,
    attributes: Mapping[str, Any] = MappingProxyType({}),
) -> ReadableSpan:
    """The one span called ``name`` (of ``kind``) with ``attributes``, once it has ended."""
    await wait_until(lambda: bool(named(exporter, name, kind, attributes)))
    [span] = named(exporter, name, kind, attributes)
    return span


def traced(headers: dict[str, str] | None = None) -> dict[str, str]:
    return {"traceparent": TRACEPARENT, "tracestate": "vendor=x", **(headers or {})}


async def test_a_call_with_a_traceparent_makes_spans_of_its_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    with WebhookReceiver().serving() as hooks:
        async with agents(tmp_path) as live:
            configuration = {"taskPushNotificationConfig": {"url": hooks.url, "token": "t"}}
            params = {"message": user_message("echo hi"), "configuration": configuration}
            answer = await live.jsonrpc("SendMessage", params, prefix="/echo", headers=traced())
            task = answer["result"]["task"]
            # One POST an event: the last one says COMPLETED.
            await wait_until(lambda: any(b"TASK_STATE_COMPLETED" in p.body for p in hooks.posts))
            await wait_until(
                lambda: len(named(exporter, "a2a.webhook.attempt")) == len(hooks.posts)
            )

    operation = await one(exporter, OPERATION.format("SendMessage"))
    assert trace_of(operation) == TRACE_ID
    assert parent_id(operation) == PARENT_ID  # the caller's span
    assert operation.kind is SpanKind.SERVER
    assert operation.attributes == {
        "a2a.agent": "echo",
        "a2a.method": "SendMessage",
        "a2a.binding": "jsonrpc",
        "a2a.protocol.version": "1.0",
        "rpc.system": "jsonrpc",
        "rpc.service": "a2a.v1.A2AService",
        "rpc.method": "SendMessage",
        "a2a.task.id": task["id"],
        "a2a.context.id": task["contextId"],
    }
    assert operation.context is not None
    assert operation.context.trace_state.get("vendor") == "x"

    execution = await one(exporter, "a2a.execute")
    assert parent_id(execution) == span_id(operation)
    assert (execution.attributes or {})["a2a.task.id"] == task["id"]
    assert (execution.attributes or {})["a2a.context.id"] == task["contextId"]

    rounds = named(exporter, "a2a.store.record", None, {"a2a.task.id": task["id"]})
    assert rounds and all(trace_of(span) == TRACE_ID for span in rounds)
    assert span_id(execution) in {parent_id(span) for span in rounds}

    attempts = named(exporter, "a2a.webhook.attempt")
    for attempt in attempts:
        assert trace_of(attempt) == TRACE_ID
        assert parent_id(attempt) in {span_id(span) for span in rounds}  # the round that queued it
        assert attempt.kind is SpanKind.CLIENT
        assert (attempt.attributes or {})["a2a.task.id"] == task["id"]
        assert (attempt.attributes or {})["a2a.push.outcome"] == "delivered"
        assert (attempt.attributes or {})["http.response.status_code"] == 200
        assert (attempt.attributes or {})["server.address"] == "127.0.0.1"
    # Each POST tells the webhook's receiver the trace, its attempt as the parent.
    sent = {post.headers["traceparent"] for post in hooks.posts}
    assert sent == {f"00-{TRACE_ID}-{span_id(attempt)}-01" for attempt in attempts}


async def test_rest_and_grpc_calls_continue_the_callers_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    async with agents(tmp_path) as live:
        body = {"message": user_message("echo over rest")}
        response = await live.rest(
            "POST", "/message:send", prefix="/echo", json=body, headers=traced()
        )
        assert response.status_code == 200
        async with await A2AClient.connect(
            live.url + "/echo", prefer=["GRPC"], headers={"traceparent": TRACEPARENT}
        ) as client:
            await client.send_message("echo over grpc")

    for binding in ("rest", "grpc"):
        span = await one(
            exporter, OPERATION.format("SendMessage"), SpanKind.SERVER, {"a2a.binding": binding}
        )
        assert (trace_of(span), parent_id(span)) == (TRACE_ID, PARENT_ID)
    [rest] = named(exporter, OPERATION.format("SendMessage"), None, {"a2a.binding": "rest"})
    assert "rpc.system" not in (rest.attributes or {})


async def test_a_0_3_call_is_traced_as_its_operation(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    async with agents(tmp_path) as live:
        message = {
            "messageId": "m-0.3",
            "role": "user",
            "kind": "message",
            "parts": [{"kind": "text", "text": "echo old"}],
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        response = await live.client.post(
            "/echo/jsonrpc", json=body, headers={"A2A-Version": "", "traceparent": TRACEPARENT}
        )
        assert response.json()["result"]["kind"] == "task"
        response = await live.client.post(
            "/echo/rest/v1/message:send",
            json={  # 0.3's HTTP+JSON is a2a.proto's JSON of that version
                "message": {
                    "messageId": "m-0.3-rest",
                    "role": "ROLE_USER",
                    "content": [{"text": "echo old"}],
                }
            },
            headers={"A2A-Version": "", "traceparent": TRACEPARENT},
        )
        assert response.status_code == 200, response.text

    for binding in ("jsonrpc", "rest"):
        span = await one(exporter, OPERATION.format("SendMessage"), None, {"a2a.binding": binding})
        assert (span.attributes or {})["a2a.protocol.version"] == "0.3"
        assert (trace_of(span), parent_id(span)) == (TRACE_ID, PARENT_ID)


async def test_an_operation_that_fails_records_its_error(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    async with agents(tmp_path) as live:
        answer = await live.jsonrpc("GetTask", {"id": "no-such-task"}, prefix="/echo")
        assert answer["error"]["code"] == -32001

    span = await one(exporter, OPERATION.format("GetTask"))
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "TASK_NOT_FOUND"
    assert (span.attributes or {})["a2a.task.id"] == "no-such-task"


async def test_an_executor_that_raises_fails_its_execution_span(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    async with agents(tmp_path) as live:
        params = {"message": user_message("raise")}
        answer = await live.jsonrpc("SendMessage", params, prefix="/echo")
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"

    execution = await one(exporter, "a2a.execute")
    assert execution.status.status_code is StatusCode.ERROR
    assert (execution.attributes or {})["error.type"] == "RuntimeError"
    assert [event.name for event in execution.events] == ["exception"]


async def test_agent_a_calling_agent_b_through_a2aclient_is_one_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    async with agents(tmp_path) as live:
        params = {"message": user_message("echo from a")}
        answer = await live.jsonrpc("SendMessage", params, prefix="/relay", headers=traced())
        assert answer["result"]["task"]["artifacts"][0]["parts"][0]["text"] == "from a"

    a = await one(exporter, OPERATION.format("SendMessage"), None, {"a2a.agent": "relay"})
    b = await one(exporter, OPERATION.format("SendMessage"), None, {"a2a.agent": "echo"})
    a_execution = await one(exporter, "a2a.execute", None, {"a2a.agent": "relay"})
    call = await one(exporter, OPERATION.format("SendMessage"), SpanKind.CLIENT)
    assert {trace_of(span) for span in (a, a_execution, call, b)} == {TRACE_ID}
    assert parent_id(a_execution) == span_id(a)
    assert parent_id(call) == span_id(a_execution)  # made in the agent's code
    assert parent_id(b) == span_id(call)  # sent with the call
    assert (call.attributes or {})["a2a.binding"] == "jsonrpc"
    assert (call.attributes or {})["server.address"] == "127.0.0.1"


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_client_calls_carry_their_span(
    tmp_path: Path, exporter: InMemorySpanExporter, binding: str
) -> None:
    tracer = TracerProvider().get_tracer("test")  # the caller's spans, not exported
    callers = {}
    async with (
        agents(tmp_path) as live,
        await A2AClient.connect(live.url + "/echo", prefer=[binding]) as client,
    ):
        with tracer.start_as_current_span("unary") as caller:
            assert text_of(await client.send_message("echo once")) == "once"
        callers["SendMessage"] = caller
        with tracer.start_as_current_span("stream") as caller:
            events = [event async for event in client.send("echo streamed", stream=True)]
            assert any(text_of(event) == "streamed" for event in events)
        callers["SendStreamingMessage"] = caller

    for method, caller in callers.items():
        server = await one(exporter, OPERATION.format(method), SpanKind.SERVER)
        call = await one(exporter, OPERATION.format(method), SpanKind.CLIENT)
        assert trace_of(server) == trace_of(call) == hex_id(caller.get_span_context().trace_id, 32)
        assert parent_id(call) == hex_id(caller.get_span_context().span_id)
        assert parent_id(server) == span_id(call)  # sent with the call
    unary = await one(exporter, OPERATION.format("SendMessage"), SpanKind.CLIENT)
    served = await one(exporter, OPERATION.format("SendMessage"), SpanKind.SERVER)
    for name in ("a2a.task.id", "a2a.context.id"):
        assert (unary.attributes or {})[name] == (served.attributes or {})[name]


async def test_an_asyncio_agent_runs_in_its_execution_span(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    async with agents(tmp_path) as live:
        params = {"message": user_message("which trace?")}
        answer = await live.jsonrpc("SendMessage", params, prefix="/asyncio", headers=traced())
    assert answer["result"]["task"]["artifacts"][0]["parts"][0]["text"] == TRACE_ID


# --- off: nothing imported --------------------------------------------------------------------

UNTRACED = """
import json, sys
{block}
import httpx, trio
from hypercorn.config import Config
from hypercorn.trio import serve
from a2a_trio import A2AApp
from tests.otel_app import PUSH_SETTINGS, mount_all

async def main():
    app = A2AApp(database=sys.argv[1], push_settings=PUSH_SETTINGS)
    mount_all(app, peer=None)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        [url] = await nursery.start(lambda task_status: serve(
            app, config, shutdown_trigger=stop.wait, task_status=task_status))
        message = {{"messageId": "m1", "role": "ROLE_USER", "parts": [{{"text": "echo hi"}}]}}
        params = {{"message": message}}
        body = {{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}}
        async with httpx.AsyncClient(base_url=url, headers={{"A2A-Version": "1.0"}}) as client:
            answer = (await client.post("/echo/jsonrpc", json=body)).json()
            state = answer["result"]["task"]["status"]["state"]
        stop.set()
    loaded = sorted(name for name, module in sys.modules.items()
                    if name.startswith("opentelemetry") and module is not None)
    print(json.dumps({{"state": state, "loaded": loaded}}))

trio.run(main)
"""


def run_untraced(tmp_path: Path, env: dict[str, str], block: bool = False) -> dict[str, Any]:
    """Serve one SendMessage in a fresh interpreter; what it answered and imported."""
    script = UNTRACED.format(block='sys.modules["opentelemetry"] = None' if block else "")
    clean = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "a2a.db")],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_without_otel_variables_serving_imports_no_opentelemetry(tmp_path: Path) -> None:
    result = run_untraced(tmp_path, {})
    assert result["state"] == "TASK_STATE_COMPLETED"
    assert result["loaded"] == []


def test_without_the_extra_the_variables_are_refused_with_one_line(tmp_path: Path) -> None:
    # The [otel] extra missing: `import opentelemetry` fails, as it does there.
    result = run_untraced(
        tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, block=True
    )
    assert result["state"] == "TASK_STATE_COMPLETED"
    assert result["loaded"] == []
    said = [line for line in result["stderr"].splitlines() if "OpenTelemetry" in line]
    assert len(said) == 1, result["stderr"]
    assert "pip install 'a2a-trio[otel]'" in said[0]


def test_an_exporter_that_is_not_installed_is_refused_with_one_line(tmp_path: Path) -> None:
    result = run_untraced(tmp_path, {"OTEL_TRACES_EXPORTER": "no_such_exporter"})
    assert result["state"] == "TASK_STATE_COMPLETED"  # served, untraced
    said = [line for line in result["stderr"].splitlines() if "no traces are made" in line]
    assert len(said) == 1, result["stderr"]
    assert "'no_such_exporter' is installed" in said[0]


def test_the_environment_turns_tracing_on_only_when_it_asks_for_traces() -> None:
    assert not telemetry.wants_traces({})
    assert not telemetry.wants_traces({"OTEL_SERVICE_NAME": "a"})
    assert not telemetry.wants_traces({"OTEL_TRACES_EXPORTER": "none"})
    assert telemetry.wants_traces({"OTEL_TRACES_EXPORTER": "console"})
    assert telemetry.wants_traces({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert telemetry.wants_traces({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert not telemetry.wants_traces(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}
    )


def test_otlp_means_http_protobuf_unless_the_protocol_says_grpc() -> None:
    from a2a_trio.telemetry.setup import exporter_names

    assert exporter_names({}) == ["otlp_proto_http"]
    assert exporter_names({"OTEL_TRACES_EXPORTER": "otlp,console"}) == [
        "otlp_proto_http",
        "console",
    ]
    assert exporter_names({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == ["otlp_proto_grpc"]
    traces_over_http = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert exporter_names(traces_over_http) == ["otlp_proto_http"]
    with pytest.raises(ValueError, match="not supported"):
        exporter_names({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_a_service_named_nowhere_is_a2a_trio(monkeypatch: pytest.MonkeyPatch) -> None:
    from a2a_trio.telemetry.setup import environment_resource

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert environment_resource().attributes["service.name"] == "a2a-trio"
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=billing,team=agents")
    assert environment_resource().attributes["service.name"] == "billing"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "billing-agent")
    assert environment_resource().attributes["service.name"] == "billing-agent"
    assert environment_resource().attributes["team"] == "agents"

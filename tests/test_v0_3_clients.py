"""The official 0.3 clients against a live a2a-trio server, on both bindings.

a2a-sdk 0.3.26 cannot share an environment with a2a-sdk 1.x (one package
name), so it gets a virtual environment of its own; @a2a-js/sdk 0.3.14 runs
with node. Both are installed once into the git-ignored ``.interop-cache/``
and skipped only when they cannot be installed outside CI (under
``CI=true`` that is a failure). Each client runs every scenario in one
subprocess per binding (tests/interop/v0_3_sdk_client.py and
v0_3_js_client.mjs) and reports what it saw; each test below checks one
behaviour of that report. The server is
``hypercorn --worker-class trio tests.compat_app:app`` on a free port, and
a2a-sdk 1.x (the dev dependency) is the 1.0 client on the other side of the
cross-version tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from a2a.types import GetTaskRequest, TaskState

from .interop_cache import CACHE, INSTALL_TIMEOUT, installing, node_script, unavailable
from .postgres import fresh_database, postgres_url
from .servers import ServerProcess
from .test_sdk_interop import sdk_clients, send_returning_immediately

ROOT = Path(__file__).resolve().parent.parent
PYTHON_SDK = "a2a-sdk==0.3.26"
PYTHON_ENV = CACHE / "a2a-sdk-0.3.26"
JS_SDK = "@a2a-js/sdk@0.3.14"
PYTHON_SCRIPT = ROOT / "tests" / "interop" / "v0_3_sdk_client.py"
JS_SCRIPT = ROOT / "tests" / "interop" / "v0_3_js_client.mjs"
#: Every scenario of one client on one binding, in one process.
RUN_TIMEOUT = 90
#: Bound on waiting for the webhooks of one client's task.
WEBHOOK_TIMEOUT = 20.0

BINDINGS = ["JSONRPC", "HTTP+JSON"]
CLIENTS = ["a2a-sdk", "a2a-js"]


@pytest.fixture(scope="session")
def python_sdk() -> Path:
    """The interpreter of a virtual environment holding a2a-sdk 0.3, made once."""
    python = PYTHON_ENV / "bin" / "python"
    stamp = PYTHON_ENV / "installed"
    with installing(PYTHON_ENV.name):
        if not stamp.exists():
            shutil.rmtree(PYTHON_ENV, ignore_errors=True)
            steps = [
                [sys.executable, "-m", "venv", str(PYTHON_ENV)],
                [str(python), "-m", "pip", "install", "-q", PYTHON_SDK],
            ]
            for step in steps:
                done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
                if done.returncode != 0:
                    unavailable(f"installing {PYTHON_SDK} failed: {done.stderr[-500:]}")
            stamp.write_text(PYTHON_SDK)
    return python


@pytest.fixture(scope="session")
def js_sdk() -> Path:
    """The 0.3 client script next to a node_modules holding @a2a-js/sdk 0.3, made once."""
    _, script = node_script(JS_SDK, JS_SCRIPT)
    return script


@pytest.fixture(scope="module", params=["sqlite", "postgresql-3-processes"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The compat app on one process on SQLite, or on three sharing a PostgreSQL database."""
    directory = tmp_path_factory.mktemp("v0-3-clients")
    with contextlib.ExitStack() as stack:
        database: Path | str = directory / "a2a.db"
        options: tuple[str, ...] = ()
        if request.param != "sqlite":
            location = stack.enter_context(fresh_database(request.getfixturevalue("postgres")))
            database, options = postgres_url(location), ("--workers", "3")
        process = ServerProcess.launch(
            directory / "server.log",
            app="tests.compat_app:app",
            env={**os.environ, "A2A_TRIO_DATABASE": str(database)},
            options=options,
        )
        try:
            process.wait_until_ready()
            yield process
        finally:
            process.stop()


class Webhooks:
    """A webhook receiver on 127.0.0.1 in a thread (the server is another process)."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], Any]] = []
        webhooks = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {name.lower(): value for name, value in self.headers.items()}
                webhooks.received.append((headers, json.loads(body)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"

    def for_task(self, task_id: str, count: int) -> list[tuple[dict[str, str], Any]]:
        """The first ``count`` webhooks about ``task_id``, once they have arrived."""
        deadline = time.monotonic() + WEBHOOK_TIMEOUT
        while True:
            found = [(h, body) for h, body in self.received if body.get("id") == task_id]
            if len(found) >= count or time.monotonic() > deadline:
                return found[:count]
            time.sleep(0.05)


@pytest.fixture(scope="module")
def webhooks() -> Iterator[Webhooks]:
    receiver = Webhooks()
    thread = threading.Thread(target=receiver.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.http.shutdown()
        receiver.http.server_close()


def start_with_v1(server: ServerProcess, text: str) -> str:
    """A task started by a2a-sdk 1.x (returnImmediately); returns its id."""

    async def main() -> str:
        async with sdk_clients(server.url, "JSONRPC") as clients:
            return (await send_returning_immediately(clients.blocking, text)).id

    return asyncio.run(main())


def read_with_v1(server: ServerProcess, binding: str, task_id: str) -> Any:
    """GetTask by a2a-sdk 1.x."""

    async def main() -> Any:
        async with sdk_clients(server.url, binding) as clients:
            return await clients.blocking.get_task(GetTaskRequest(id=task_id))

    return asyncio.run(main())


Reports = dict[tuple[str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def reports(server: ServerProcess) -> Reports:
    return {}


@pytest.fixture(params=[(c, b) for c in CLIENTS for b in BINDINGS], ids=lambda p: f"{p[0]}-{p[1]}")
def seen(
    request: pytest.FixtureRequest, server: ServerProcess, reports: Reports, webhooks: Webhooks
) -> dict[str, Any]:
    """What one 0.3 client saw on one binding, running every scenario once per module."""
    client, binding = request.param
    if (client, binding) not in reports:
        command: list[str]
        if client == "a2a-sdk":
            command = [str(request.getfixturevalue("python_sdk")), str(PYTHON_SCRIPT)]
        else:
            command = [shutil.which("node") or "node", str(request.getfixturevalue("js_sdk"))]
        instructions = {
            # The base URL only: each client resolves the card its default
            # way (GET /.well-known/agent-card.json without A2A-Version),
            # which tests.compat_app answers with the 0.3 keys too.
            "url": server.url,
            "transport": binding,
            "webhook": webhooks.url,
            "v1_task": start_with_v1(server, "loop"),
        }
        done = subprocess.run(
            command,
            input=json.dumps(instructions),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        reports[client, binding] = json.loads(done.stdout)
    report = reports[client, binding]
    assert "error" not in report, report["error"]
    report["binding"], report["client"] = binding, client
    return report


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


def texts(parts: list[dict[str, Any]]) -> list[str]:
    return [part["text"] for part in parts]


# --- the card and the endpoint ----------------------------------------------------------


def test_the_0_3_client_reads_the_card_and_calls_the_binding_it_chose(
    seen: dict[str, Any], server: ServerProcess
) -> None:
    endpoint = {"JSONRPC": "/jsonrpc", "HTTP+JSON": "/rest"}[seen["binding"]]
    if "endpoint" in seen:  # a2a-sdk says where its transport posts
        assert seen["endpoint"] == server.url + endpoint
    else:
        expected = {"JSONRPC": "JsonRpcTransport", "HTTP+JSON": "RestTransport"}
        assert seen["transport"].endswith(expected[seen["binding"]])


def test_the_extended_card_comes_through_the_0_3_call(seen: dict[str, Any]) -> None:
    assert seen["extended_card"]["name"] == "Test Agent (extended)"
    assert seen["extended_card"]["protocolVersion"] == "0.3.0"


# --- messages ---------------------------------------------------------------------------


def test_a_blocking_send_returns_the_completed_task(seen: dict[str, Any]) -> None:
    task = seen["send"]
    assert task["kind"] == "task" and state(task) == "completed"
    assert [texts(artifact["parts"]) for artifact in task["artifacts"]] == [["hello"]]
    assert texts(task["history"][0]["parts"]) == ["echo hello"]


def test_a_stream_relays_every_event_and_ends_final(seen: dict[str, Any]) -> None:
    assert seen["stream"] == [
        "task",
        "status-update:working",
        "artifact-update",
        "artifact-update",
        "artifact-update",
        "status-update:completed",
    ]


def test_an_input_required_task_continues_with_a_follow_up(seen: dict[str, Any]) -> None:
    assert state(seen["ask"]) == "input-required"
    assert seen["follow_up"]["id"] == seen["ask"]["id"]
    assert state(seen["follow_up"]) == "completed"


# --- tasks ------------------------------------------------------------------------------


def test_get_returns_the_task_and_limits_its_history(seen: dict[str, Any]) -> None:
    assert seen["get"]["id"] == seen["send"]["id"] and state(seen["get"]) == "completed"
    assert len(seen["get_history_1"]["history"]) == 1


def test_get_of_an_unknown_task_is_task_not_found(seen: dict[str, Any]) -> None:
    # Each client shows it its own way: the JSON-RPC code, the HTTP status, a class.
    assert seen["get_unknown"] in (
        {"code": -32001},
        {"status": 404},
        {"error": "TaskNotFoundJSONRPCError"},
        {"error": "TaskNotFoundError"},
    )


def test_resubscribe_follows_a_running_task(seen: dict[str, Any]) -> None:
    assert seen["resubscribe"] == ["task", "status-update:working"]


def test_resubscribing_to_an_unknown_task_is_task_not_found(seen: dict[str, Any]) -> None:
    # The error comes inside the event stream on JSON-RPC (a2a-sdk 0.3 refuses
    # any other answer to a streaming call as an invalid SSE response) and as
    # the HTTP status on HTTP+JSON (a2a-sdk 0.3's REST client reads every SSE
    # frame as an event, so an error frame would be a ParseError there).
    # a2a-sdk 0.3's REST resubscribe never looks at the status: any answer
    # that is not SSE is its A2AClientHTTPError 400 (its own server breaks
    # the stream off instead, which it reports as a 503).
    expected_by_client: dict[tuple[str, str], dict[str, object]] = {
        ("a2a-sdk", "JSONRPC"): {"code": -32001},
        ("a2a-sdk", "HTTP+JSON"): {"status": 400},
        ("a2a-js", "JSONRPC"): {"error": "TaskNotFoundJSONRPCError", "typed": "cause"},
        ("a2a-js", "HTTP+JSON"): {"error": "TaskNotFoundError", "typed": "thrown"},
    }
    expected = expected_by_client[seen["client"], seen["binding"]]
    got = seen["resubscribe_unknown"]
    assert {key: got.get(key) for key in expected} == expected, got


def test_streaming_to_a_finished_task_is_unsupported_operation(seen: dict[str, Any]) -> None:
    expected_by_client: dict[tuple[str, str], dict[str, object]] = {
        ("a2a-sdk", "JSONRPC"): {"code": -32004},
        ("a2a-sdk", "HTTP+JSON"): {"status": 400},
        ("a2a-js", "JSONRPC"): {"error": "UnsupportedOperationJSONRPCError", "typed": "cause"},
        ("a2a-js", "HTTP+JSON"): {"error": "UnsupportedOperationError", "typed": "thrown"},
    }
    expected = expected_by_client[seen["client"], seen["binding"]]
    got = seen["stream_to_finished"]
    assert {key: got.get(key) for key in expected} == expected, got


def test_cancel_ends_the_task_canceled(seen: dict[str, Any]) -> None:
    assert state(seen["cancel"]) == "canceled"


# --- push configs -----------------------------------------------------------------------


def test_a_push_config_is_set_and_read_back(seen: dict[str, Any]) -> None:
    assert seen["push_set"]["taskId"] == seen["ask"]["id"]
    config = seen["push_set"]["pushNotificationConfig"]
    assert (config["id"], config["token"].endswith("0.3-token")) == ("hook", True)
    assert seen["push_get"] == seen["push_set"]


def test_push_configs_are_listed_and_deleted(seen: dict[str, Any]) -> None:
    def ids(configs: list[dict[str, Any]]) -> list[str]:
        return [config["pushNotificationConfig"]["id"] for config in configs]

    assert ids(seen["push_list"]) == ["hook", "spare"]
    assert seen["push_delete"] in (None, {})
    assert ids(seen["push_list_after_delete"]) == ["hook"]


# --- across versions --------------------------------------------------------------------


def test_a_0_3_client_follows_gets_and_cancels_a_task_a_1_0_client_started(
    seen: dict[str, Any],
) -> None:
    assert seen["v1_task_resubscribe"] == ["task", "status-update:working"]
    assert state(seen["v1_task_get"]) == "working"
    assert state(seen["v1_task_cancel"]) == "canceled"


def test_a_1_0_client_reads_a_task_a_0_3_client_started(
    seen: dict[str, Any], server: ServerProcess
) -> None:
    task = read_with_v1(server, seen["binding"], seen["v0_3_task"])
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.history[0].parts[0].text == "echo from 0.3"
    assert task.artifacts[0].parts[0].text == "from 0.3"


def test_webhooks_to_a_config_the_0_3_client_set_carry_a_task_a2a_sdk_0_3_reads(
    seen: dict[str, Any], webhooks: Webhooks, python_sdk: Path
) -> None:
    # The follow-up's three events (working, artifact, completed), each as the task.
    received = webhooks.for_task(seen["ask"]["id"], 3)
    assert [body["status"]["state"] for _, body in received] == ["working", "working", "completed"]
    token = seen["push_set"]["pushNotificationConfig"]["token"]
    assert all(headers["x-a2a-notification-token"] == token for headers, _ in received)
    check = (
        "import json, sys; from a2a.types import Task; "
        "tasks = [Task.model_validate(body) for body in json.load(sys.stdin)]; "
        "print(json.dumps([task.status.state.value for task in tasks]))"
    )
    done = subprocess.run(
        [str(python_sdk), "-c", check],
        input=json.dumps([body for _, body in received]),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == ["working", "working", "completed"]

"""Durability: what a server acknowledged survives SIGKILL, and a restart ends interrupted work.

One crash serves every test here: a server process on a fresh database
completes an ``echo`` task, leaves two ``ask`` tasks INPUT_REQUIRED and holds a
``hold`` task WORKING; it is killed with SIGKILL and a new process is started
on the same database. Only one test changes anything afterwards (it
answers the second ``ask`` task), and no other test looks at that task's state.
The crash happens once per backend: on a SQLite file and on PostgreSQL.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from .conftest import VERSION_HEADERS, user_message
from .postgres import BACKENDS, database_for
from .servers import ServerProcess

REQUEST_TIMEOUT = 10.0
WORKING_TIMEOUT = 10.0

#: The streamed log of the held task as the restarted server must replay it.
REPLAYED_LOG = [
    ("1", "task", "TASK_STATE_SUBMITTED"),
    ("2", "statusUpdate", "TASK_STATE_WORKING"),
    ("3", "statusUpdate", "TASK_STATE_FAILED"),
]


def http_client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers=VERSION_HEADERS, timeout=REQUEST_TIMEOUT, trust_env=False
    )


def rpc_call(client: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call; returns the whole response body."""
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    response = client.post("/jsonrpc", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def rpc(client: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call that must succeed; returns its result."""
    answer = rpc_call(client, method, params)
    assert "error" not in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def read_events(
    client: httpx.Client,
    path: str,
    *,
    last_event_id: str,
    body: dict[str, Any] | None = None,
    limit: int | None = None,
) -> list[tuple[str | None, dict[str, Any]]]:
    """POST a streaming request; returns each SSE frame's (id, decoded data).

    Reads until the server ends the stream, or until ``limit`` frames arrived.
    """
    frames: list[tuple[str | None, dict[str, Any]]] = []
    headers = {"Last-Event-ID": last_event_id, "Accept": "text/event-stream"}
    with client.stream("POST", path, json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        event_id: str | None = None
        for line in response.iter_lines():
            if line.startswith("id:"):
                event_id = line[3:].strip()
            elif line.startswith("data:"):
                frames.append((event_id, json.loads(line[5:])))
                event_id = None
                if limit is not None and len(frames) == limit:
                    break
    return frames


def jsonrpc_subscribe(
    client: httpx.Client, task_id: str, *, last_event_id: str, limit: int | None = None
) -> list[tuple[str | None, dict[str, Any]]]:
    """SubscribeToTask over JSON-RPC; each frame's data is its StreamResponse (the result)."""
    body = {
        "jsonrpc": "2.0",
        "id": "sub",
        "method": "SubscribeToTask",
        "params": {"id": task_id},
    }
    frames = read_events(client, "/jsonrpc", body=body, last_event_id=last_event_id, limit=limit)
    for _, data in frames:
        assert "error" not in data, data
    return [(event_id, data["result"]) for event_id, data in frames]


def rest_subscribe(
    client: httpx.Client, task_id: str, *, last_event_id: str
) -> list[tuple[str | None, dict[str, Any]]]:
    """SubscribeToTask over HTTP+JSON (no body); each frame's data is a StreamResponse."""
    return read_events(client, f"/rest/tasks/{task_id}:subscribe", last_event_id=last_event_id)


def summarise(frames: list[tuple[str | None, dict[str, Any]]]) -> list[tuple[str | None, str, str]]:
    """Frames as (event id, payload kind, task state)."""
    summary = []
    for event_id, response in frames:
        [kind] = response
        state = response[kind]["status"]["state"]
        summary.append((event_id, kind, state))
    return summary


def wait_until_working(client: httpx.Client, task_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WORKING_TIMEOUT
    while True:
        task = rpc(client, "GetTask", {"id": task_id})
        if task["status"]["state"] == "TASK_STATE_WORKING":
            return task
        assert time.monotonic() < deadline, f"task never became WORKING: {task}"
        time.sleep(0.02)


@dataclass
class Crash:
    """What the first server acknowledged, and the server started after its SIGKILL."""

    restarted: ServerProcess
    echo_before: dict[str, Any]
    asked_before: dict[str, Any]
    to_answer_before: dict[str, Any]
    hold_before: dict[str, Any]
    hold_log_before: list[tuple[str | None, dict[str, Any]]]


@pytest.fixture(scope="module", params=BACKENDS)
def crash(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Crash]:
    directory = tmp_path_factory.mktemp("restart")
    database = database_for(request.param, directory, request)
    first = ServerProcess.start(database, directory / "first.log")
    try:
        with http_client(first) as client:
            echoed = rpc(client, "SendMessage", {"message": user_message("echo kept safe")})
            assert echoed["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            echo_before = rpc(client, "GetTask", {"id": echoed["task"]["id"]})
            asked_before, to_answer_before = (
                rpc(client, "SendMessage", {"message": user_message(text)})["task"]
                for text in ("ask first", "ask second")
            )
            assert asked_before["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            assert to_answer_before["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            held = rpc(
                client,
                "SendMessage",
                {
                    "message": user_message("hold the line"),
                    "configuration": {"returnImmediately": True},
                },
            )
            hold_id = held["task"]["id"]
            hold_before = wait_until_working(client, hold_id)
            hold_log_before = jsonrpc_subscribe(client, hold_id, last_event_id="0", limit=2)
        status = first.kill()
    finally:
        first.stop()
    assert status == -signal.SIGKILL, first.output()
    restarted = ServerProcess.start(database, directory / "restarted.log")
    try:
        yield Crash(
            restarted, echo_before, asked_before, to_answer_before, hold_before, hold_log_before
        )
    finally:
        restarted.stop()


def test_the_log_was_acknowledged_up_to_working_before_the_kill(crash: Crash) -> None:
    assert summarise(crash.hold_log_before) == REPLAYED_LOG[:2]


def test_a_completed_task_survives_sigkill_intact(crash: Crash) -> None:
    with http_client(crash.restarted) as client:
        after = rpc(client, "GetTask", {"id": crash.echo_before["id"]})
    assert after == crash.echo_before
    assert after["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [artifact["parts"] for artifact in after["artifacts"]] == [[{"text": "kept safe"}]]
    assert [m["parts"] for m in after["history"]] == [[{"text": "echo kept safe"}]]


def test_a_task_running_at_sigkill_is_failed_on_restart_with_the_reason(crash: Crash) -> None:
    before = crash.hold_before
    with http_client(crash.restarted) as client:
        after = rpc(client, "GetTask", {"id": before["id"]})
    assert after["status"]["state"] == "TASK_STATE_FAILED"
    reason = after["status"]["message"]
    assert reason["role"] == "ROLE_AGENT"
    assert "server stopped" in reason["parts"][0]["text"]
    assert after["contextId"] == before["contextId"]
    # Every acknowledged message is kept; the status message joins the history after them.
    assert after["history"] == [*before["history"], reason]
    assert [m["parts"] for m in before["history"]] == [[{"text": "hold the line"}]]
    assert "artifacts" not in after


def test_list_tasks_after_restart_shows_both_tasks(crash: Crash) -> None:
    with http_client(crash.restarted) as client:
        listed = rpc(client, "ListTasks", {})
    states = {task["id"]: task["status"]["state"] for task in listed["tasks"]}
    assert set(states) == {
        crash.echo_before["id"],
        crash.asked_before["id"],
        crash.to_answer_before["id"],
        crash.hold_before["id"],
    }
    assert states[crash.echo_before["id"]] == "TASK_STATE_COMPLETED"
    assert states[crash.asked_before["id"]] == "TASK_STATE_INPUT_REQUIRED"
    assert states[crash.hold_before["id"]] == "TASK_STATE_FAILED"
    assert listed["totalSize"] == 4


def test_a_task_waiting_for_input_at_sigkill_still_waits_after_restart(crash: Crash) -> None:
    with http_client(crash.restarted) as client:
        after = rpc(client, "GetTask", {"id": crash.asked_before["id"]})
    assert after == crash.asked_before
    assert after["status"]["message"]["parts"] == [{"text": "What is your name?"}]


def test_a_task_waiting_for_input_at_sigkill_can_be_answered_after_restart(crash: Crash) -> None:
    before = crash.to_answer_before
    with http_client(crash.restarted) as client:
        answer = user_message("Grace", taskId=before["id"])
        answered = rpc(client, "SendMessage", {"message": answer})["task"]
    assert answered["id"] == before["id"]
    assert answered["contextId"] == before["contextId"]
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["parts"] for a in answered["artifacts"]] == [[{"text": "continued with: Grace"}]]
    assert answered["history"][: len(before["history"])] == before["history"]
    [recorded] = [m for m in answered["history"] if m["messageId"] == answer["messageId"]]
    assert recorded["parts"] == [{"text": "Grace"}]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_subscribe_from_last_event_id_0_replays_the_log_of_the_failed_task(
    crash: Crash, binding: str
) -> None:
    task_id = crash.hold_before["id"]
    with http_client(crash.restarted) as client:
        if binding == "JSONRPC":
            frames = jsonrpc_subscribe(client, task_id, last_event_id="0")
        else:
            frames = rest_subscribe(client, task_id, last_event_id="0")
    assert summarise(frames) == REPLAYED_LOG
    # What was acknowledged before the kill is replayed unchanged.
    assert frames[:2] == crash.hold_log_before
    failed = frames[2][1]["statusUpdate"]
    assert failed["taskId"] == task_id
    assert "server stopped" in failed["status"]["message"]["parts"][0]["text"]


def test_subscribe_from_a_later_last_event_id_replays_only_what_follows(crash: Crash) -> None:
    with http_client(crash.restarted) as client:
        frames = jsonrpc_subscribe(client, crash.hold_before["id"], last_event_id="2")
    assert summarise(frames) == REPLAYED_LOG[2:]


def test_subscribe_without_last_event_id_to_the_failed_task_is_refused(crash: Crash) -> None:
    body = {"id": crash.hold_before["id"]}
    with http_client(crash.restarted) as client:
        answer = rpc_call(client, "SubscribeToTask", body)
    assert "result" not in answer
    assert answer["error"]["code"] == -32004
    assert "TASK_STATE_FAILED" in answer["error"]["message"]

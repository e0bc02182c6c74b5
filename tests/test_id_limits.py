"""Identifiers a client sends are ones every backend can store and index.

PostgreSQL's text cannot hold U+0000 and its indexes take about 2.7 kB a row,
so ids holding U+0000 or longer than ``Limits.id_bytes`` are refused at the
edge (-32602 naming the field) on both bindings, before any executor starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from .agents import ScriptedExecutor
from .conftest import LiveServer, scripted_root_server, user_message

EXECUTOR = ScriptedExecutor()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    async with scripted_root_server(tmp_path, EXECUTOR) as live:
        yield live


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("messageId", "m\x00", "U+0000"),
        ("contextId", "c\x00", "U+0000"),
        ("taskId", "t\x00", "U+0000"),
        ("messageId", "m" * 1025, "1025 bytes exceed the limit of 1024"),
        ("contextId", "é" * 513, "1026 bytes exceed the limit of 1024"),
    ],
)
async def test_an_id_that_cannot_be_stored_everywhere_is_refused_naming_the_field(
    server: LiveServer, field: str, value: str, reason: str
) -> None:
    message: dict[str, Any] = user_message("echo hi")
    message[field] = value
    answer = await server.jsonrpc("SendMessage", {"message": message})
    assert answer["error"]["code"] == -32602, answer
    assert f"message.{field}" in answer["error"]["message"]
    assert reason in answer["error"]["message"]
    response = await server.rest("POST", "/message:send", json={"message": message})
    assert response.status_code == 400
    assert f"message.{field}" in response.text
    assert EXECUTOR.executions == 0


async def test_an_id_at_the_limit_is_accepted_and_read_back(server: LiveServer) -> None:
    context = "c" * 1024
    answer = await server.jsonrpc(
        "SendMessage", {"message": user_message("echo hi", contextId=context)}
    )
    task = answer["result"]["task"]
    assert task["contextId"] == context
    listed = await server.jsonrpc("ListTasks", {"contextId": context})
    assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("GetTask", {"id": "x\x00"}, "id"),
        ("CancelTask", {"id": "x" * 2000}, "id"),
        ("SubscribeToTask", {"id": "x\x00"}, "id"),
        ("ListTasks", {"contextId": "x\x00"}, "contextId"),
        ("GetTaskPushNotificationConfig", {"taskId": "t\x00", "id": "c"}, "taskId"),
    ],
)
async def test_task_requests_with_such_ids_are_invalid_params_not_unknown_tasks(
    server: LiveServer, method: str, params: dict[str, Any], field: str
) -> None:
    answer = await server.jsonrpc(method, params)
    assert answer["error"]["code"] == -32602, answer
    assert field in answer["error"]["message"]

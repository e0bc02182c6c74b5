"""Everything the server accepts can be stored and read back; the rest is refused at the edge.

Free-form JSON (metadata, data parts) is bounded in depth and size, parts are
counted, and strings must be valid Unicode: a request over a limit gets a
precise protocol error naming the field, and no executor ever starts for it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from a2a_trio import HostSettings, Limits

from .agents import ScriptedExecutor
from .conftest import LiveServer, scripted_root_server, user_message

EXECUTOR = ScriptedExecutor()


def nested(levels: int) -> Any:
    """A JSON value ``levels`` objects deep."""
    value: Any = "bottom"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    async with scripted_root_server(tmp_path, EXECUTOR) as live:
        yield live


async def post_jsonrpc(server: LiveServer, body: bytes) -> dict[str, Any]:
    response = await server.client.post(
        "/jsonrpc", content=body, headers={"Content-Type": "application/json"}
    )
    result: dict[str, Any] = response.json()
    return result


def send_body(message: dict[str, Any], **params: Any) -> bytes:
    envelope = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "SendMessage",
        "params": {"message": message, **params},
    }
    return json.dumps(envelope).encode()


async def assert_lists_and_serves(server: LiveServer) -> None:
    listed = await server.jsonrpc("ListTasks", {})
    assert "result" in listed, listed
    body = await server.jsonrpc("SendMessage", {"message": user_message("echo still here")})
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    task_id = body["result"]["task"]["id"]
    again = await server.jsonrpc("GetTask", {"id": task_id})
    assert again["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_metadata_nested_200_deep_is_invalid_params_naming_the_field(
    server: LiveServer,
) -> None:
    body = await post_jsonrpc(server, send_body(user_message("echo", metadata=nested(200))))
    assert body["error"]["code"] == -32602
    assert body["id"] == 9
    assert "message.metadata" in body["error"]["message"]
    assert "32 levels" in body["error"]["message"]
    assert EXECUTOR.executions == 0
    await assert_lists_and_serves(server)


@pytest.mark.parametrize("levels", [256, 600, 900])
async def test_a_data_part_nested_past_the_serialiser_is_invalid_params(
    server: LiveServer, levels: int
) -> None:
    # Written out by hand: json.dumps itself gives up near 1,000 levels.
    data = b'{"a":' * levels + b"1" + b"}" * levels
    body = await post_jsonrpc(
        server,
        b'{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":'
        b'{"messageId":"m1","role":"ROLE_USER","parts":[{"data":' + data + b"}]}}}",
    )
    assert body["error"]["code"] == -32602
    assert "message.parts.0.data" in body["error"]["message"]
    assert EXECUTOR.executions == 0
    await assert_lists_and_serves(server)


async def test_request_metadata_is_bounded_too(server: LiveServer) -> None:
    body = await post_jsonrpc(server, send_body(user_message("echo"), metadata=nested(40)))
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith("metadata:")


async def test_nesting_past_the_json_parser_is_a_parse_error_on_both_bindings(
    server: LiveServer,
) -> None:
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    body = await post_jsonrpc(
        server, b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":' + deep + b"}"
    )
    assert body["error"]["code"] == -32700
    response = await server.rest(
        "POST",
        "/message:send",
        content=b'{"message":' + deep + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert EXECUTOR.executions == 0
    await assert_lists_and_serves(server)


# Lone surrogates: JSON can escape them, UTF-8 (and so SQLite) cannot hold them.
LONE = "\\ud800"


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ('{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x%sy"}]}', "message.parts.0.text"),
        (
            '{"messageId":"m1","role":"ROLE_USER","contextId":"c%s","parts":[{"text":"x"}]}',
            "message.contextId",
        ),
        ('{"messageId":"m%s","role":"ROLE_USER","parts":[{"text":"x"}]}', "message.messageId"),
        (
            '{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"k%s":1}}',
            "message.metadata.k\\ud800",
        ),
    ],
)
async def test_a_lone_surrogate_is_invalid_params_naming_the_field(
    server: LiveServer, template: str, field: str
) -> None:
    message = template % LONE
    body = await post_jsonrpc(
        server,
        b'{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":'
        + message.encode()
        + b"}}",
    )
    assert body["error"]["code"] == -32602, body
    assert body["error"]["message"].startswith(f"{field}:")
    assert "Unicode" in body["error"]["message"]
    assert EXECUTOR.executions == 0
    await assert_lists_and_serves(server)


async def test_a_lone_surrogate_in_a_list_filter_is_invalid_params(server: LiveServer) -> None:
    body = await post_jsonrpc(
        server,
        b'{"jsonrpc":"2.0","id":4,"method":"ListTasks","params":{"contextId":"c\\udfff"}}',
    )
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith("contextId:")


async def test_a_lone_surrogate_in_raw_bytes_on_rest_is_refused(server: LiveServer) -> None:
    # CESU-style bytes ED A0 80 encode U+D800; json.loads would let them through.
    content = b'{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"\xed\xa0\x80"}]}}'
    response = await server.rest(
        "POST", "/message:send", content=content, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert "message.parts.0.text" in response.json()["error"]["message"]
    assert EXECUTOR.executions == 0


async def test_an_escaped_surrogate_pair_is_accepted_stored_and_read_back(
    server: LiveServer,
) -> None:
    # json.dumps escapes an emoji as a surrogate pair: that is valid Unicode.
    body = await post_jsonrpc(server, send_body(user_message("echo smile \U0001f600")))
    task = body["result"]["task"]
    assert task["artifacts"][0]["parts"][0]["text"] == "smile \U0001f600"
    again = await server.jsonrpc("GetTask", {"id": task["id"]})
    assert again["result"]["history"][0]["parts"][0]["text"] == "echo smile \U0001f600"


async def test_a_message_over_the_part_limit_is_invalid_params(server: LiveServer) -> None:
    message = user_message("echo")
    message["parts"] = [{"text": "x"}] * 1001
    body = await post_jsonrpc(server, send_body(message))
    assert body["error"]["code"] == -32602
    assert "1001 parts exceed the limit of 1000" in body["error"]["message"]
    assert EXECUTOR.executions == 0
    message["parts"] = [{"text": "x"}] * 1000
    body = await post_jsonrpc(server, send_body(message))
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_limits_are_settable(tmp_path: Path) -> None:
    settings = HostSettings(limits=Limits(json_depth=4, json_items=10, parts=2))
    async with scripted_root_server(tmp_path, EXECUTOR, host_settings=settings) as server:
        body = await post_jsonrpc(server, send_body(user_message("echo", metadata=nested(4))))
        assert "result" in body
        body = await post_jsonrpc(server, send_body(user_message("echo", metadata=nested(5))))
        assert "4 levels" in body["error"]["message"]
        wide = {str(key): key for key in range(10)}
        body = await post_jsonrpc(server, send_body(user_message("echo", metadata=wide)))
        assert "10 values" in body["error"]["message"]
        message = user_message("echo")
        message["parts"] = [{"text": "x"}] * 3
        body = await post_jsonrpc(server, send_body(message))
        assert "the limit of 2" in body["error"]["message"]


def test_the_depth_limit_cannot_exceed_what_storage_reads_back() -> None:
    with pytest.raises(ValueError, match="between 1 and 100"):
        Limits(json_depth=150)


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
async def test_nan_and_infinity_are_not_json_on_either_binding(
    server: LiveServer, constant: bytes
) -> None:
    message = b'{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"echo"}],"metadata":{"x":'
    message += constant + b"}}"
    body = await post_jsonrpc(
        server,
        b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":' + message + b"}}",
    )
    assert body["error"]["code"] == -32700
    response = await server.rest(
        "POST",
        "/message:send",
        content=b'{"message":' + message + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert EXECUTOR.executions == 0


async def test_a_push_token_that_cannot_be_an_http_header_is_invalid_params(
    server: LiveServer,
) -> None:
    task = (await server.jsonrpc("SendMessage", {"message": user_message("ask")}))["result"]["task"]
    for token in ["\u20acuro", "a\r\nX-Injected: 1"]:
        config = {"taskId": task["id"], "url": "http://127.0.0.1:9/hook", "token": token}
        body = await server.jsonrpc("CreateTaskPushNotificationConfig", config)
        assert body["error"]["code"] == -32602
        assert body["error"]["message"].startswith("token:")

"""A JSON object that names a member twice is a parse error on every JSON binding (issue 31).

Python's parser keeps the last: ``"method":"GetTask","method":"SendMessage"``
sent a message past whatever read the first name (a proxy, a log, a filter).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from a2a_trio.protocol import JSONParseError
from a2a_trio.protocol.operations import decode_json

from .agents import ScriptedExecutor
from .conftest import LiveServer, scripted_root_server

EXECUTOR = ScriptedExecutor()
MESSAGE = '{"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "echo hi"}]}'
MESSAGE_V0_3 = (
    '{"messageId": "m-1", "role": "user", "kind": "message",'
    ' "parts": [{"kind": "text", "text": "echo hi"}]}'
)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    async with scripted_root_server(tmp_path, EXECUTOR) as live:
        yield live


async def post(server: LiveServer, path: str, body: str, version: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json", "A2A-Version": version or ""}
    return await server.client.post(path, content=body.encode(), headers=headers)


@pytest.mark.parametrize(
    ("version", "body"),
    [
        (
            "1.0",
            '{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "method": "SendMessage",'
            f' "params": {{"message": {MESSAGE}}}}}',
        ),
        (
            "1.0",
            '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage",'
            f' "params": {{"message": {MESSAGE}, "message": {MESSAGE}}}}}',
        ),
        (
            None,
            '{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "method": "message/send",'
            f' "params": {{"message": {MESSAGE_V0_3}}}}}',
        ),
    ],
    ids=["method", "params", "v0.3"],
)
async def test_a_jsonrpc_call_naming_a_member_twice_is_a_parse_error(
    server: LiveServer, version: str | None, body: str
) -> None:
    response = await post(server, "/jsonrpc", body, version)

    error = response.json()["error"]
    assert error["code"] == -32700
    assert "appears twice" in error["message"]
    assert EXECUTOR.executions == 0


@pytest.mark.parametrize(
    ("version", "path", "body"),
    [
        ("1.0", "/rest/message:send", f'{{"message": {MESSAGE}, "message": {MESSAGE}}}'),
        (None, "/rest/v1/message:send", f'{{"message": {MESSAGE_V0_3}, "message": {{}}}}'),
    ],
    ids=["1.0", "v0.3"],
)
async def test_an_http_json_body_naming_a_member_twice_is_a_parse_error(
    server: LiveServer, version: str | None, path: str, body: str
) -> None:
    response = await post(server, path, body, version)

    assert response.status_code == 400
    assert "appears twice" in response.text
    assert EXECUTOR.executions == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": 1, "b": {"c": 2}, "a": 3}',
        b'{"a": {"b": 1, "b": 2}}',
        b'{"a": {"b": 1}, "c": {"b": 2, "b": 3}}',  # a name used in two objects, and twice in one
        b'{"a\\u0062": 1, "ab": 2}',  # one name spelt two ways
        b'{"t": "\\"a\\": 1", "a": 1, "a": 2}',
        '{"a": 1, "a": 2}'.encode("utf-16"),
        b'\xef\xbb\xbf{"a": 1, "a": 2}',
        '{"é": 1, "é": 2}'.encode(),
    ],
    ids=["top", "nested", "reused", "escaped", "quoted", "utf-16", "bom", "non-ascii"],
)
def test_every_spelling_of_a_repeated_name_is_refused(body: bytes) -> None:
    with pytest.raises(JSONParseError, match="appears twice in one object"):
        decode_json(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": {"b": 1}, "c": {"b": 2}}',
        b'{ "x" : "y:z" , "w" : ["\\"a\\":", {"a": 1}] }',
        '{"é": "ü", "e": [1, 2.5, null, true]}'.encode(),
    ],
)
def test_names_that_repeat_only_across_objects_decode_as_json_does(body: bytes) -> None:
    assert decode_json(body) == json.loads(body)

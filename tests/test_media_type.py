"""``application/a2a+json`` (spec v1.0.1): accepted as a request's type, answered when asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_trio.server.asgi import answers_a2a_json

from .conftest import live_server, user_message
from .test_requirements import scripted

A2A_JSON = "application/a2a+json"


@pytest.mark.parametrize(
    ("accept", "asked"),
    [
        (None, False),
        ("*/*", False),
        ("application/json", False),
        ("application/a2a+json", True),
        ("application/json;q=0.9, application/a2a+json", True),
        ("Application/A2A+JSON; q=0.5", True),
        ("application/a2a+json;q=0", False),
    ],
)
def test_the_accept_header_asks_for_a2a_json(accept: str | None, asked: bool) -> None:
    assert answers_a2a_json(accept) is asked


async def test_both_bindings_take_a2a_json_and_answer_in_it_when_asked(tmp_path: Path) -> None:
    headers = {"Content-Type": A2A_JSON, "Accept": A2A_JSON}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
    async with live_server(tmp_path, scripted) as server:
        client = server.client
        rpc = await client.post(
            "/jsonrpc",
            json={**body, "params": {"message": user_message("echo a")}},
            headers=headers,
        )
        rest = await client.post(
            "/rest/message:send", json={"message": user_message("echo b")}, headers=headers
        )
        missing = await client.get("/rest/tasks/none", headers={"Accept": A2A_JSON})
        plain = await client.get("/rest/tasks/none")
    assert rpc.headers["content-type"] == A2A_JSON and "result" in rpc.json()
    assert rest.headers["content-type"] == A2A_JSON and "task" in rest.json()
    assert (missing.status_code, missing.headers["content-type"]) == (404, A2A_JSON)
    assert plain.headers["content-type"] == "application/json"

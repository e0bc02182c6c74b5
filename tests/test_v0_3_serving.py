"""Serving protocol 0.3 next to 1.0: which requests are 0.3, the wire details, webhooks.

The official 0.3 clients are in tests/test_v0_3_clients.py; these tests send
0.3 requests by hand, as those clients do (no ``A2A-Version`` header), to a
live server on 127.0.0.1, and check what the clients cannot show: the raw SSE
lines, the version table, the switch, and the body of a webhook to a config
made over 0.3. Webhooks go to a real receiver (tests/webhooks.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import sqlite_utils
import trio

from a2a_trio import A2AApp, SqliteStore
from a2a_trio.protocol import AgentCard, TaskPushNotificationConfig
from a2a_trio.protocol.compat_v0_3 import card_for_both
from a2a_trio.store.schema import MIGRATIONS, SCHEMA_VERSION

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message
from .test_push_delivery import (
    ALLOW_RECEIVER,
    SETTLE_TIMEOUT,
    TOKEN,
    push_server,
    rpc,
    settled,
    webhook,
)
from .webhooks import webhook_receiver


def message_v0_3(text: str, **fields: Any) -> dict[str, Any]:
    """A 0.3 JSON-RPC message (the JSON schema's shape)."""
    parts = [{"kind": "text", "text": text}]
    message = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user", "parts": parts}
    return message | fields


@asynccontextmanager
async def client_v0_3(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client that sends what 0.3 clients send: no A2A-Version header."""
    async with httpx.AsyncClient(base_url=server.url, timeout=10.0) as client:
        yield client


async def call_v0_3(
    client: httpx.AsyncClient, method: str, params: dict[str, Any], **kw: Any
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}
    response = await client.post("/jsonrpc", json=body, **kw)
    answer: dict[str, Any] = response.json()
    return answer


def serve_scripted(*, compat_v0_3: bool = True) -> Any:
    def configure(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=ScriptedExecutor(), compat_v0_3=compat_v0_3)

    return configure


# --- which requests are 0.3 -------------------------------------------------------------


async def test_a_0_3_method_is_served_as_0_3_without_any_header(tmp_path: Path) -> None:
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        answer = await call_v0_3(client, "message/send", {"message": message_v0_3("echo hi")})
    assert answer["result"]["kind"] == "task"
    assert answer["result"]["status"]["state"] == "completed"


async def test_a_0_3_method_stays_0_3_whatever_the_header_says(tmp_path: Path) -> None:
    async with live_server(tmp_path, serve_scripted()) as server:
        answer = await server.jsonrpc("message/send", {"message": message_v0_3("echo hi")})
    assert answer["result"]["kind"] == "task"


async def test_a_1_0_method_without_the_header_is_still_version_not_supported(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        missing = await call_v0_3(client, "SendMessage", {"message": user_message("echo")})
        said = await call_v0_3(
            client,
            "SendMessage",
            {"message": user_message("echo")},
            headers={"A2A-Version": "0.3"},
        )
        rest = await client.post("/rest/message:send", json={"message": user_message("echo")})
    assert missing["error"]["code"] == said["error"]["code"] == -32009
    assert rest.status_code == 400


async def test_a_rest_path_under_v1_is_0_3_and_answers_in_protojson(tmp_path: Path) -> None:
    message = {"messageId": "m-1", "role": "ROLE_USER", "content": [{"text": "echo hi"}]}
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        response = await client.post("/rest/v1/message:send", json={"request": message})
    assert response.status_code == 200
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hi"}]


async def test_a_0_3_error_has_its_reason_in_data(tmp_path: Path) -> None:
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        answer = await call_v0_3(client, "tasks/get", {"id": "no-such-task"})
        rest = await client.get("/rest/v1/tasks/no-such-task")
    assert answer["error"]["code"] == -32001
    assert answer["error"]["data"]["reason"] == "TASK_NOT_FOUND"
    assert rest.status_code == 404 and rest.json()["code"] == -32001


async def test_a_boolean_history_length_is_invalid_params_on_both_0_3_bindings(
    tmp_path: Path,
) -> None:
    send = {"message": message_v0_3("echo hi"), "configuration": {"historyLength": True}}
    proto_message = {"messageId": "m-1", "role": "ROLE_USER", "content": [{"text": "echo hi"}]}
    proto_send = {"request": proto_message, "configuration": {"historyLength": True}}
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        answers = [
            await call_v0_3(client, "message/send", send),
            await call_v0_3(client, "tasks/get", {"id": "x", "historyLength": True}),
        ]
        rests = [
            await client.post("/rest/v1/message:send", json=proto_send),
            await client.get("/rest/v1/tasks/x", params={"historyLength": "true"}),
        ]
    for answer in answers:
        assert answer["error"]["code"] == -32602
        assert "historyLength: " in answer["error"]["message"]
    for rest in rests:
        assert rest.status_code == 400
        assert "historyLength: " in rest.json()["message"]


# --- the switch -------------------------------------------------------------------------


async def test_an_agent_without_0_3_knows_no_0_3_names_and_has_no_0_3_card(
    tmp_path: Path,
) -> None:
    async with (
        live_server(tmp_path, serve_scripted(compat_v0_3=False)) as server,
        client_v0_3(server) as client,
    ):
        with_header = await server.jsonrpc("message/send", {"message": message_v0_3("echo")})
        without = await call_v0_3(client, "message/send", {"message": message_v0_3("echo")})
        rest = await client.post("/rest/v1/message:send", json={}, headers={"A2A-Version": "1.0"})
        card = await client.get("/.well-known/agent.json")
    assert with_header["error"]["code"] == -32601
    assert without["error"]["code"] == -32009
    assert rest.status_code == 404
    assert card.status_code == 404


V0_3_KEYS = {"protocolVersion", "url", "preferredTransport", "additionalInterfaces"}


async def test_the_1_0_card_holds_no_0_3_keys(tmp_path: Path) -> None:
    # The 1.0 schema allows no other keys (the conformance kit's CARD-STRUCT-001).
    async with live_server(tmp_path, serve_scripted()) as server:
        card = (await server.client.get("/.well-known/agent-card.json")).json()
    assert not V0_3_KEYS & set(card)


async def test_the_0_3_card_keeps_every_1_0_field_and_adds_the_0_3_ones(tmp_path: Path) -> None:
    async with live_server(tmp_path, serve_scripted()) as server:
        one_zero = (await server.client.get("/.well-known/agent-card.json")).json()
        card = (await server.client.get("/.well-known/agent.json")).json()
    assert {key: card[key] for key in one_zero} == one_zero
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"] == f"{server.url}/jsonrpc" and card["preferredTransport"] == "JSONRPC"
    rest = {"url": f"{server.url}/rest", "transport": "HTTP+JSON"}
    assert card["additionalInterfaces"][1] == rest


# --- streams ----------------------------------------------------------------------------


async def test_a_0_3_streaming_method_answers_its_error_inside_the_event_stream(
    tmp_path: Path,
) -> None:
    # As a2a-sdk 0.3's server does: its client reads nothing but SSE there.
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/resubscribe", "params": {"id": "none"}}
        response = await client.post("/jsonrpc", json=body)
        one_zero = await server.jsonrpc("SubscribeToTask", {"id": "none"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    [frame] = [line for line in response.text.splitlines() if line]
    answer = json.loads(frame.removeprefix("data: "))
    assert (answer["id"], answer["error"]["code"]) == (7, -32001)
    assert one_zero["error"]["code"] == -32001  # 1.0 keeps its plain JSON error


async def test_every_0_3_frame_is_one_data_line_even_when_the_text_has_newlines(
    tmp_path: Path,
) -> None:
    # @a2a-js/sdk 0.3 keeps only the last data: line of an event.
    params = {"message": message_v0_3("echo first line\nsecond line")}
    body = {"jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": params}
    async with (
        live_server(tmp_path, serve_scripted()) as server,
        client_v0_3(server) as client,
        client.stream("POST", "/jsonrpc", json=body) as response,
    ):
        raw = (await response.aread()).decode()
    events = [event for event in raw.split("\n\n") if event.strip()]
    data_lines = [
        [line for line in event.split("\n") if line.startswith("data:")] for event in events
    ]
    assert len(events) == 4 and all(len(lines) == 1 for lines in data_lines)
    results = [json.loads(lines[0][5:])["result"] for lines in data_lines]
    assert [r["kind"] for r in results] == [
        "task",
        "status-update",
        "artifact-update",
        "status-update",
    ]
    assert results[2]["artifact"]["parts"][0]["text"] == "first line\nsecond line"
    assert results[-1]["final"] is True


# --- webhooks ---------------------------------------------------------------------------


async def test_webhooks_to_a_config_set_over_0_3_carry_the_0_3_task(tmp_path: Path) -> None:
    async with (
        push_server(tmp_path, ALLOW_RECEIVER) as server,
        webhook_receiver() as hook,
        client_v0_3(server) as client,
    ):
        asked = await call_v0_3(client, "message/send", {"message": message_v0_3("ask")})
        task = asked["result"]
        config = {"id": "hook", "url": hook.url, "token": TOKEN}
        params = {"taskId": task["id"], "pushNotificationConfig": config}
        assert "result" in await call_v0_3(client, "tasks/pushNotificationConfig/set", params)
        follow_up = message_v0_3("Ada", taskId=task["id"], contextId=task["contextId"])
        await call_v0_3(client, "message/send", {"message": follow_up})
        with trio.fail_after(SETTLE_TIMEOUT):
            received = await hook.wait_answered(3)
    bodies = [request.json() for request in received]
    # The task as it stands after each event: working, its artifact added, completed.
    assert [(b["kind"], b["id"], b["status"]["state"]) for b in bodies] == [
        ("task", task["id"], "working"),
        ("task", task["id"], "working"),
        ("task", task["id"], "completed"),
    ]
    assert [len(b.get("artifacts", [])) for b in bodies] == [0, 1, 1]
    assert {"kind": "text", "text": "Ada"} in bodies[-1]["history"][-2]["parts"]
    assert all(request.headers["x-a2a-notification-token"] == TOKEN for request in received)


async def test_a_config_made_over_0_3_rest_also_gets_the_0_3_json_task(tmp_path: Path) -> None:
    # Both 0.3 SDKs' servers POST the task's JSON-schema form, whichever binding
    # made the config; the proto form lives only on their HTTP+JSON requests.
    async with (
        push_server(tmp_path, ALLOW_RECEIVER) as server,
        webhook_receiver() as hook,
        client_v0_3(server) as client,
    ):
        task = (await call_v0_3(client, "message/send", {"message": message_v0_3("ask")}))["result"]
        created = await client.post(
            f"/rest/v1/tasks/{task['id']}/pushNotificationConfigs",
            json={
                "name": f"tasks/{task['id']}/pushNotificationConfigs/hook",
                "pushNotificationConfig": {"id": "hook", "url": hook.url},
            },
        )
        assert created.status_code == 200, created.text
        follow_up = message_v0_3("Ada", taskId=task["id"], contextId=task["contextId"])
        await call_v0_3(client, "message/send", {"message": follow_up})
        with trio.fail_after(SETTLE_TIMEOUT):
            received = await hook.wait_answered(3)
    assert [request.json()["kind"] for request in received] == ["task", "task", "task"]
    assert received[-1].json()["status"]["state"] == "completed"


async def test_a_0_3_config_set_without_an_id_is_read_back_as_default(tmp_path: Path) -> None:
    # The 0.3 line of the conformance kit sets a config without an id and
    # reads it with pushNotificationConfigId "default" (its helper's default).
    # The task waits for input: nothing is delivered to the address.
    hook = "http://127.0.0.1:9/hook"
    async with push_server(tmp_path, ALLOW_RECEIVER) as server, client_v0_3(server) as client:
        task = (await call_v0_3(client, "message/send", {"message": message_v0_3("ask")}))["result"]
        params = {"taskId": task["id"], "pushNotificationConfig": {"url": hook}}
        made = await call_v0_3(client, "tasks/pushNotificationConfig/set", params)
        named = {"id": task["id"], "pushNotificationConfigId": "default"}
        by_id = await call_v0_3(client, "tasks/pushNotificationConfig/get", named)
        bare = await call_v0_3(client, "tasks/pushNotificationConfig/get", {"id": task["id"]})
        rest = await client.post(
            f"/rest/v1/tasks/{task['id']}/pushNotificationConfigs",
            json={"pushNotificationConfig": {"url": hook + "?rest"}},
        )
        rest_read = await client.get(f"/rest/v1/tasks/{task['id']}/pushNotificationConfigs/default")
    assert made["result"]["pushNotificationConfig"]["id"] == "default"
    assert by_id["result"] == bare["result"] == made["result"]
    assert rest.status_code == 200, rest.text
    assert rest_read.json()["pushNotificationConfig"]["url"] == hook + "?rest"


async def test_a_0_3_and_a_1_0_config_on_one_task_each_get_their_own_body(
    tmp_path: Path,
) -> None:
    async with (
        push_server(tmp_path, ALLOW_RECEIVER) as server,
        webhook_receiver() as hook,
        client_v0_3(server) as client,
    ):
        old = {"id": "old", "url": hook.url_for("/v0_3")}
        params = {"message": message_v0_3("ask"), "configuration": {"pushNotificationConfig": old}}
        task = (await call_v0_3(client, "message/send", params))["result"]
        await rpc(
            server,
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], **webhook(hook.url_for("/v1_0"), config_id="new")},
        )
        follow_up = user_message("Ada", taskId=task["id"], contextId=task["contextId"])
        await rpc(server, "SendMessage", {"message": follow_up})
        deliveries = await settled(server, task["id"], 9)
        assert all(d.state == "delivered" for d in deliveries)
        with trio.fail_after(SETTLE_TIMEOUT):
            old_bodies = [r.json() for r in await hook.wait_answered(6, path="/v0_3")]
            new_bodies = [r.json() for r in await hook.wait_answered(3, path="/v1_0")]
    # The 0.3 config came with the first message: it saw every event, as the task.
    assert {b["kind"] for b in old_bodies} == {"task"}
    assert [b["status"]["state"] for b in old_bodies] == [
        "submitted",
        "working",
        "input-required",
        "working",
        "working",
        "completed",
    ]
    # The 1.0 one, made later, saw the events of the follow-up, as recorded.
    assert [next(iter(b)) for b in new_bodies] == ["statusUpdate", "artifactUpdate", "statusUpdate"]
    assert new_bodies[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


# --- the stored protocol ----------------------------------------------------------------


async def test_push_configs_of_an_older_database_are_kept_as_1_0_configs(tmp_path: Path) -> None:
    # A database as the previous schema left it: three migrations, one config.
    database = tmp_path / "old.db"
    db = sqlite_utils.Database(database)
    for migration in MIGRATIONS[:3]:
        migration(db)
    db.execute("PRAGMA user_version = 3")
    db.execute(
        "INSERT INTO push_configs (agent, task_id, id, owner, url, created_at)"
        " VALUES ('a', 't', 'c', 'o', 'https://hooks.example/x', '0')"
    )
    db.close()
    store = SqliteStore(database)
    await store.open()
    try:
        [config] = await store.list_push_configs("a", "t", owner=None)
        [(protocol,)] = store.db.execute("SELECT protocol FROM push_configs").fetchall()
        version = store.db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        await store.aclose()
    assert config == TaskPushNotificationConfig(id="c", task_id="t", url="https://hooks.example/x")
    assert protocol == "1.0" and version == SCHEMA_VERSION


SECURED_CARD = {
    "securitySchemes": {
        "oauth": {
            "oauth2SecurityScheme": {
                "flows": {
                    "deviceCode": {
                        "deviceAuthorizationUrl": "https://login.example/device",
                        "tokenUrl": "https://login.example/token",
                        "scopes": {"read": "Read"},
                    },
                }
            }
        },
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
    },
    "securityRequirements": [{"schemes": {"oauth": {"list": ["read"]}}}],
}


def test_a2a_sdk_1_x_reads_the_1_0_card_from_the_card_served_for_both() -> None:
    # a2a-sdk 1.x rebuilds a scheme from its 0.3 members when it sees `type`, and
    # drops url, security, ...: what it ends with must be the 1.0 card itself.
    from a2a.client.card_resolver import parse_agent_card
    from google.protobuf.json_format import MessageToDict

    card = AgentCard.model_validate(make_card().to_wire() | SECURED_CARD)
    served = card_for_both(card)
    assert served["securitySchemes"]["oauth"]["type"] == "oauth2"  # the 0.3 keys are there
    assert MessageToDict(parse_agent_card(served)) == MessageToDict(
        parse_agent_card(card.to_wire())
    )


# --- hostile input on the 0.3 paths ------------------------------------------------------


async def test_a_lone_surrogate_on_0_3_rest_is_refused_naming_the_field(tmp_path: Path) -> None:
    body = b'{"request":{"messageId":"m-1","role":"ROLE_USER","content":[{"text":"echo \\ud800"}]}}'
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        response = await client.post(
            "/rest/v1/message:send", content=body, headers={"Content-Type": "application/json"}
        )
        listed = await server.jsonrpc("ListTasks", {})
    assert response.status_code == 400
    assert "request.content.0.text" in response.text
    assert listed["result"]["tasks"] == []


async def test_a_0_3_data_part_keeps_an_object_that_merely_carries_the_compat_flag(
    tmp_path: Path,
) -> None:
    part = {"kind": "data", "data": {"x": 5}, "metadata": {"data_part_compat": True}}
    message = message_v0_3("unused") | {"parts": [part]}
    async with live_server(tmp_path, serve_scripted()) as server, client_v0_3(server) as client:
        answer = await call_v0_3(client, "message/send", {"message": message})
        task = await server.jsonrpc("GetTask", {"id": answer["result"]["id"]})
    assert task["result"]["history"][0]["parts"][0]["data"] == {"x": 5}

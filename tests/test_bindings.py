"""Every operation over both bindings of a live server, and the same answers on each."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from a2a_trio import A2AApp
from a2a_trio.protocol import AgentCapabilities, AgentExtension
from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message

BINDINGS = ["jsonrpc", "rest"]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    def mount(app: A2AApp) -> None:
        app.mount(
            "",
            card=make_card(
                capabilities=AgentCapabilities(
                    streaming=True, push_notifications=True, extended_agent_card=True
                )
            ),
            executor=ScriptedExecutor(),
            extended_card=make_card(name="Test Agent (extended)"),
        )

    # Webhook URLs name example.com, which does not resolve here: allow-list it.
    settings = PushSettings(allowed_hosts=("example.com",))
    async with live_server(tmp_path, mount, push_settings=settings) as live:
        yield live


class Binding:
    """Calls one operation the way a given binding carries it."""

    def __init__(self, server: LiveServer, name: str) -> None:
        self.server = server
        self.name = name

    async def call(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(status, result-or-error body) where status is the A2A outcome: 0 = success."""
        if self.name == "jsonrpc":
            body = await self.server.jsonrpc(method, params)
            if "error" in body:
                return body["error"]["code"], body["error"]
            return 0, body["result"]
        response = await self._rest(method, params)
        document = response.json() if response.content else {}
        if response.status_code >= 400:
            return response.status_code, document["error"]
        return 0, document

    async def _rest(self, method: str, params: dict[str, Any]) -> Any:
        server = self.server
        match method:
            case "SendMessage":
                return await server.rest("POST", "/message:send", json=params)
            case "GetTask":
                query = {k: v for k, v in params.items() if k != "id"}
                return await server.rest("GET", f"/tasks/{params['id']}", params=query)
            case "ListTasks":
                return await server.rest("GET", "/tasks", params=params)
            case "CancelTask":
                return await server.rest("POST", f"/tasks/{params['id']}:cancel")
            case "CreateTaskPushNotificationConfig":
                body = {k: v for k, v in params.items() if k != "taskId"}
                return await server.rest(
                    "POST", f"/tasks/{params['taskId']}/pushNotificationConfigs", json=body
                )
            case "GetTaskPushNotificationConfig":
                return await server.rest(
                    "GET", f"/tasks/{params['taskId']}/pushNotificationConfigs/{params['id']}"
                )
            case "ListTaskPushNotificationConfigs":
                return await server.rest(
                    "GET", f"/tasks/{params['taskId']}/pushNotificationConfigs"
                )
            case "DeleteTaskPushNotificationConfig":
                return await server.rest(
                    "DELETE", f"/tasks/{params['taskId']}/pushNotificationConfigs/{params['id']}"
                )
            case "GetExtendedAgentCard":
                return await server.rest("GET", "/extendedAgentCard")
        raise AssertionError(method)

    async def stream(self, method: str, params: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
        """The StreamResponses of a streaming call, unwrapped from JSON-RPC where needed."""
        server = self.server
        if self.name == "jsonrpc":
            frames = await server.sse(
                "POST",
                "/jsonrpc",
                json={"jsonrpc": "2.0", "id": "s", "method": method, "params": params},
                **kw,
            )
            assert all(frame["jsonrpc"] == "2.0" and frame["id"] == "s" for frame in frames)
            return [frame["result"] for frame in frames]
        if method == "SendStreamingMessage":
            return await server.sse("POST", "/rest/message:stream", json=params, **kw)
        return await server.sse("POST", f"/rest/tasks/{params['id']}:subscribe", **kw)

    async def send(self, text: str, **fields: Any) -> dict[str, Any]:
        status, result = await self.call("SendMessage", {"message": user_message(text, **fields)})
        assert status == 0, result
        return result


def state_of(event: dict[str, Any]) -> str | None:
    if "task" in event:
        return str(event["task"]["status"]["state"])
    if "statusUpdate" in event:
        return str(event["statusUpdate"]["status"]["state"])
    return None


@pytest.mark.parametrize("binding", BINDINGS)
async def test_send_get_and_list_agree(server: LiveServer, binding: str) -> None:
    b = Binding(server, binding)
    task = (await b.send("echo same answer"))["task"]
    status, fetched = await b.call("GetTask", {"id": task["id"]})
    assert status == 0
    assert fetched == task
    status, listing = await b.call("ListTasks", {"includeArtifacts": True, "historyLength": 10})
    assert status == 0
    assert listing["tasks"] == [task]
    assert listing["nextPageToken"] == ""
    assert listing["totalSize"] == 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_list_omits_artifacts_unless_asked(server: LiveServer, binding: str) -> None:
    b = Binding(server, binding)
    await b.send("echo with artifact")
    _, listing = await b.call("ListTasks", {})
    assert "artifacts" not in listing["tasks"][0]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_list_omits_history_unless_asked(server: LiveServer, binding: str) -> None:
    b = Binding(server, binding)
    asked = (await b.send("ask"))["task"]
    assert len(asked["history"]) == 2
    _, listing = await b.call("ListTasks", {})
    assert "history" not in listing["tasks"][0]
    _, listing = await b.call("ListTasks", {"historyLength": 1})
    assert listing["tasks"][0]["history"] == asked["history"][-1:]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_list_filters_by_context_and_state_and_pages_newest_first(
    server: LiveServer, binding: str
) -> None:
    b = Binding(server, binding)
    ids = [(await b.send(f"echo {n}", contextId="ctx-a"))["task"]["id"] for n in range(3)]
    asked = (await b.send("ask", contextId="ctx-b"))["task"]["id"]
    _, waiting = await b.call("ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED"})
    assert [t["id"] for t in waiting["tasks"]] == [asked]
    seen: list[str] = []
    token = None
    while True:
        params: dict[str, Any] = {"contextId": "ctx-a", "pageSize": 2}
        if token:
            params["pageToken"] = token
        _, page = await b.call("ListTasks", params)
        assert page["totalSize"] == 3
        seen += [t["id"] for t in page["tasks"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert seen == list(reversed(ids))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_history_length_trims_to_the_most_recent(server: LiveServer, binding: str) -> None:
    b = Binding(server, binding)
    asked = (await b.send("ask"))["task"]
    await b.send("Ada", taskId=asked["id"])
    _, none = await b.call("GetTask", {"id": asked["id"], "historyLength": 0})
    assert "history" not in none
    _, last = await b.call("GetTask", {"id": asked["id"], "historyLength": 1})
    assert [m["parts"][0]["text"] for m in last["history"]] == ["done"]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_cancel_ends_a_waiting_task_canceled(server: LiveServer, binding: str) -> None:
    b = Binding(server, binding)
    asked = (await b.send("ask"))["task"]
    status, canceled = await b.call("CancelTask", {"id": asked["id"]})
    assert status == 0
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    status, _ = await b.call("CancelTask", {"id": asked["id"]})
    assert status == (-32002 if binding == "jsonrpc" else 400)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stream_relays_the_task_then_each_update_and_closes(
    server: LiveServer, binding: str
) -> None:
    b = Binding(server, binding)
    events = await b.stream("SendStreamingMessage", {"message": user_message("chunks")})
    assert [next(iter(e)) for e in events] == [
        "task",
        "statusUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "artifactUpdate",
        "statusUpdate",
    ]
    assert state_of(events[-1]) == "TASK_STATE_COMPLETED"
    task_id = events[0]["task"]["id"]
    _, task = await b.call("GetTask", {"id": task_id})
    assert task["artifacts"][0]["parts"] == [{"text": "one "}, {"text": "two "}, {"text": "three"}]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stream_of_a_message_answer_is_that_one_message(
    server: LiveServer, binding: str
) -> None:
    b = Binding(server, binding)
    events = await b.stream("SendStreamingMessage", {"message": user_message("reply hi")})
    assert len(events) == 1
    assert events[0]["message"]["parts"] == [{"text": "you said: hi"}]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_subscribe_follows_a_waiting_task_to_its_end(
    server: LiveServer, binding: str
) -> None:
    b = Binding(server, binding)
    asked = (await b.send("ask"))["task"]
    events: list[dict[str, Any]] = []

    async def subscribe() -> None:
        events.extend(await b.stream("SubscribeToTask", {"id": asked["id"]}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(subscribe)
        with trio.fail_after(10):  # the subscription is open and waiting
            while server.app.open_streams == 0:  # noqa: ASYNC110  (polled: nothing tells)
                await trio.sleep(0.01)
        await b.send("Ada", taskId=asked["id"])
    assert events[0]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert state_of(events[-1]) == "TASK_STATE_COMPLETED"
    assert [state_of(e) for e in events if state_of(e)] == [
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_subscribe_to_a_finished_task_is_an_error_not_a_stream(
    server: LiveServer, binding: str
) -> None:
    b = Binding(server, binding)
    task = (await b.send("echo"))["task"]
    if binding == "jsonrpc":
        body = await server.jsonrpc("SubscribeToTask", {"id": task["id"]})
        assert body["error"]["code"] == -32004
    else:
        response = await server.rest("POST", f"/tasks/{task['id']}:subscribe")
        assert response.status_code == 400
        assert response.headers["content-type"] == "application/json"


async def test_sse_frames_carry_the_log_sequence_and_resume_after_last_event_id(
    server: LiveServer,
) -> None:
    b = Binding(server, "rest")
    task = (await b.send("echo resume"))["task"]
    ids = []
    async with server.client.stream(
        "POST", f"/rest/tasks/{task['id']}:subscribe", headers={"Last-Event-ID": "2"}
    ) as response:
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                ids.append(int(line[3:]))
    assert ids == [3, 4]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_push_config_crud_is_scoped_to_the_task(server: LiveServer, binding: str) -> None:
    b = Binding(server, binding)
    task = (await b.send("echo"))["task"]
    config = {
        "taskId": task["id"],
        "id": "hook-1",
        "url": "https://example.com/hook",
        "token": "secret-token",
        "authentication": {"scheme": "Bearer", "credentials": "secret-credentials"},
    }
    status, created = await b.call("CreateTaskPushNotificationConfig", config)
    assert status == 0
    assert created == config
    status, fetched = await b.call(
        "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook-1"}
    )
    assert (status, fetched) == (0, config)
    _, listing = await b.call("ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert listing["configs"] == [config]
    for _ in range(2):  # deleting is idempotent
        status, deleted = await b.call(
            "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook-1"}
        )
        assert (status, deleted) == (0, {})
    status, _ = await b.call(
        "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook-1"}
    )
    assert status == (-32001 if binding == "jsonrpc" else 404)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_push_config_sent_with_the_message_is_registered_on_the_new_task(
    server: LiveServer, binding: str
) -> None:
    b = Binding(server, binding)
    status, result = await b.call(
        "SendMessage",
        {
            "message": user_message("echo"),
            "configuration": {
                "taskPushNotificationConfig": {"id": "with-message", "url": "https://example.com/h"}
            },
        },
    )
    assert status == 0
    task_id = result["task"]["id"]
    _, listing = await b.call("ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert [c["id"] for c in listing["configs"]] == ["with-message"]
    assert listing["configs"][0]["taskId"] == task_id


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_extended_card_is_served_with_interfaces(
    server: LiveServer, binding: str
) -> None:
    b = Binding(server, binding)
    status, card = await b.call("GetExtendedAgentCard", {})
    assert status == 0
    assert card["name"] == "Test Agent (extended)"
    assert card["supportedInterfaces"][0]["protocolBinding"] == "JSONRPC"


async def test_card_has_cache_validators_and_answers_304(server: LiveServer) -> None:
    response = await server.client.get("/.well-known/agent-card.json")
    assert "max-age=" in response.headers["cache-control"]
    assert response.headers["last-modified"].endswith("GMT")
    etag = response.headers["etag"]
    again = await server.client.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    # GET is answered before Quart's routing, HEAD by Quart: the same headers.
    head = await server.client.head("/.well-known/agent-card.json")
    assert head.status_code == 200 and head.content == b""
    for name in ("etag", "cache-control", "last-modified", "content-type"):
        assert head.headers[name] == response.headers[name]
    assert response.headers["access-control-allow-origin"] == "*"
    other = await server.client.post("/.well-known/agent-card.json", content=b"{}")
    assert other.status_code == 405 and other.headers["content-type"] == "application/json"


async def test_card_routes_need_no_version_header(server: LiveServer) -> None:
    async with __import__("httpx").AsyncClient(base_url=server.url) as bare:
        response = await bare.get("/.well-known/agent-card.json")
        assert response.status_code == 200
        assert json.loads(response.content)["name"] == "Test Agent"


async def test_jsonrpc_answers_on_the_url_with_a_trailing_slash(server: LiveServer) -> None:
    response = await server.client.post(
        "/jsonrpc/",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
    )
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32001


async def test_capabilities_gate_streaming_push_and_extended_card(tmp_path: Path) -> None:
    def mount(app: A2AApp) -> None:
        app.mount(
            "",
            card=make_card(capabilities=AgentCapabilities(streaming=False)),
            executor=ScriptedExecutor(),
        )

    async with live_server(tmp_path, mount) as server:
        body = await server.jsonrpc("SendStreamingMessage", {"message": user_message("echo")})
        assert body["error"]["code"] == -32004
        body = await server.jsonrpc(
            "CreateTaskPushNotificationConfig", {"task_id": "t", "url": "https://example.com"}
        )
        assert body["error"]["code"] == -32003
        body = await server.jsonrpc("GetExtendedAgentCard", {})
        assert body["error"]["code"] == -32004
        response = await server.rest("POST", "/message:stream", json={"message": user_message("x")})
        assert response.status_code == 400


async def test_a_required_extension_must_be_requested(tmp_path: Path) -> None:
    uri = "urn:example:required"

    def mount(app: A2AApp) -> None:
        app.mount(
            "",
            card=make_card(
                capabilities=AgentCapabilities(
                    streaming=True, extensions=[AgentExtension(uri=uri, required=True)]
                )
            ),
            executor=ScriptedExecutor(),
        )

    async with live_server(tmp_path, mount) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("echo")})
        assert body["error"]["code"] == -32008
        body = await server.jsonrpc(
            "SendMessage",
            {"message": user_message("echo")},
            headers={"A2A-Extensions": f"urn:other, {uri}"},
        )
        assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_agents_mounted_under_prefixes_keep_their_tasks_apart(tmp_path: Path) -> None:
    def mount(app: A2AApp) -> None:
        app.mount("/one", card=make_card(name="One"), executor=ScriptedExecutor(), name="one")
        app.mount("/two", card=make_card(name="Two"), executor=ScriptedExecutor(), name="two")

    async with live_server(tmp_path, mount) as server:
        root = (await server.client.get("/.well-known/agent-card.json")).json()
        assert root["name"] == "One"
        two = (await server.client.get("/two/.well-known/agent-card.json")).json()
        assert two["supportedInterfaces"][0]["url"] == f"{server.url}/two/jsonrpc"
        body = await server.jsonrpc("SendMessage", {"message": user_message("echo")}, prefix="/one")
        task_id = body["result"]["task"]["id"]
        other = await server.jsonrpc("GetTask", {"id": task_id}, prefix="/two")
        assert other["error"]["code"] == -32001
        assert server.app.url_map  # card route names carry the agent name
        endpoints = {rule.endpoint for rule in server.app.url_map.iter_rules()}
        assert {"a2a.one.well-known", "a2a.one.card", "a2a.two.card"} <= endpoints
        assert "a2a.two.well-known" not in endpoints
        rest = await server.rest("GET", f"/tasks/{task_id}", prefix="/two")
        assert rest.status_code == 404


def test_a_second_claim_on_the_root_card_is_an_error(tmp_path: Path) -> None:
    app = A2AApp(database=tmp_path / "a2a.db")
    app.mount("/one", card=make_card(), executor=ScriptedExecutor(), name="one", well_known=True)
    with pytest.raises(ValueError, match="only one agent may own the root card"):
        app.mount(
            "/two", card=make_card(), executor=ScriptedExecutor(), name="two", well_known=True
        )

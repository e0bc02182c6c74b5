"""The default flow over a real socket: card, send, stream, get, list on both bindings."""

from __future__ import annotations

import gc
from pathlib import Path

from a2a_trio import A2AApp, ServerSettings
from a2a_trio.server.databases import GC_THRESHOLD

from .agents import ScriptedExecutor
from .conftest import live_server, make_card, user_message


def mount_scripted(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())


async def test_card_lists_the_three_bindings_of_the_mount(tmp_path: Path) -> None:
    async with live_server(tmp_path, mount_scripted) as server:
        response = await server.client.get("/.well-known/agent-card.json")
        assert response.status_code == 200
        interfaces = response.json()["supportedInterfaces"]
        assert [(i["protocolBinding"], i["url"]) for i in interfaces] == [
            ("JSONRPC", f"{server.url}/jsonrpc"),
            ("HTTP+JSON", f"{server.url}/rest"),
            ("GRPC", server.url.removeprefix("http://")),
        ]
        assert "tenant" not in interfaces[2]  # the root agent: an empty tenant


async def test_card_of_an_agent_without_grpc_lists_the_json_bindings_only(
    tmp_path: Path,
) -> None:
    def mount(app: A2AApp) -> None:
        app.mount("/quiet", card=make_card(), executor=ScriptedExecutor(), grpc=False)

    async with live_server(tmp_path, mount) as server:
        response = await server.client.get("/quiet/.well-known/agent-card.json")
        interfaces = response.json()["supportedInterfaces"]
        assert [i["protocolBinding"] for i in interfaces] == ["JSONRPC", "HTTP+JSON"]


async def test_send_message_blocks_until_the_task_completes_on_jsonrpc(tmp_path: Path) -> None:
    async with live_server(tmp_path, mount_scripted) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("echo hi")})
        task = body["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": "hi"}]


async def test_send_message_blocks_until_the_task_completes_on_rest(tmp_path: Path) -> None:
    async with live_server(tmp_path, mount_scripted) as server:
        response = await server.rest(
            "POST", "/message:send", json={"message": user_message("echo hi")}
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        task = response.json()["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_started_server_freezes_its_startup_heap_unless_told_not_to(
    tmp_path: Path,
) -> None:
    # A full collection would otherwise walk every module and card each time.
    gc.unfreeze()
    async with live_server(tmp_path, mount_scripted):
        assert gc.get_freeze_count() > 0
    gc.unfreeze()
    async with live_server(
        tmp_path, mount_scripted, settings=ServerSettings(freeze_gc=False)
    ) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("echo hi")})
        assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert gc.get_freeze_count() == 0


async def test_a_started_server_collects_its_youngest_objects_less_often(
    tmp_path: Path,
) -> None:
    # Every 700 allocations, a collection walked (and promoted) every request in flight.
    before = gc.get_threshold()
    try:
        gc.unfreeze()
        gc.set_threshold(700, 10, 10)
        async with live_server(tmp_path, mount_scripted):
            assert gc.get_threshold() == (GC_THRESHOLD, 10, 10)
        gc.unfreeze()
        gc.set_threshold(500, 10, 10)  # a program's own choice stays
        async with live_server(tmp_path, mount_scripted):
            assert gc.get_threshold() == (500, 10, 10)
    finally:
        gc.set_threshold(*before)

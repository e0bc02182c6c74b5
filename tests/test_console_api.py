"""The console's JSON endpoints: paged tasks, a task's timeline, deliveries, redrive, cancel."""

from __future__ import annotations

from pathlib import Path

import trio

from a2a_trio.protocol import TaskNotCancelableError

from .conftest import user_message
from .console_helpers import TOKEN, console_server

OPERATOR = {"Authorization": f"Bearer {TOKEN}"}


async def test_tasks_page_newest_first_across_owners_and_filter_by_state(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        sent = []
        for number in range(7):
            reply = await server.jsonrpc("SendMessage", {"message": user_message(f"echo {number}")})
            sent.append(reply["result"]["task"]["id"])
        rejected = await server.jsonrpc("SendMessage", {"message": user_message("reject")})
        seen: list[str] = []
        token = ""
        while True:
            page = await server.client.get(
                "/_a2a/api/tasks", params={"pageSize": 3, "pageToken": token}, headers=OPERATOR
            )
            assert page.status_code == 200
            body = page.json()
            assert len(body["tasks"]) <= 3
            seen += [task["id"] for task in body["tasks"]]
            token = body["nextPageToken"]
            if not token:
                break
        assert seen == [rejected["result"]["task"]["id"], *reversed(sent)]
        only = await server.client.get(
            "/_a2a/api/tasks", params={"state": "rejected", "agent": "scripted"}, headers=OPERATOR
        )
        assert [t["state"] for t in only.json()["tasks"]] == ["TASK_STATE_REJECTED"]
        bad = await server.client.get("/_a2a/api/tasks", params={"state": "x"}, headers=OPERATOR)
        assert bad.status_code == 400


async def test_a_tasks_timeline_holds_every_event_with_its_text(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        reply = await server.jsonrpc("SendMessage", {"message": user_message("ask")})
        task_id = reply["result"]["task"]["id"]
        await server.jsonrpc("SendMessage", {"message": user_message("Ada", taskId=task_id)})
        task = await server.client.get(f"/_a2a/api/tasks/scripted/{task_id}", headers=OPERATOR)
        body = task.json()
    assert body["state"] == "TASK_STATE_COMPLETED"
    kinds = [entry["kind"] for entry in body["timeline"]]
    assert kinds[0] == "task" and "message" in kinds and kinds[-1] == "status"
    assert [entry["seq"] for entry in body["timeline"]] == list(range(1, len(kinds) + 1))
    message = next(e for e in body["timeline"] if e["kind"] == "message")
    assert message["event"]["parts"] == [{"text": "Ada"}]
    assert body["deliveries"] == []


async def test_unknown_tasks_and_deliveries_are_not_found(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        client = server.client
        assert (
            await client.get("/_a2a/api/tasks/scripted/nope", headers=OPERATOR)
        ).status_code == 404
        assert (await client.get("/_a2a/api/tasks/other/nope", headers=OPERATOR)).status_code == 404
        cancel = await client.post("/_a2a/api/tasks/scripted/nope/cancel", headers=OPERATOR)
        assert cancel.status_code == 404
        redrive = await client.post("/_a2a/api/deliveries/99/redrive", headers=OPERATOR)
        assert redrive.status_code == 404


async def test_cancel_ends_a_running_task_and_refuses_a_finished_one(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, executor):
        reply = await server.jsonrpc(
            "SendMessage",
            {"message": user_message("hold"), "configuration": {"returnImmediately": True}},
        )
        task_id = reply["result"]["task"]["id"]
        with trio.fail_after(5):
            await executor.gate.reached.wait()
        cancel = f"/_a2a/api/tasks/scripted/{task_id}/cancel"
        first = await server.client.post(cancel, headers=OPERATOR)
        assert first.json() == {"id": task_id, "state": "TASK_STATE_CANCELED"}
        again = await server.client.post(cancel, headers=OPERATOR)
        assert again.status_code == TaskNotCancelableError.spec.http_status
        assert again.json()["error"]["status"] == "TASK_NOT_CANCELABLE"


async def test_counters_and_agents_answer(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        await server.jsonrpc("SendMessage", {"message": user_message("echo hi")})
        counters = (await server.client.get("/_a2a/api/counters", headers=OPERATOR)).json()
        agents = (await server.client.get("/_a2a/api/agents", headers=OPERATOR)).json()
        page = await server.client.get("/_a2a/console")
        script = await server.client.get("/_a2a/console/console.js")
        missing = await server.client.get("/_a2a/console/secret.py")
    assert counters["runningExecutions"] == 0 and counters["outboxBacklog"] == 0
    assert counters["feedSeq"] >= 5
    assert [a["name"] for a in agents["agents"]] == ["scripted"]
    assert agents["agents"][0]["card"]["name"] == "Test Agent"
    assert page.status_code == 200 and "<title>a2a-trio console</title>" in page.text
    assert script.headers["content-type"].startswith("text/javascript")
    assert missing.status_code == 404


async def test_counters_show_open_webhook_circuits_and_the_outbox_caps(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        gate = server.app.push.hosts
        for _ in range(gate.threshold):
            gate.unanswered(("https", "hook.example", 443))
        counters = (await server.client.get("/_a2a/api/counters", headers=OPERATOR)).json()
    [open_host] = counters["openWebhookHosts"]
    assert open_host["host"] == "https://hook.example:443"
    assert 0 < open_host["secondsLeft"] <= gate.cooldown
    assert counters["outboxCaps"] == {"perWebhook": 100, "perTask": 1000}

"""Task ownership: every operation is scoped to the caller who created the task.

Two principals, alice and bob, hold bearer tokens for the same agent. To bob,
alice's task does not exist: every operation answers exactly what it answers
for a task id that never existed (the same status, code, message and details;
only the id itself differs). Unauthenticated callers of a card that lets them
in share one owner of their own. Credentials sent in-band with a message reach
the executor and nothing else.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from a2a_trio import A2AApp, BearerAuthenticator, EventQueue, HostSettings, RequestContext
from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .callers import BEARER, anonymised, caller, secured_card
from .conftest import LiveServer, live_server, user_message
from .postgres import rows
from .test_bindings import BINDINGS, Binding

ALICE_TOKEN = "t-alice"
BOB_TOKEN = "t-bob"
HOOK = "https://example.com/hook"
ALICES_HOOK = "alices-hook"
NOT_FOUND = {"jsonrpc": -32001, "rest": 404}
#: Every test ends well within this; a stream that should have been refused
#: but was opened would otherwise wait for a task that never ends.
TIME_LIMIT = 15.0

#: Each operation that names a task, as bob would call it.
OPERATIONS = [
    "GetTask",
    "CancelTask",
    "SubscribeToTask",
    "SendMessage",
    "SendStreamingMessage",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
]

#: alice's task as bob finds it: finished, waiting for input, and running.
SCENARIOS = ["echo", "ask", "hold"]


class CredentialRecorder(ScriptedExecutor):
    """The scripted agent, noting the in-band credentials of every execution."""

    def __init__(self) -> None:
        super().__init__()
        self.credentials: list[Any] = []

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        self.credentials.append(context.credentials)
        await super().execute(context, queue)


@dataclass
class Parties:
    """A live agent, its executor, and a client for each principal."""

    server: LiveServer
    executor: CredentialRecorder
    alice: LiveServer
    bob: LiveServer
    #: A client presenting no credentials at all.
    anonymous: LiveServer


@asynccontextmanager
async def parties(tmp_path: Path, database: str, *, required: bool) -> AsyncIterator[Parties]:
    """The agent with a Bearer scheme, required or merely declared."""
    executor = CredentialRecorder()
    card = secured_card({"bearer": BEARER}, [{"bearer": []}] if required else [])

    def mount(app: A2AApp) -> None:
        app.mount(
            "",
            card=card,
            executor=executor,
            authenticators={
                "bearer": BearerAuthenticator(tokens={ALICE_TOKEN: "alice", BOB_TOKEN: "bob"})
            },
        )

    # Webhook URLs name example.com, which does not resolve here: allow-list it.
    push = PushSettings(allowed_hosts=("example.com",), max_attempts=1)
    host = HostSettings(shutdown_grace=1.0)
    async with (
        live_server(
            tmp_path, mount, push_settings=push, host_settings=host, database=database
        ) as server,
        caller(server, bearer=ALICE_TOKEN) as alice,
        caller(server, bearer=BOB_TOKEN) as bob,
        caller(server) as anonymous,
    ):
        try:
            yield Parties(server, executor, alice, bob, anonymous)
        finally:
            executor.gate.release.set()


@pytest.fixture
async def secured(tmp_path: Path, database: str) -> AsyncIterator[Parties]:
    """Every protocol request must present a valid bearer token."""
    async with parties(tmp_path, database, required=True) as p:
        yield p


@pytest.fixture
async def open_door(tmp_path: Path, database: str) -> AsyncIterator[Parties]:
    """The card declares the Bearer scheme but no requirement: anyone may call."""
    async with parties(tmp_path, database, required=False) as p:
        yield p


# --- helpers ---------------------------------------------------------------------------


def _jsonrpc_outcome(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if "error" in body:
        return body["error"]["code"], body["error"]
    return 0, body["result"]


def _rest_outcome(response: httpx.Response) -> tuple[int, dict[str, Any]]:
    document = response.json() if response.content else {}
    if response.status_code >= 400:
        return response.status_code, document["error"]
    return 0, document


async def attempt(
    who: LiveServer, binding: str, operation: str, task_id: str
) -> tuple[int, dict[str, Any]]:
    """``operation`` on ``task_id`` as ``who``: (0 or the error status, the body)."""
    b = Binding(who, binding)
    match operation:
        case "GetTask" | "CancelTask":
            return await b.call(operation, {"id": task_id})
        case "SendMessage":
            return await b.call("SendMessage", {"message": user_message("echo", taskId=task_id)})
        case "SubscribeToTask":
            if binding == "jsonrpc":
                return _jsonrpc_outcome(await who.jsonrpc(operation, {"id": task_id}))
            return _rest_outcome(await who.rest("POST", f"/tasks/{task_id}:subscribe"))
        case "SendStreamingMessage":
            params = {"message": user_message("echo", taskId=task_id)}
            if binding == "jsonrpc":
                return _jsonrpc_outcome(await who.jsonrpc(operation, params))
            return _rest_outcome(await who.rest("POST", "/message:stream", json=params))
        case "CreateTaskPushNotificationConfig":
            return await b.call(operation, {"taskId": task_id, "id": "bobs-hook", "url": HOOK})
        case "GetTaskPushNotificationConfig" | "DeleteTaskPushNotificationConfig":
            return await b.call(operation, {"taskId": task_id, "id": ALICES_HOOK})
        case "ListTaskPushNotificationConfigs":
            return await b.call(operation, {"taskId": task_id})
    raise AssertionError(operation)


async def start_task(p: Parties, owner: LiveServer, binding: str, scenario: str) -> dict[str, Any]:
    """A task of ``owner`` in ``scenario``, with a push config ``alices-hook`` on it."""
    b = Binding(owner, binding)
    if scenario == "hold":
        status, result = await b.call(
            "SendMessage",
            {"message": user_message("hold"), "configuration": {"returnImmediately": True}},
        )
        assert status == 0, result
        await p.executor.gate.reached.wait()
    else:
        result = await b.send(scenario)
    task: dict[str, Any] = result["task"]
    status, created = await b.call(
        "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": ALICES_HOOK, "url": HOOK}
    )
    assert status == 0, created
    return task


async def owners_view(owner: LiveServer, binding: str, task_id: str) -> list[Any]:
    """What the owner sees of the task: the task itself and its push configs."""
    b = Binding(owner, binding)
    return [
        await b.call("GetTask", {"id": task_id}),
        await b.call("ListTaskPushNotificationConfigs", {"taskId": task_id}),
    ]


async def assert_hidden_from(
    p: Parties, stranger: LiveServer, binding: str, operation: str, task_id: str
) -> None:
    """``stranger`` gets exactly the answer for a task that never existed, and changes nothing."""
    before = await owners_view(p.alice, binding, task_id)
    executions = p.executor.executions
    status, error = await attempt(stranger, binding, operation, task_id)
    never = str(uuid.uuid4())
    expected_status, expected = await attempt(stranger, binding, operation, never)
    assert expected_status == NOT_FOUND[binding]
    assert status == expected_status, error
    assert anonymised(error, task_id) == anonymised(expected, never)
    assert p.executor.executions == executions
    assert await owners_view(p.alice, binding, task_id) == before


def ids(listing: dict[str, Any]) -> set[str]:
    return {task["id"] for task in listing["tasks"]}


# --- another principal's tasks -------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_running_task_bob_tried_to_cancel_runs_on_for_alice(
    secured: Parties, binding: str
) -> None:
    with trio.fail_after(TIME_LIMIT):
        task = await start_task(secured, secured.alice, binding, "hold")
        status, _ = await attempt(secured.bob, binding, "CancelTask", task["id"])
        assert status == NOT_FOUND[binding]
        alice = Binding(secured.alice, binding)
        _, running = await alice.call("GetTask", {"id": task["id"]})
        assert running["status"]["state"] == "TASK_STATE_WORKING"
        secured.executor.gate.release.set()
        while running["status"]["state"] == "TASK_STATE_WORKING":
            await trio.sleep(0.02)
            _, running = await alice.call("GetTask", {"id": task["id"]})
        assert running["status"]["state"] == "TASK_STATE_COMPLETED"
        assert secured.executor.cancel_calls == 0


@pytest.mark.parametrize("binding", BINDINGS)
async def test_list_tasks_shows_each_caller_only_their_own(secured: Parties, binding: str) -> None:
    """AUTH-SCOPE-002: results are scoped to the caller."""
    alice, bob = Binding(secured.alice, binding), Binding(secured.bob, binding)
    alices = {(await alice.send("echo one"))["task"]["id"], (await alice.send("ask"))["task"]["id"]}
    bobs = {(await bob.send("echo two"))["task"]["id"]}
    status, listing = await bob.call("ListTasks", {})
    assert status == 0
    assert ids(listing) == bobs
    assert listing["totalSize"] == 1
    _, listing = await alice.call("ListTasks", {})
    assert ids(listing) == alices
    assert listing["totalSize"] == 2


@pytest.mark.parametrize("binding", BINDINGS)
async def test_list_filters_never_reach_another_callers_tasks(
    secured: Parties, binding: str
) -> None:
    alice, bob = Binding(secured.alice, binding), Binding(secured.bob, binding)
    asked = (await alice.send("ask"))["task"]
    await bob.send("echo mine")
    for query in (
        {"contextId": asked["contextId"]},
        {"status": "TASK_STATE_INPUT_REQUIRED"},
        {"pageSize": 1},
    ):
        status, listing = await bob.call("ListTasks", query)
        assert status == 0
        assert asked["id"] not in ids(listing), query
    _, by_context = await bob.call("ListTasks", {"contextId": asked["contextId"]})
    assert (by_context["tasks"], by_context["totalSize"]) == ([], 0)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_bobs_in_band_credentials_for_alices_task_reach_no_executor(
    secured: Parties, binding: str
) -> None:
    alice, bob = Binding(secured.alice, binding), Binding(secured.bob, binding)
    task = (await alice.send("auth"))["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    message = user_message(
        "signed in", taskId=task["id"], metadata={"credentials": {"token": "bobs-secret"}}
    )
    status, _ = await bob.call("SendMessage", {"message": message})
    assert status == NOT_FOUND[binding]
    assert secured.executor.credentials == [None]
    _, still = await alice.call("GetTask", {"id": task["id"]})
    assert still["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


# --- unauthenticated callers ---------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_unauthenticated_callers_share_only_unauthenticated_tasks(
    open_door: Parties, binding: str
) -> None:
    alice, anonymous = Binding(open_door.alice, binding), Binding(open_door.anonymous, binding)
    alices = (await alice.send("echo signed"))["task"]["id"]
    theirs = (await anonymous.send("echo unsigned"))["task"]["id"]
    async with caller(open_door.server) as another_anonymous:
        _, listing = await Binding(another_anonymous, binding).call("ListTasks", {})
    assert ids(listing) == {theirs}
    assert listing["totalSize"] == 1
    _, listing = await alice.call("ListTasks", {})
    assert ids(listing) == {alices}
    assert listing["totalSize"] == 1


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("binding", BINDINGS)
async def test_alices_task_is_not_found_for_unauthenticated_callers(
    open_door: Parties, binding: str, operation: str
) -> None:
    with trio.fail_after(TIME_LIMIT):
        task = await start_task(open_door, open_door.alice, binding, "ask")
        await assert_hidden_from(open_door, open_door.anonymous, binding, operation, task["id"])


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_unauthenticated_task_is_not_found_for_alice(
    open_door: Parties, binding: str
) -> None:
    anonymous = Binding(open_door.anonymous, binding)
    theirs = (await anonymous.send("ask"))["task"]["id"]
    never = str(uuid.uuid4())
    status, error = await attempt(open_door.alice, binding, "GetTask", theirs)
    expected_status, expected = await attempt(open_door.alice, binding, "GetTask", never)
    assert (status, anonymised(error, theirs)) == (expected_status, anonymised(expected, never))
    assert expected_status == NOT_FOUND[binding]


# --- in-band credentials (spec 7.6) ----------------------------------------------------------


@pytest.mark.parametrize("placement", ["message", "request"])
@pytest.mark.parametrize("binding", BINDINGS)
async def test_in_band_credentials_complete_an_auth_required_task_and_are_not_stored(
    secured: Parties, database: str, binding: str, placement: str
) -> None:
    alice = Binding(secured.alice, binding)
    task = (await alice.send("auth"))["task"]
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    credentials = {"token": "in-band-secret"}
    metadata: dict[str, Any] = {"note": "kept"}
    if placement == "message":
        metadata["credentials"] = credentials
    message = user_message("signed in", taskId=task["id"], metadata=metadata)
    params: dict[str, Any] = {"message": message}
    if placement == "request":
        params["metadata"] = {"credentials": credentials}

    status, result = await alice.call("SendMessage", params)

    assert status == 0, result
    done = result["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][-1]["parts"] == [{"text": "continued with: signed in"}]
    assert secured.executor.credentials == [None, credentials]
    _, stored = await alice.call("GetTask", {"id": task["id"]})
    assert "in-band-secret" not in json.dumps(stored)
    [sent] = [m for m in stored["history"] if m["messageId"] == message["messageId"]]
    assert sent["metadata"] == {"note": "kept"}
    written = rows(
        database,
        "SELECT CAST(payload AS text) FROM task_events WHERE task_id = ?"
        " UNION ALL SELECT CAST(snapshot AS text) FROM tasks WHERE id = ?",
        task["id"],
        task["id"],
    )
    assert any("signed in" in row for (row,) in written)  # the continuation is in the log
    assert not any("in-band-secret" in row for (row,) in written)

"""A2AClient against live servers: a2a-trio on both bindings, and the a2a-sdk reference server.

The a2a-trio server runs in this trio run (``live_server``: hypercorn on a free
127.0.0.1 port); every scenario runs once over JSON-RPC and once over
HTTP+JSON, and the client must say which binding it chose. The reference
server is the official a2a-sdk's own ``DefaultRequestHandler`` with a small
echo executor (:func:`serve_reference_agent`), run by uvicorn in a
subprocess: asyncio-only, it cannot share our trio run. It needs
``a2a-sdk[http-server]`` and ``uvicorn``; without them those tests are skipped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import trio

from a2a_trio import A2AApp, BearerAuthenticator, HostSettings
from a2a_trio.client import A2AClient, answer_text, text_of
from a2a_trio.protocol import (
    AgentCapabilities,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageConfiguration,
    StreamResponse,
    StringList,
    Task,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnauthenticatedError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card
from .servers import CARD_PATH, REPO, STARTUP_TIMEOUT, STOP_TIMEOUT, free_port

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
binding_param = pytest.mark.parametrize("binding", BINDINGS)
#: The bindings the reference server (the a2a-sdk app below) offers.
REFERENCE_BINDINGS = ["JSONRPC", "HTTP+JSON"]
reference_binding_param = pytest.mark.parametrize("binding", REFERENCE_BINDINGS)
#: What only the HTTP bindings have: an endpoint URL, SSE event ids, requests through httpx.
json_binding_param = pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
#: Where each binding's calls go on an a2a-trio mount at the root.
ENDPOINTS = {"JSONRPC": "/jsonrpc", "HTTP+JSON": "/rest"}
#: Every scenario is bounded as a whole: a hang is a failure, not a stuck suite.
SCENARIO_TIMEOUT = 20.0


# --- an a2a-trio server and a client of it ------------------------------------------


@asynccontextmanager
async def scripted_server(tmp_path: Path, **app_kwargs: Any) -> AsyncIterator[LiveServer]:
    """The scripted agent at the root; CancelTask waits at most 0.2 s for a held task."""
    app_kwargs.setdefault("host_settings", HostSettings(cancel_grace=0.2, shutdown_grace=0.5))

    def mount(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=ScriptedExecutor())

    async with live_server(tmp_path, mount, **app_kwargs) as server:
        yield server


@asynccontextmanager
async def client_of(
    tmp_path: Path, binding: str, **app_kwargs: Any
) -> AsyncIterator[tuple[LiveServer, A2AClient]]:
    """A scripted server and a client connected to it over ``binding``."""
    with trio.fail_after(SCENARIO_TIMEOUT):
        async with (
            scripted_server(tmp_path, **app_kwargs) as server,
            await A2AClient.connect(server.url, prefer=[binding]) as client,
        ):
            assert client.interface.protocol_binding == binding
            yield server, client


def kinds(events: list[StreamResponse]) -> list[str]:
    """Which member each event holds, and the state it carries."""
    described = []
    for event in events:
        if event.task is not None:
            described.append(f"task {event.task.status.state.name}")
        elif event.status_update is not None:
            described.append(f"status {event.status_update.status.state.name}")
        elif event.artifact_update is not None:
            described.append("artifact")
        else:
            described.append("message")
    return described


async def task_of(client: A2AClient, text: str, **options: Any) -> Task:
    """A blocking send that must answer with a task (not a direct message)."""
    answer = await client.send_message(text, **options)
    assert isinstance(answer, Task), answer
    return answer


async def finished_task(client: A2AClient, text: str = "echo done", **options: Any) -> Task:
    task = await task_of(client, text, **options)
    assert task.status.state is TaskState.COMPLETED
    return task


# --- connecting -----------------------------------------------------------------------


@json_binding_param
async def test_connect_uses_the_preferred_binding_the_card_offers(
    tmp_path: Path, binding: str
) -> None:
    async with client_of(tmp_path, binding) as (server, client):
        assert client.interface.url == server.url + ENDPOINTS[binding]
        assert client.card.name == make_card().name


async def test_grpc_connects_to_the_host_and_port_the_card_names(tmp_path: Path) -> None:
    async with client_of(tmp_path, "GRPC") as (server, client):
        assert client.interface.url == server.url.removeprefix("http://")
        assert client.interface.tenant is None  # the root agent
        assert (await client.send_message("echo over h2")).id  # type: ignore[union-attr]


async def test_grpc_names_the_agent_by_the_tenant_of_its_interface(tmp_path: Path) -> None:
    def mount(app: A2AApp) -> None:
        app.mount("", card=make_card(name="Root"), executor=ScriptedExecutor(), name="root")
        app.mount("/team", card=make_card(name="Team"), executor=ScriptedExecutor(), name="team")

    async with (
        live_server(tmp_path, mount) as server,
        await A2AClient.connect(server.url + "/team", prefer=["GRPC"]) as client,
    ):
        assert client.interface.tenant == "team"
        task = await client.send_message("echo team")
        assert isinstance(task, Task)
        body = await server.jsonrpc("GetTask", {"id": task.id}, prefix="/team")
        assert body["result"]["id"] == task.id


async def test_connect_prefers_jsonrpc_when_not_told_otherwise(tmp_path: Path) -> None:
    async with (
        scripted_server(tmp_path) as server,
        await A2AClient.connect(server.url) as client,
    ):
        assert client.interface.protocol_binding == "JSONRPC"


@binding_param
async def test_connect_accepts_the_card_url_itself(tmp_path: Path, binding: str) -> None:
    async with (
        scripted_server(tmp_path) as server,
        await A2AClient.connect(server.url + CARD_PATH, prefer=[binding]) as client,
    ):
        assert client.interface.protocol_binding == binding
        assert await answer_text(client.send("echo via the card url")) == "via the card url"


@pytest.mark.parametrize(
    "offered",
    [
        [("WEBSOCKET", "1.0")],
        [("JSONRPC", "0.3"), ("HTTP+JSON", "0.3")],
    ],
    ids=["unknown-binding-only", "version-0.3-only"],
)
async def test_a_card_with_no_interface_the_client_speaks_is_a_value_error(
    tmp_path: Path, offered: list[tuple[str, str]]
) -> None:
    interfaces = [
        AgentInterface(
            url=f"http://127.0.0.1:9/{binding}", protocol_binding=binding, protocol_version=version
        )
        for binding, version in offered
    ]

    def mount(app: A2AApp) -> None:
        app.mount("", card=make_card(supported_interfaces=interfaces), executor=ScriptedExecutor())

    async with live_server(tmp_path, mount) as server:
        with pytest.raises(ValueError, match="no interface this client speaks"):
            await A2AClient.connect(server.url)


# --- sending --------------------------------------------------------------------------


@binding_param
async def test_blocking_send_yields_the_finished_task_as_one_event(
    tmp_path: Path, binding: str
) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        events = [event async for event in client.send("echo hello")]
        assert all(isinstance(event, StreamResponse) for event in events)
        assert kinds(events) == ["task COMPLETED"]
        assert text_of(events[0]) == "hello"


@binding_param
async def test_streaming_send_yields_every_event_as_it_happens(
    tmp_path: Path, binding: str
) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        events = [event async for event in client.send("echo hello", stream=True)]
        assert all(isinstance(event, StreamResponse) for event in events)
        assert kinds(events) == ["task SUBMITTED", "status WORKING", "artifact", "status COMPLETED"]
        # SSE events carry ids to resume after; gRPC messages have none.
        assert (client.last_event_id is None) == (binding == "GRPC")


@binding_param
@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streaming"])
async def test_answer_text_is_the_echoed_text(tmp_path: Path, binding: str, stream: bool) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        assert await answer_text(client.send("echo hi there", stream=stream)) == "hi there"


@binding_param
async def test_send_message_returns_the_agents_direct_message(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        answer = await client.send_message("reply hey")
        assert isinstance(answer, Message)
        assert text_of(answer) == "you said: hey"


@binding_param
async def test_a_message_continues_the_task_it_names(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        question = await task_of(client, "ask me")
        assert question.status.state is TaskState.INPUT_REQUIRED
        answer = await task_of(client, "Ada", task_id=question.id)
        assert answer.id == question.id
        assert answer.status.state is TaskState.COMPLETED
        assert text_of(answer) == "continued with: Ada"


# --- tasks ----------------------------------------------------------------------------


@binding_param
async def test_get_task_returns_the_stored_task(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        sent = await finished_task(client, "echo remember me")
        fetched = await client.get_task(sent.id)
        assert fetched.id == sent.id
        assert fetched.status.state is TaskState.COMPLETED
        assert text_of(fetched) == "remember me"
        assert fetched.history and fetched.history[0].parts[0].text == "echo remember me"


@binding_param
async def test_get_task_history_length_limits_the_history(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        question = await task_of(client, "ask me")
        await client.send_message("Ada", task_id=question.id)
        full = await client.get_task(question.id)
        assert full.history is not None and len(full.history) > 1
        last = await client.get_task(question.id, history_length=1)
        assert last.history == full.history[-1:]


@binding_param
async def test_get_of_an_unknown_task_raises_task_not_found(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        with pytest.raises(TaskNotFoundError):
            await client.get_task("no-such-task")


@binding_param
async def test_list_tasks_filters_by_context_and_state(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        here, elsewhere = str(uuid.uuid4()), str(uuid.uuid4())
        done = [(await finished_task(client, f"echo {n}", context_id=here)).id for n in range(2)]
        waiting = await task_of(client, "ask me", context_id=here)
        await finished_task(client, "echo far away", context_id=elsewhere)

        in_context = await client.list_tasks(context_id=here)
        assert {task.id for task in in_context.tasks} == {*done, waiting.id}
        assert in_context.total_size == 3

        completed = await client.list_tasks(context_id=here, status=TaskState.COMPLETED)
        assert sorted(task.id for task in completed.tasks) == sorted(done)
        assert completed.total_size == 2

        needing_input = await client.list_tasks(status=TaskState.INPUT_REQUIRED)
        assert [task.id for task in needing_input.tasks] == [waiting.id]


@binding_param
async def test_list_tasks_pages_with_the_next_page_token(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        sent = [(await finished_task(client, f"echo {n}")).id for n in range(3)]
        first = await client.list_tasks(page_size=2)
        assert len(first.tasks) == 2
        assert first.total_size == 3
        assert first.next_page_token
        second = await client.list_tasks(page_size=2, page_token=first.next_page_token)
        assert len(second.tasks) == 1
        assert second.next_page_token == ""
        # Most recently updated first, every task exactly once.
        assert [task.id for task in first.tasks + second.tasks] == sent[::-1]


@binding_param
async def test_list_tasks_leaves_artifacts_out_unless_asked(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        await finished_task(client, "echo with an artifact")
        plain = await client.list_tasks()
        assert plain.tasks[0].artifacts is None
        full = await client.list_tasks(include_artifacts=True)
        assert text_of(full.tasks[0]) == "with an artifact"


@binding_param
async def test_cancel_task_cancels_a_running_task(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        held = await client.send_message(
            "hold", configuration=SendMessageConfiguration(return_immediately=True)
        )
        assert isinstance(held, Task)
        assert not held.status.state.is_final
        canceled = await client.cancel_task(held.id)
        assert canceled.id == held.id
        assert canceled.status.state is TaskState.CANCELED
        assert (await client.get_task(held.id)).status.state is TaskState.CANCELED


@binding_param
async def test_cancel_of_a_completed_task_is_not_cancelable(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        task = await finished_task(client)
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(task.id)


@binding_param
async def test_cancel_of_an_unknown_task_raises_task_not_found(
    tmp_path: Path, binding: str
) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task("no-such-task")


# --- subscribing ------------------------------------------------------------------------


async def follow_to_the_end(client: A2AClient, task_id: str) -> list[tuple[str | None, str]]:
    """Subscribe to an INPUT_REQUIRED task, answer it once the snapshot is in, read to the end.

    Returns each event's id and kind.
    """
    seen: list[tuple[str | None, str]] = []
    subscription = cast(AsyncGenerator[StreamResponse, None], client.subscribe(task_id))
    async with aclosing(subscription) as events:
        snapshot = await anext(events)
        seen.append((client.last_event_id, kinds([snapshot])[0]))
        await client.send_message("Ada", task_id=task_id)
        async for event in events:
            seen.append((client.last_event_id, kinds([event])[0]))
    return seen


@binding_param
async def test_subscribe_gives_the_snapshot_then_the_follow_ups_events_until_completed(
    tmp_path: Path, binding: str
) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        question = await task_of(client, "ask me")
        seen = await follow_to_the_end(client, question.id)
        assert [kind for _, kind in seen] == [
            "task INPUT_REQUIRED",
            "status WORKING",
            "artifact",
            "status COMPLETED",
        ]


@json_binding_param
async def test_subscribe_resumes_after_the_last_event_id(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        question = await task_of(client, "ask me")
        seen = await follow_to_the_end(client, question.id)
        snapshot_id = seen[0][0]
        assert snapshot_id is not None
        # The task is final now, yet a resume still replays what came after.
        resumed = [
            event async for event in client.subscribe(question.id, last_event_id=snapshot_id)
        ]
        assert kinds(resumed) == [kind for _, kind in seen[1:]]
        assert client.last_event_id == seen[-1][0]


@json_binding_param
async def test_resuming_after_the_final_event_yields_nothing(tmp_path: Path, binding: str) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        question = await task_of(client, "ask me")
        seen = await follow_to_the_end(client, question.id)
        last_id = seen[-1][0]
        assert [event async for event in client.subscribe(question.id, last_event_id=last_id)] == []


@binding_param
async def test_subscribe_to_a_final_task_is_an_unsupported_operation(
    tmp_path: Path, binding: str
) -> None:
    async with client_of(tmp_path, binding) as (_, client):
        task = await finished_task(client)
        with pytest.raises(UnsupportedOperationError):
            async for _ in client.subscribe(task.id):
                pass


# --- push notification configs ------------------------------------------------------------


@binding_param
async def test_push_configs_are_created_read_listed_and_deleted(
    tmp_path: Path, binding: str
) -> None:
    push = PushSettings(allowed_hosts=("example.com",))
    async with client_of(tmp_path, binding, push_settings=push) as (_, client):
        task = await finished_task(client)
        first = await client.create_push_config(
            task.id, "https://example.com/hooks/one", config_id="one", token="secret-token"
        )
        assert (first.task_id, first.id, first.url) == (
            task.id,
            "one",
            "https://example.com/hooks/one",
        )
        second = await client.create_push_config(task.id, "https://example.com/hooks/two")
        assert second.id  # the server names a config the client did not

        assert await client.get_push_config(task.id, "one") == first
        assert [c.id for c in await client.list_push_configs(task.id)] == ["one", second.id]

        await client.delete_push_config(task.id, "one")
        assert [c.id for c in await client.list_push_configs(task.id)] == [second.id]
        with pytest.raises(TaskNotFoundError):
            await client.get_push_config(task.id, "one")


@binding_param
async def test_push_config_for_an_unknown_task_raises_task_not_found(
    tmp_path: Path, binding: str
) -> None:
    push = PushSettings(allowed_hosts=("example.com",))
    async with client_of(tmp_path, binding, push_settings=push) as (_, client):
        with pytest.raises(TaskNotFoundError):
            await client.create_push_config("no-such-task", "https://example.com/hook")


# --- the extended card ----------------------------------------------------------------------


@binding_param
async def test_get_extended_card_returns_the_extended_card(tmp_path: Path, binding: str) -> None:
    public = make_card(capabilities=AgentCapabilities(streaming=True, extended_agent_card=True))
    extended = make_card(
        name="Test Agent (extended)",
        capabilities=public.capabilities,
        skills=[
            *public.skills,
            AgentSkill(id="secret", name="Secret", description="For friends.", tags=["x"]),
        ],
    )

    def mount(app: A2AApp) -> None:
        app.mount("", card=public, executor=ScriptedExecutor(), extended_card=extended)

    with trio.fail_after(SCENARIO_TIMEOUT):
        async with (
            live_server(tmp_path, mount) as server,
            await A2AClient.connect(server.url, prefer=[binding]) as client,
        ):
            card = await client.get_extended_card()
    assert card.name == "Test Agent (extended)"
    assert [skill.id for skill in card.skills] == ["test", "secret"]
    # Interfaces are filled in as on the public card.
    assert [i.protocol_binding for i in card.supported_interfaces or []] == BINDINGS


# --- headers, versions, authentication --------------------------------------------------------


@json_binding_param
async def test_every_request_carries_a2a_version_1_0(tmp_path: Path, binding: str) -> None:
    seen: list[tuple[str, str | None]] = []

    async def record(request: httpx.Request) -> None:
        seen.append((request.url.path, request.headers.get("A2A-Version")))

    async with (
        scripted_server(tmp_path) as server,
        httpx.AsyncClient(event_hooks={"request": [record]}, timeout=10.0) as http,
    ):
        client = await A2AClient.connect(server.url, prefer=[binding], http=http)
        with trio.fail_after(SCENARIO_TIMEOUT):
            task = await finished_task(client)
            await answer_text(client.send("echo streamed", stream=True))
            await client.get_task(task.id)
            await client.list_tasks()
            question = await task_of(client, "ask me")
            await follow_to_the_end(client, question.id)
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(task.id)
        await client.aclose()
        assert not http.is_closed  # a client passed in stays the caller's
    protocol_calls = [path for path, _ in seen if path != CARD_PATH]
    assert len(protocol_calls) >= 8
    assert all(path.startswith(ENDPOINTS[binding]) for path in protocol_calls)
    assert [version for _, version in seen] == ["1.0"] * len(seen)


@binding_param
@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streaming"])
async def test_a_version_the_server_does_not_serve_is_version_not_supported(
    tmp_path: Path, binding: str, stream: bool
) -> None:
    async with (
        scripted_server(tmp_path) as server,
        await A2AClient.connect(
            server.url, prefer=[binding], headers={"A2A-Version": "99.0"}
        ) as client,
    ):
        with pytest.raises(VersionNotSupportedError):
            async for _ in client.send("echo hello", stream=stream):
                pass


@asynccontextmanager
async def bearer_server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    """An agent whose card requires a bearer token; ``t-alice`` is alice."""
    card = make_card(
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList(list=[])})],
    )

    def mount(app: A2AApp) -> None:
        app.mount(
            "",
            card=card,
            executor=ScriptedExecutor(),
            authenticators={"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})},
        )

    async with live_server(tmp_path, mount) as server:
        yield server


@binding_param
async def test_headers_given_to_connect_reach_the_server(tmp_path: Path, binding: str) -> None:
    async with (
        bearer_server(tmp_path) as server,
        await A2AClient.connect(
            server.url, prefer=[binding], headers={"Authorization": "Bearer t-alice"}
        ) as client,
    ):
        task = await finished_task(client)
        stored = await server.app.store.get_task("default", task.id, owner=None)
        assert stored is not None and stored.owner == "alice"
        assert [t.id for t in (await client.list_tasks()).tasks] == [task.id]


@binding_param
async def test_without_credentials_a_secured_agent_raises_unauthenticated(
    tmp_path: Path, binding: str
) -> None:
    async with (
        bearer_server(tmp_path) as server,
        await A2AClient.connect(server.url, prefer=[binding]) as client,
    ):
        with pytest.raises(UnauthenticatedError):
            await client.send_message("echo let me in")


# --- the a2a-sdk reference server ---------------------------------------------------------


def serve_reference_agent(port: int) -> None:  # pragma: no cover - runs in the subprocess
    """Serve the a2a-sdk's own request handler with an echo executor on 127.0.0.1:``port``.

    The executor: ``ask ...`` asks for input (any reply completes the task);
    ``slow ...`` works for 30 s (long enough to be cancelled); anything else
    completes with the artifact ``echo: <text>``.
    """
    import asyncio

    import uvicorn
    from a2a.helpers import get_message_text, new_task_from_user_message, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import (
        create_agent_card_routes,
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.server.tasks import (
        InMemoryPushNotificationConfigStore,
        InMemoryTaskStore,
        TaskUpdater,
    )
    from a2a.types import AgentCapabilities as SdkCapabilities
    from a2a.types import AgentCard as SdkCard
    from a2a.types import AgentInterface as SdkInterface
    from a2a.types import AgentSkill as SdkSkill
    from starlette.applications import Starlette

    class ReferenceEcho(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            assert context.message is not None
            text = get_message_text(context.message)
            task = context.current_task
            new = task is None
            if task is None:
                task = new_task_from_user_message(context.message)
                await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            await updater.start_work()
            if new and text.startswith("ask"):
                question = updater.new_agent_message([new_text_part("What is your name?")])
                await updater.requires_input(question)
                return
            if text.startswith("slow"):
                await asyncio.sleep(30)
            await updater.add_artifact([new_text_part(f"echo: {text}")], name="echo")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            assert context.task_id is not None and context.context_id is not None
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    base = f"http://127.0.0.1:{port}"
    card = SdkCard(
        name="sdk-reference-echo",
        description="The a2a-sdk request handler with an echo executor.",
        version="0.0.1",
        supported_interfaces=[
            SdkInterface(
                url=f"{base}/a2a/jsonrpc", protocol_binding="JSONRPC", protocol_version="1.0"
            ),
            SdkInterface(
                url=f"{base}/a2a/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"
            ),
        ],
        capabilities=SdkCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[SdkSkill(id="echo", name="Echo", description="Echoes.", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=ReferenceEcho(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        push_config_store=InMemoryPushNotificationConfigStore(),
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/a2a/jsonrpc"),
        *create_rest_routes(handler, path_prefix="/a2a/rest"),
    ]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


@pytest.fixture(scope="module")
def reference_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The reference server's base URL, for this module's tests."""
    for needed in ("a2a.server.routes", "starlette", "sse_starlette", "uvicorn"):
        pytest.importorskip(
            needed, reason="the reference server needs a2a-sdk[http-server] and uvicorn"
        )
    port = free_port()
    log_path = tmp_path_factory.mktemp("reference") / "server.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"from tests.test_client import serve_reference_agent; "
                f"serve_reference_agent({port})",
            ],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail("the reference server exited:\n" + log_path.read_text())
            try:
                if httpx.get(url + CARD_PATH, timeout=1.0, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the reference server did not start:\n" + log_path.read_text())
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


@asynccontextmanager
async def reference_client(url: str, binding: str) -> AsyncIterator[A2AClient]:
    with trio.fail_after(SCENARIO_TIMEOUT):
        async with await A2AClient.connect(url, prefer=BINDINGS) as probe:
            offered = {i.protocol_binding for i in probe.card.supported_interfaces or []}
        assert binding in offered, f"the reference server's card does not offer {binding}"
        async with await A2AClient.connect(url, prefer=[binding]) as client:
            assert client.interface.protocol_binding == binding
            yield client


@reference_binding_param
async def test_reference_blocking_send(reference_server: str, binding: str) -> None:
    async with reference_client(reference_server, binding) as client:
        events = [event async for event in client.send("hello")]
        assert kinds(events) == ["task COMPLETED"]
        assert text_of(events[0]) == "echo: hello"


@reference_binding_param
async def test_reference_streaming_send(reference_server: str, binding: str) -> None:
    async with reference_client(reference_server, binding) as client:
        events = [event async for event in client.send("hello", stream=True)]
        assert kinds(events) == ["task SUBMITTED", "status WORKING", "artifact", "status COMPLETED"]
        assert text_of(events[2]) == "echo: hello"


@reference_binding_param
async def test_reference_get_task(reference_server: str, binding: str) -> None:
    async with reference_client(reference_server, binding) as client:
        sent = await finished_task(client, "fetch me")
        fetched = await client.get_task(sent.id)
        assert fetched.id == sent.id
        assert fetched.status.state is TaskState.COMPLETED
        assert text_of(fetched) == "echo: fetch me"
        with pytest.raises(TaskNotFoundError):
            await client.get_task(str(uuid.uuid4()))


@reference_binding_param
async def test_reference_list_tasks(reference_server: str, binding: str) -> None:
    async with reference_client(reference_server, binding) as client:
        context = str(uuid.uuid4())
        sent = {
            (await finished_task(client, f"one of {n}", context_id=context)).id for n in range(2)
        }
        listed = await client.list_tasks(context_id=context)
        assert {task.id for task in listed.tasks} == sent
        assert listed.total_size == 2
        first = await client.list_tasks(context_id=context, page_size=1)
        assert len(first.tasks) == 1 and first.next_page_token
        second = await client.list_tasks(
            context_id=context, page_size=1, page_token=first.next_page_token
        )
        assert {task.id for task in first.tasks + second.tasks} == sent
        completed = await client.list_tasks(context_id=context, status=TaskState.COMPLETED)
        assert {task.id for task in completed.tasks} == sent


@reference_binding_param
async def test_reference_cancel_task(reference_server: str, binding: str) -> None:
    async with reference_client(reference_server, binding) as client:
        slow = await client.send_message(
            "slow work", configuration=SendMessageConfiguration(return_immediately=True)
        )
        assert isinstance(slow, Task) and not slow.status.state.is_final
        canceled = await client.cancel_task(slow.id)
        assert canceled.status.state is TaskState.CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(slow.id)


@reference_binding_param
async def test_reference_subscribe_follows_a_task_to_completion(
    reference_server: str, binding: str
) -> None:
    async with reference_client(reference_server, binding) as client:
        question = await task_of(client, "ask me")
        assert question.status.state is TaskState.INPUT_REQUIRED
        seen = await follow_to_the_end(client, question.id)
        assert [kind for _, kind in seen] == [
            "task INPUT_REQUIRED",
            "status WORKING",
            "artifact",
            "status COMPLETED",
        ]
        # The reference server sends no SSE ids: there is nothing to resume from.
        assert {event_id for event_id, _ in seen} == {None}


@reference_binding_param
async def test_reference_subscribe_to_a_final_task_is_unsupported(
    reference_server: str, binding: str
) -> None:
    async with reference_client(reference_server, binding) as client:
        task = await finished_task(client, "over")
        with pytest.raises(UnsupportedOperationError):
            async for _ in client.subscribe(task.id):
                pass


@reference_binding_param
async def test_reference_push_configs(reference_server: str, binding: str) -> None:
    async with reference_client(reference_server, binding) as client:
        task = await finished_task(client, "notify me")
        created = await client.create_push_config(
            task.id, "https://example.com/hook", config_id="hook"
        )
        assert (created.task_id, created.id) == (task.id, "hook")
        assert (await client.get_push_config(task.id, "hook")).url == "https://example.com/hook"
        assert [c.id for c in await client.list_push_configs(task.id)] == ["hook"]
        await client.delete_push_config(task.id, "hook")
        assert await client.list_push_configs(task.id) == []

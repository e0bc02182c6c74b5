"""The official a2a-sdk client against a live a2a-trio server process, on both bindings.

The server is ``hypercorn --worker-class trio tests.sdk_app:app`` (the scripted
agent with an extended card and webhooks to 127.0.0.1 allowed) in a
subprocess on a free 127.0.0.1 port. The SDK client is asyncio, so each test is
a plain function that runs its scenario with ``asyncio.run`` (pytest-trio's
trio mode only takes ``async def`` tests). Every scenario runs on JSON-RPC,
on HTTP+JSON and on gRPC (the SDK's grpcio client over HTTP/2 cleartext, to
the same port) and expects the same answers from all three.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientTimeoutError
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from .servers import ServerProcess

REPO = Path(__file__).resolve().parent.parent
APP = "tests.sdk_app:app"
CARD_PATH = "/.well-known/agent-card.json"
STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
#: The SDK's own default (5 s) ends quiet streams; ours is generous, and every
#: scenario is bounded as a whole instead.
CLIENT_TIMEOUT = 30.0
SCENARIO_TIMEOUT = 20.0

T = TypeVar("T")


# --- the server process ---------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("sdk-interop")
    process = ServerProcess.start(directory / "a2a.db", directory / "server.log", app=APP)
    try:
        yield process
    finally:
        process.stop()


# --- the SDK client ---------------------------------------------------------------

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]
#: Where each binding's requests go, relative to the server (the card says so);
#: gRPC calls go over the SDK's grpcio channel, never through httpx.
ENDPOINTS = {"JSONRPC": "/jsonrpc", "HTTP+JSON": "/rest/"}

binding_param = pytest.mark.parametrize("binding", BINDINGS)


@dataclass
class SdkClients:
    """A unary client and a streaming client of one binding, and the paths they called."""

    blocking: Client
    streaming: Client
    paths: list[str] = field(default_factory=list)


@asynccontextmanager
async def sdk_clients(base_url: str, binding: str) -> AsyncIterator[SdkClients]:
    paths: list[str] = []

    async def record(request: httpx.Request) -> None:
        paths.append(request.url.path)

    async with httpx.AsyncClient(
        timeout=CLIENT_TIMEOUT, trust_env=False, event_hooks={"request": [record]}
    ) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()

        def create(*, streaming: bool) -> Client:
            config = ClientConfig(
                httpx_client=http,
                streaming=streaming,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
            return ClientFactory(config).create(card)

        clients = SdkClients(create(streaming=False), create(streaming=True), paths)
        try:
            yield clients
        finally:
            await clients.blocking.close()
            await clients.streaming.close()


def run(server: ServerProcess, binding: str, scenario: Callable[[SdkClients], Awaitable[T]]) -> T:
    """Run ``scenario`` with SDK clients of ``binding``, on asyncio, within the time limit."""

    async def main() -> T:
        async with asyncio.timeout(SCENARIO_TIMEOUT):
            async with sdk_clients(server.url, binding) as clients:
                result = await scenario(clients)
        protocol_paths = [path for path in clients.paths if path != CARD_PATH]
        if binding == "GRPC":
            assert protocol_paths == [], "a gRPC scenario called the JSON bindings"
            return result
        assert protocol_paths, "the scenario made no protocol request"
        assert all(path.startswith(ENDPOINTS[binding]) for path in protocol_paths), protocol_paths
        return result

    return asyncio.run(main())


def user_message(text: str, **fields: Any) -> Message:
    return Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], **fields
    )


async def send_blocking(client: Client, text: str, **fields: str) -> Task:
    """SendMessage, waiting for the task to settle; the one event must be the task."""
    request = SendMessageRequest(message=user_message(text, **fields))
    events = [event async for event in client.send_message(request)]
    assert [event.WhichOneof("payload") for event in events] == ["task"]
    return events[0].task


async def send_returning_immediately(client: Client, text: str) -> Task:
    request = SendMessageRequest(
        message=user_message(text),
        configuration=SendMessageConfiguration(return_immediately=True),
    )
    events = [event async for event in client.send_message(request)]
    assert [event.WhichOneof("payload") for event in events] == ["task"]
    return events[0].task


def subscription(client: Client, task_id: str) -> AsyncGenerator[StreamResponse, None]:
    """SubscribeToTask as the generator it is (typed as an iterator), so it can be closed."""
    events = client.subscribe(SubscribeToTaskRequest(id=task_id))
    assert isinstance(events, AsyncGenerator)
    return events


async def wait_for_state(client: Client, task_id: str, state: TaskState) -> Task:
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if task.status.state == state:
            return task
        await asyncio.sleep(0.02)


def describe(event: StreamResponse) -> tuple[str, str]:
    """An event as (payload kind, state name or artifact text)."""
    kind = event.WhichOneof("payload")
    if kind == "task":
        return kind, TaskState.Name(event.task.status.state)
    if kind == "status_update":
        return kind, TaskState.Name(event.status_update.status.state)
    if kind == "artifact_update":
        return kind, "".join(part.text for part in event.artifact_update.artifact.parts)
    return str(kind), ""


def artifact_texts(task: Task) -> list[str]:
    return ["".join(part.text for part in artifact.parts) for artifact in task.artifacts]


def status_text(task: Task) -> str:
    return "".join(part.text for part in task.status.message.parts)


# --- the scenarios ------------------------------------------------------------------


@binding_param
def test_blocking_send_returns_the_completed_task_with_the_echo_artifact(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> Task:
        return await send_blocking(clients.blocking, "echo hello there")

    task = run(server, binding, scenario)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [artifact.name for artifact in task.artifacts] == ["echo"]
    assert artifact_texts(task) == ["hello there"]
    assert [m.parts[0].text for m in task.history] == ["echo hello there"]
    assert task.history[0].role == Role.ROLE_USER


@binding_param
def test_stream_sends_the_task_first_then_updates_and_ends_with_completed(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> list[StreamResponse]:
        request = SendMessageRequest(message=user_message("echo streamed"))
        return [event async for event in clients.streaming.send_message(request)]

    events = run(server, binding, scenario)
    assert [describe(event) for event in events] == [
        ("task", "TASK_STATE_SUBMITTED"),
        ("status_update", "TASK_STATE_WORKING"),
        ("artifact_update", "streamed"),
        ("status_update", "TASK_STATE_COMPLETED"),
    ]
    task_id = events[0].task.id
    assert events[1].status_update.task_id == task_id
    assert events[2].artifact_update.task_id == task_id
    assert events[3].status_update.task_id == task_id


@binding_param
def test_get_task_returns_the_task_the_send_created(server: ServerProcess, binding: str) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, Task]:
        sent = await send_blocking(clients.blocking, "echo fetch me")
        return sent, await clients.blocking.get_task(GetTaskRequest(id=sent.id))

    sent, got = run(server, binding, scenario)
    assert got.id == sent.id
    assert got.context_id == sent.context_id
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_texts(got) == ["fetch me"]
    assert [m.parts[0].text for m in got.history] == ["echo fetch me"]


@binding_param
def test_list_tasks_includes_a_sent_task(server: ServerProcess, binding: str) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, list[Task]]:
        sent = await send_blocking(clients.blocking, "echo list me")
        listed = await clients.blocking.list_tasks(ListTasksRequest(page_size=100))
        return sent, list(listed.tasks)

    sent, listed = run(server, binding, scenario)
    [found] = [task for task in listed if task.id == sent.id]
    assert found.status.state == TaskState.TASK_STATE_COMPLETED
    assert found.context_id == sent.context_id


@binding_param
def test_cancel_of_a_working_task_ends_it_canceled(server: ServerProcess, binding: str) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, Task, Task]:
        started = await send_returning_immediately(clients.blocking, "hold until canceled")
        canceled = await clients.blocking.cancel_task(CancelTaskRequest(id=started.id))
        stored = await clients.blocking.get_task(GetTaskRequest(id=started.id))
        return started, canceled, stored

    started, canceled, stored = run(server, binding, scenario)
    assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert canceled.id == started.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert status_text(canceled) == "stopped on request"
    assert stored.status.state == TaskState.TASK_STATE_CANCELED


@binding_param
def test_subscribe_to_a_working_task_starts_with_its_snapshot(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, StreamResponse]:
        started = await send_returning_immediately(clients.blocking, "hold for a subscriber")
        try:
            await wait_for_state(clients.blocking, started.id, TaskState.TASK_STATE_WORKING)
            async with aclosing(subscription(clients.streaming, started.id)) as events:
                first = await anext(events)
        finally:
            # The held executor never finishes by itself: let it go.
            await clients.blocking.cancel_task(CancelTaskRequest(id=started.id))
        return started, first

    started, first = run(server, binding, scenario)
    assert describe(first) == ("task", "TASK_STATE_WORKING")
    assert first.task.id == started.id
    assert [m.parts[0].text for m in first.task.history] == ["hold for a subscriber"]


@binding_param
def test_subscribe_follows_an_input_required_task_to_completion(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(
        clients: SdkClients,
    ) -> tuple[Task, StreamResponse, Task, list[StreamResponse]]:
        asked = await send_blocking(clients.blocking, "ask me")
        async with aclosing(subscription(clients.streaming, asked.id)) as events:
            first = await anext(events)
            # The other client answers the question while the subscription is open.
            answered = await send_blocking(clients.blocking, "Ada", task_id=asked.id)
            rest = [event async for event in events]
        return asked, first, answered, rest

    asked, first, answered, rest = run(server, binding, scenario)
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert status_text(asked) == "What is your name?"
    assert describe(first) == ("task", "TASK_STATE_INPUT_REQUIRED")
    assert first.task.id == asked.id
    assert answered.id == asked.id
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_texts(answered) == ["continued with: Ada"]
    assert [describe(event) for event in rest] == [
        ("status_update", "TASK_STATE_WORKING"),
        ("artifact_update", "continued with: Ada"),
        ("status_update", "TASK_STATE_COMPLETED"),
    ]


@binding_param
def test_get_of_an_unknown_task_raises_task_not_found(server: ServerProcess, binding: str) -> None:
    async def scenario(clients: SdkClients) -> TaskNotFoundError:
        with pytest.raises(TaskNotFoundError) as raised:
            await clients.blocking.get_task(GetTaskRequest(id="no-such-task"))
        return raised.value

    error = run(server, binding, scenario)
    # The SDK's gRPC transport keeps the ErrorInfo's reason, not its metadata.
    assert error.data == (None if binding == "GRPC" else {"taskId": "no-such-task"})


@binding_param
def test_cancel_of_a_completed_task_raises_not_cancelable(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, TaskNotCancelableError]:
        done = await send_blocking(clients.blocking, "echo finished")
        with pytest.raises(TaskNotCancelableError) as raised:
            await clients.blocking.cancel_task(CancelTaskRequest(id=done.id))
        return done, raised.value

    done, error = run(server, binding, scenario)
    expected = {"taskId": done.id, "state": "TASK_STATE_COMPLETED"}
    assert error.data == (None if binding == "GRPC" else expected)


@binding_param
def test_push_configs_are_created_read_listed_and_deleted(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(
        clients: SdkClients,
    ) -> tuple[TaskPushNotificationConfig, TaskPushNotificationConfig, list[str], list[str]]:
        client = clients.blocking
        held = await send_returning_immediately(client, "hold for webhooks")
        try:
            created = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=held.id, url="http://127.0.0.1:9/hook", token="t0ken"
                )
            )
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=held.id, id=created.id)
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=held.id)
            )
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=held.id, id=created.id)
            )
            after = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=held.id)
            )
        finally:
            await client.cancel_task(CancelTaskRequest(id=held.id))
        return (
            created,
            got,
            [config.id for config in listed.configs],
            [config.id for config in after.configs],
        )

    created, got, listed, after = run(server, binding, scenario)
    assert created.id and created.url == "http://127.0.0.1:9/hook" and created.token == "t0ken"
    assert got == created
    assert listed == [created.id]
    assert after == []


@binding_param
def test_the_extended_card_is_the_configured_one(server: ServerProcess, binding: str) -> None:
    async def scenario(clients: SdkClients) -> AgentCard:
        return await clients.blocking.get_extended_agent_card(GetExtendedAgentCardRequest())

    card = run(server, binding, scenario)
    assert card.name == "Test Agent (extended)"
    assert [i.protocol_binding for i in card.supported_interfaces] == [
        "JSONRPC",
        "HTTP+JSON",
        "GRPC",
    ]


def test_a_grpc_deadline_that_expires_ends_the_call_and_not_the_task(
    server: ServerProcess,
) -> None:
    async def scenario(clients: SdkClients) -> tuple[list[Task], Task]:
        request = SendMessageRequest(message=user_message("hold past the deadline"))
        with pytest.raises(A2AClientTimeoutError):
            async for _ in clients.blocking.send_message(
                request, context=ClientCallContext(timeout=0.5)
            ):
                pass
        listed = await clients.blocking.list_tasks(
            ListTasksRequest(page_size=100, history_length=1)
        )
        held = [
            task
            for task in listed.tasks
            if task.history and task.history[0].parts[0].text == "hold past the deadline"
        ]
        canceled = await clients.blocking.cancel_task(CancelTaskRequest(id=held[0].id))
        return held, canceled

    held, canceled = run(server, "GRPC", scenario)
    [task] = held
    # The deadline (grpc-timeout) ended the call; the task ran on in the host.
    assert task.status.state == TaskState.TASK_STATE_WORKING
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED

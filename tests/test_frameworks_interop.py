"""The official a2a-sdk client against framework agents in a live server process, both bindings.

The server is ``hypercorn --worker-class trio tests.frameworks_app:app`` in a
subprocess: a Pydantic AI agent and a LangGraph graph (both offline) and a
held asyncio agent, each served through the asyncio bridge. Each scenario
runs on JSON-RPC and on HTTP+JSON (see tests/test_sdk_interop.py for the
client set-up).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from .servers import ServerProcess
from .test_sdk_interop import (
    SCENARIO_TIMEOUT,
    SdkClients,
    artifact_texts,
    binding_param,
    sdk_clients,
    send_blocking,
    send_returning_immediately,
    status_text,
    user_message,
    wait_for_state,
)

T = TypeVar("T")

#: Where each binding's requests go under an agent's prefix (its card says so).
ENDPOINTS = {"JSONRPC": "/jsonrpc", "HTTP+JSON": "/rest/"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("frameworks-interop")
    process = ServerProcess.start(
        directory / "a2a.db", directory / "server.log", app="tests.frameworks_app:app"
    )
    try:
        yield process
    finally:
        process.stop()


def run(
    server: ServerProcess,
    prefix: str,
    binding: str,
    scenario: Callable[[SdkClients], Awaitable[T]],
) -> T:
    """Run ``scenario`` with SDK clients of ``binding`` for the agent at ``prefix``."""

    async def main() -> T:
        async with asyncio.timeout(SCENARIO_TIMEOUT):
            async with sdk_clients(server.url + prefix, binding) as clients:
                result = await scenario(clients)
        calls = [path for path in clients.paths if not path.endswith("agent-card.json")]
        if binding == "GRPC":  # the card's GRPC interface, not an HTTP path
            assert calls == [], "a gRPC scenario called the JSON bindings"
            return result
        assert calls, "the scenario made no protocol request"
        assert all(path.startswith(prefix + ENDPOINTS[binding]) for path in calls), calls
        return result

    return asyncio.run(main())


async def stream(clients: SdkClients, text: str) -> list[StreamResponse]:
    request = SendMessageRequest(message=user_message(text))
    return [event async for event in clients.streaming.send_message(request)]


def chunks(events: list[StreamResponse]) -> list[StreamResponse]:
    return [event for event in events if event.WhichOneof("payload") == "artifact_update"]


# --- Pydantic AI ----------------------------------------------------------------------


@binding_param
def test_pydantic_ai_streams_its_answer_as_chunks_of_the_model_text(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> list[StreamResponse]:
        return await stream(clients, "tell me something")

    events = run(server, "/pydantic-ai", binding, scenario)
    updates = [event.artifact_update for event in chunks(events)]
    assert len(updates) == 5  # a word at a time, as the scripted model streams it
    text = "".join(part.text for update in updates for part in update.artifact.parts)
    assert text == "You said: tell me something."
    assert [update.append for update in updates] == [False, True, True, True, True]
    assert [update.last_chunk for update in updates] == [False, False, False, False, True]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@binding_param
def test_pydantic_ai_tool_call_is_a_status_update(server: ServerProcess, binding: str) -> None:
    async def scenario(clients: SdkClients) -> list[StreamResponse]:
        return await stream(clients, "add 20 and 22")

    events = run(server, "/pydantic-ai", binding, scenario)
    statuses = [e.status_update for e in events if e.WhichOneof("payload") == "status_update"]
    [call] = [s for s in statuses if s.status.message.parts]
    assert call.status.state == TaskState.TASK_STATE_WORKING
    assert call.status.message.parts[0].text == "Calling tool add"
    arguments = call.status.message.parts[1].data.struct_value.fields["arguments"]
    assert {k: v.number_value for k, v in arguments.struct_value.fields.items()} == {
        "a": 20,
        "b": 22,
    }
    text = "".join(p.text for e in chunks(events) for p in e.artifact_update.artifact.parts)
    assert text == "The sum is 42."


@binding_param
def test_pydantic_ai_second_message_in_the_context_sees_the_first_exchange(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, Task]:
        first = await send_blocking(clients.blocking, "my name is Ada")
        second = await send_blocking(
            clients.blocking, "what is my name?", context_id=first.context_id
        )
        return first, second

    first, second = run(server, "/pydantic-ai", binding, scenario)
    assert second.context_id == first.context_id
    assert second.id != first.id
    assert second.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_texts(second) == ["You said: what is my name?. Before that: my name is Ada."]


# --- LangGraph --------------------------------------------------------------------------


@binding_param
def test_langgraph_interrupt_goes_input_required_then_completed_after_the_follow_up(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, Task]:
        asked = await send_blocking(clients.blocking, "hello")
        answered = await send_blocking(clients.blocking, "Grace", task_id=asked.id)
        return asked, answered

    asked, answered = run(server, "/langgraph", binding, scenario)
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert status_text(asked) == "What is your name?"
    assert answered.id == asked.id
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifact_texts(answered) == ["Nice to meet you, Grace!"]


# --- a held asyncio agent ------------------------------------------------------------------


@binding_param
def test_cancel_of_a_bridged_asyncio_agent_ends_it_canceled(
    server: ServerProcess, binding: str
) -> None:
    async def scenario(clients: SdkClients) -> tuple[Task, Task]:
        started = await send_returning_immediately(clients.blocking, "hold")
        await wait_for_state(clients.blocking, started.id, TaskState.TASK_STATE_WORKING)
        canceled = await clients.blocking.cancel_task(CancelTaskRequest(id=started.id))
        stored = await clients.blocking.get_task(GetTaskRequest(id=started.id))
        return canceled, stored

    canceled, stored = run(server, "/held", binding, scenario)
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert stored.status.state == TaskState.TASK_STATE_CANCELED

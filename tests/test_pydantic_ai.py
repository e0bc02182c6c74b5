"""PydanticAIExecutor in a live server, with offline models (FunctionModel, TestModel).

The official SDK client's view, on both bindings, is in tests/test_frameworks_interop.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent, BinaryContent, DocumentUrl, ImageUrl
from pydantic_ai.models.test import TestModel

from a2a_trio import A2AApp, Message, Part, Role
from a2a_trio.adapters.pydantic_ai import PydanticAIExecutor, user_content
from examples.pydantic_ai_agent import agent as calculator

from .conftest import LiveServer, live_server, make_card, user_message


def serving(executor: PydanticAIExecutor) -> Any:
    def mount(app: A2AApp) -> None:
        app.mount("", make_card(), executor)

    return mount


def answer_chunks(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [frame["artifactUpdate"] for frame in frames if "artifactUpdate" in frame]


def answer(task: dict[str, Any]) -> str:
    """The text of the task's answer artifact (its chunks' parts, in order)."""
    [artifact] = [a for a in task["artifacts"] if a.get("name") == "answer"]
    return "".join(part["text"] for part in artifact["parts"])


async def stream(server: LiveServer, text: str, **fields: Any) -> list[dict[str, Any]]:
    return await server.sse(
        "POST", "/rest/message:stream", json={"message": user_message(text, **fields)}
    )


async def test_the_answer_streams_as_chunks_that_concatenate_to_the_model_text(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, serving(PydanticAIExecutor(calculator))) as server:
        frames = await stream(server, "hello there")
    chunks = answer_chunks(frames)
    assert len(chunks) == 4  # "You", " said:", " hello", " there."
    assert "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == "You said: hello there."
    assert [c.get("append", False) for c in chunks] == [False, True, True, True]
    assert [c.get("lastChunk", False) for c in chunks] == [False, False, False, True]
    assert len({c["artifact"]["artifactId"] for c in chunks}) == 1
    assert chunks[0]["artifact"]["name"] == "answer"
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_tool_call_is_a_working_status_update(tmp_path: Path) -> None:
    async with live_server(tmp_path, serving(PydanticAIExecutor(calculator))) as server:
        frames = await stream(server, "please add 2 and 3")
    updates = [f["statusUpdate"]["status"] for f in frames if "statusUpdate" in f]
    calls = [u for u in updates if u.get("message")]
    [call] = calls
    assert call["state"] == "TASK_STATE_WORKING"
    text, data = call["message"]["parts"]
    assert text == {"text": "Calling tool add"}
    assert data["data"]["tool"] == "add"
    assert data["data"]["arguments"] == {"a": 2, "b": 3}
    chunks = answer_chunks(frames)
    assert "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == "The sum is 5."


async def test_a_second_message_in_the_context_sees_the_first_exchange(tmp_path: Path) -> None:
    executor = PydanticAIExecutor(calculator)
    async with live_server(tmp_path, serving(executor)) as server:
        first = await server.jsonrpc("SendMessage", {"message": user_message("my name is Ada")})
        context_id = first["result"]["task"]["contextId"]
        second = await server.jsonrpc(
            "SendMessage", {"message": user_message("what is my name?", contextId=context_id)}
        )
        elsewhere = await server.jsonrpc("SendMessage", {"message": user_message("hi")})
    task = second["result"]["task"]
    assert task["id"] != first["result"]["task"]["id"]
    assert answer(task) == "You said: what is my name?. Before that: my name is Ada."
    assert answer(elsewhere["result"]["task"]) == "You said: hi."
    assert len(executor.conversation(context_id)) == 4  # two requests, two responses


async def test_structured_output_is_a_data_artifact(tmp_path: Path) -> None:
    agent = Agent(TestModel(custom_output_args={"city": "Paris", "rank": 1}), output_type=dict)
    async with live_server(tmp_path, serving(PydanticAIExecutor(agent))) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("best city?")})
    task = body["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    [output] = [a for a in task["artifacts"] if a.get("name") == "output"]
    assert output["parts"] == [{"data": {"city": "Paris", "rank": 1}}]


async def test_a_failing_model_ends_the_task_failed_with_the_error(tmp_path: Path) -> None:
    agent = Agent(TestModel(call_tools=["explode"]))

    @agent.tool_plain
    def explode() -> str:
        raise OSError("the tool broke")

    async with live_server(tmp_path, serving(PydanticAIExecutor(agent))) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("go")})
    status = body["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"] == [{"text": "The agent failed: OSError: the tool broke"}]


def test_the_message_parts_become_the_prompt() -> None:
    message = Message(
        message_id="m",
        role=Role.USER,
        parts=[
            Part(text="look"),
            Part(url="https://example.com/cat.png", media_type="image/png"),
            Part(url="https://example.com/paper.pdf", media_type="application/pdf"),
            Part(raw=b"%PDF", media_type="application/pdf"),
            Part(data={"k": [1, 2]}),
        ],
    )
    content = user_content(message)
    assert isinstance(content, list)
    text, image, document, binary, data = content
    assert user_content(message.model_copy(update={"parts": [Part(text="a"), Part(text="b")]})) == (
        "a\nb"
    )
    assert text == "look"
    assert isinstance(image, ImageUrl) and image.url == "https://example.com/cat.png"
    assert isinstance(document, DocumentUrl) and document.media_type == "application/pdf"
    assert isinstance(binary, BinaryContent) and binary.data == b"%PDF"
    assert data == '{"k": [1, 2]}'

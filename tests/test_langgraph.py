"""LangGraphExecutor in a live server, with graphs of plain functions and a fake chat model.

The official SDK client's view, on both bindings, is in tests/test_frameworks_interop.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from a2a_trio import A2AApp
from a2a_trio.adapters.langgraph import LangGraphExecutor
from examples.langgraph_agent import graph as greeter

from .conftest import LiveServer, live_server, make_card, user_message


def serving(executor: LangGraphExecutor) -> Any:
    def mount(app: A2AApp) -> None:
        app.mount("", make_card(), executor)

    return mount


async def stream(server: LiveServer, text: str, **fields: Any) -> list[dict[str, Any]]:
    return await server.sse(
        "POST", "/rest/message:stream", json={"message": user_message(text, **fields)}
    )


class Counted(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]


def count(state: Counted) -> dict[str, Any]:
    """Answers with how many user messages the thread holds so far."""
    users = [m for m in state["messages"] if m.type == "human"]
    return {
        "messages": [
            AIMessage(f"{len(users)} messages: " + ", ".join(str(m.content) for m in users))
        ]
    }


def counting_graph() -> StateGraph[Any, Any, Any, Any]:
    builder = StateGraph(Counted)
    builder.add_node("count", count)
    builder.add_edge(START, "count")
    builder.add_edge("count", END)
    return builder


async def test_an_interrupt_pauses_the_task_and_the_follow_up_resumes_it(tmp_path: Path) -> None:
    async with live_server(tmp_path, serving(LangGraphExecutor(greeter))) as server:
        first = await server.jsonrpc("SendMessage", {"message": user_message("hello")})
        asked = first["result"]["task"]
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert asked["status"]["message"]["parts"] == [{"text": "What is your name?"}]
        frames = await stream(server, "Ada", taskId=asked["id"])
    chunks = [f["artifactUpdate"] for f in frames if "artifactUpdate" in f]
    assert len(chunks) > 1  # the fake chat model streams word by word
    assert "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == "Nice to meet you, Ada!"
    assert chunks[-1]["lastChunk"] is True
    assert all(c.get("append") for c in chunks[1:])
    nodes = [
        f["statusUpdate"]["metadata"]["node"]
        for f in frames
        if "statusUpdate" in f and f["statusUpdate"].get("metadata")
    ]
    assert nodes == ["ask", "greet"]
    assert frames[0]["task"]["id"] == asked["id"]
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_checkpointer_keeps_each_context_as_a_thread(tmp_path: Path) -> None:
    executor = LangGraphExecutor(counting_graph())
    async with live_server(tmp_path, serving(executor)) as server:
        first = await server.jsonrpc("SendMessage", {"message": user_message("one")})
        context_id = first["result"]["task"]["contextId"]
        second = await server.jsonrpc(
            "SendMessage", {"message": user_message("two", contextId=context_id)}
        )
        other = await server.jsonrpc("SendMessage", {"message": user_message("three")})

    def answer(body: dict[str, Any]) -> str:
        return "".join(p["text"] for p in body["result"]["task"]["artifacts"][0]["parts"])

    assert answer(first) == "1 messages: one"
    assert answer(second) == "2 messages: one, two"
    assert answer(other) == "1 messages: three"


async def test_a_graph_with_its_own_checkpointer_keeps_it(tmp_path: Path) -> None:
    saver = InMemorySaver()
    executor = LangGraphExecutor(counting_graph().compile(checkpointer=saver))
    assert executor.graph.checkpointer is saver
    async with live_server(tmp_path, serving(executor)) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("one")})
    context_id = body["result"]["task"]["contextId"]
    assert saver.get({"configurable": {"thread_id": context_id}}) is not None


async def test_a_node_that_raises_ends_the_task_failed(tmp_path: Path) -> None:
    def broken(state: Counted) -> dict[str, Any]:
        raise LookupError("no such tool")

    builder = StateGraph(Counted)
    builder.add_node("broken", broken)
    builder.add_edge(START, "broken")
    async with live_server(tmp_path, serving(LangGraphExecutor(builder))) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("go")})
    status = body["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"] == [{"text": "The agent failed: LookupError: no such tool"}]


async def test_an_interrupt_with_structured_value_is_a_data_part(tmp_path: Path) -> None:
    def confirm(state: Counted) -> dict[str, Any]:
        answer = interrupt({"question": "Book it?", "options": ["yes", "no"]})
        return {"messages": [AIMessage(f"You chose {answer['choice']}.")]}

    builder = StateGraph(Counted)
    builder.add_node("confirm", confirm)
    builder.add_edge(START, "confirm")
    async with live_server(tmp_path, serving(LangGraphExecutor(builder))) as server:
        asked = (await server.jsonrpc("SendMessage", {"message": user_message("book")}))["result"]
        resumed_message = user_message("", taskId=asked["task"]["id"])
        resumed_message["parts"] = [{"data": {"choice": "yes"}}]
        done = await server.jsonrpc("SendMessage", {"message": resumed_message})
    assert asked["task"]["status"]["message"]["parts"] == [
        {"data": {"question": "Book it?", "options": ["yes", "no"]}}
    ]
    task = done["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "You chose yes."}]

"""The examples in examples/ run as documented."""

from __future__ import annotations

from pathlib import Path

from a2a_trio import A2AApp
from a2a_trio.adapters.langgraph import LangGraphExecutor
from a2a_trio.adapters.pydantic_ai import PydanticAIExecutor
from examples.echo_agent import ShoutingEchoExecutor
from examples.echo_agent import card as echo_card
from examples.langgraph_agent import card as langgraph_card
from examples.langgraph_agent import graph as langgraph_greeter
from examples.multiturn_agent import GreeterExecutor
from examples.multiturn_agent import card as greeter_card
from examples.pydantic_ai_agent import agent as calculator
from examples.pydantic_ai_agent import card as calculator_card

from .conftest import live_server, user_message


async def test_the_echo_example_shouts_back(tmp_path: Path) -> None:
    def mount(app: A2AApp) -> None:
        app.mount("/echo", card=echo_card, executor=ShoutingEchoExecutor(), name="echo")

    async with live_server(tmp_path, mount) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("hi")}, prefix="/echo")
        task = body["result"]["task"]
        assert task["artifacts"][0]["parts"] == [{"text": "HI"}]


async def test_the_multiturn_example_asks_then_greets(tmp_path: Path) -> None:
    def mount(app: A2AApp) -> None:
        app.mount("", card=greeter_card, executor=GreeterExecutor(), name="greeter")

    async with live_server(tmp_path, mount) as server:
        first = await server.rest("POST", "/message:send", json={"message": user_message("hi")})
        task = first.json()["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert task["status"]["message"]["parts"] == [{"text": "Hello! What is your name?"}]
        second = await server.rest(
            "POST", "/message:send", json={"message": user_message("Ada", taskId=task["id"])}
        )
        done = second.json()["task"]
        assert done["id"] == task["id"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["artifacts"][0]["parts"] == [{"text": "Nice to meet you, Ada!"}]


async def test_the_pydantic_ai_example_adds_with_its_tool(tmp_path: Path) -> None:
    def mount(app: A2AApp) -> None:
        app.mount("", card=calculator_card, executor=PydanticAIExecutor(calculator))

    async with live_server(tmp_path, mount) as server:
        body = await server.jsonrpc("SendMessage", {"message": user_message("add 2 and 40")})
    task = body["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(part["text"] for part in task["artifacts"][0]["parts"]) == "The sum is 42."


async def test_the_langgraph_example_asks_then_greets(tmp_path: Path) -> None:
    def mount(app: A2AApp) -> None:
        app.mount("", card=langgraph_card, executor=LangGraphExecutor(langgraph_greeter))

    async with live_server(tmp_path, mount) as server:
        first = await server.jsonrpc("SendMessage", {"message": user_message("hi")})
        task = first["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert task["status"]["message"]["parts"] == [{"text": "What is your name?"}]
        second = await server.jsonrpc(
            "SendMessage", {"message": user_message("Ada", taskId=task["id"])}
        )
    done = second["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    greeting = "".join(part["text"] for part in done["artifacts"][0]["parts"])
    assert greeting == "Nice to meet you, Ada!"


def test_the_example_modules_build_their_apps() -> None:
    from examples import echo_agent, langgraph_agent, multiturn_agent, pydantic_ai_agent

    assert set(echo_agent.app.mounts) == {"echo"}
    assert set(multiturn_agent.app.mounts) == {"greeter"}
    assert set(pydantic_ai_agent.app.mounts) == {"calculator"}
    assert set(langgraph_agent.app.mounts) == {"greeter"}

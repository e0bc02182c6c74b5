"""A Pydantic AI agent over A2A, offline: a scripted FunctionModel stands in for an LLM.

Needs the extra: ``pip install 'a2a-trio[pydantic-ai]'``. Serve it with::

    hypercorn --worker-class trio examples.pydantic_ai_agent:app

"add 2 and 3" makes the model call the ``add`` tool (a WORKING status update),
then answer "The sum is 5."; anything else is echoed back with what was said
earlier in the same context. The answer streams as artifact chunks. To use a
real model, pass its name instead: ``Agent("openai:gpt-5", ...)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

from pydantic_ai import Agent, ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from a2a_trio import A2AApp, AgentCapabilities, AgentCard, AgentSkill
from a2a_trio.adapters.pydantic_ai import PydanticAIExecutor

ADD = re.compile(r"add (-?\d+) and (-?\d+)", re.IGNORECASE)


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    """The text the user sent, run after run, oldest first."""
    return [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart) and isinstance(part.content, str)
    ]


async def scripted_model(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """Streams its answer a word at a time, as an LLM streams tokens."""
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if last else []
    prompts = user_prompts(messages)
    if returned:
        answer = f"The sum is {returned[0].content}."
    elif prompts and (match := ADD.search(prompts[-1])):
        arguments = {"a": int(match[1]), "b": int(match[2])}
        yield {0: DeltaToolCall(name="add", json_args=json.dumps(arguments))}
        return
    else:
        earlier = prompts[:-1]
        answer = f"You said: {prompts[-1] if prompts else ''}."
        if earlier:
            answer += " Before that: " + "; ".join(earlier) + "."
    words = answer.split(" ")
    for i, word in enumerate(words):
        yield word if i == 0 else " " + word


agent = Agent(FunctionModel(stream_function=scripted_model), name="calculator")


@agent.tool_plain
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


card = AgentCard(
    name="Calculator",
    description="A Pydantic AI agent with one tool (offline scripted model).",
    version="1.0.0",
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[
        AgentSkill(
            id="add",
            name="Add",
            description="Adds two integers with a tool; remembers the conversation.",
            tags=["pydantic-ai", "example"],
        )
    ],
)

app = A2AApp(database="pydantic_ai_agent.db")
app.mount("", card=card, executor=PydanticAIExecutor(agent), name="calculator")

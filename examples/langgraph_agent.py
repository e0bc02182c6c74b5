"""A LangGraph graph over A2A, offline: human in the loop, and a fake chat model that streams.

Needs the extra: ``pip install 'a2a-trio[langgraph]'``. Serve it with::

    hypercorn --worker-class trio examples.langgraph_agent:app

Send any message: the graph's ``ask`` node interrupts, and the task pauses
in TASK_STATE_INPUT_REQUIRED with the question. Send the answer with the same
``taskId``: the graph resumes, its ``greet`` node streams a greeting from a
chat model (LangChain's ``GenericFakeChatModel`` here; any chat model works)
as artifact chunks, and the task completes.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from a2a_trio import A2AApp, AgentCapabilities, AgentCard, AgentSkill
from a2a_trio.adapters.langgraph import LangGraphExecutor


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    name: str


async def ask(state: State) -> dict[str, Any]:
    """Pause for a human: the value of ``interrupt`` is what the client answers."""
    name = interrupt("What is your name?")
    return {"name": str(name).strip() or "stranger"}


async def greet(state: State) -> dict[str, Any]:
    """A chat model's answer; its tokens stream to the client as they come."""
    model = GenericFakeChatModel(messages=iter([AIMessage(f"Nice to meet you, {state['name']}!")]))
    return {"messages": [await model.ainvoke(state["messages"])]}


builder = StateGraph(State)
builder.add_node("ask", ask)
builder.add_node("greet", greet)
builder.add_edge(START, "ask")
builder.add_edge("ask", "greet")
builder.add_edge("greet", END)
# Compiled without a checkpointer: the executor gives it one (in memory),
# keyed by contextId. Pass checkpointer= a durable saver to keep threads.
graph = builder.compile()

card = AgentCard(
    name="LangGraph greeter",
    description="Asks for your name (human in the loop), then greets you.",
    version="1.0.0",
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[
        AgentSkill(
            id="greet",
            name="Greet",
            description="A LangGraph graph with an interrupt.",
            tags=["langgraph", "multi-turn", "example"],
        )
    ],
)

app = A2AApp(database="langgraph_agent.db")
app.mount("", card=card, executor=LangGraphExecutor(graph), name="greeter")

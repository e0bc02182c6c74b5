"""The framework examples as one importable ASGI app, for tests with a real server process.

Served with ``hypercorn --worker-class trio -b 127.0.0.1:PORT tests.frameworks_app:app``
from the repository root; the database comes from ``A2A_TRIO_DATABASE``:

- ``/pydantic-ai``: examples/pydantic_ai_agent.py's agent (offline scripted model);
- ``/langgraph``: examples/langgraph_agent.py's graph (interrupt, fake chat model);
- ``/held``: an asyncio agent that works until it is cancelled.
"""

from __future__ import annotations

import asyncio
import os

from a2a_trio import A2AApp, AsyncioAgentExecutor, AsyncioEventQueue, RequestContext, TaskUpdater
from a2a_trio.adapters.langgraph import LangGraphExecutor
from a2a_trio.adapters.pydantic_ai import PydanticAIExecutor
from examples.langgraph_agent import card as langgraph_card
from examples.langgraph_agent import graph
from examples.pydantic_ai_agent import agent
from examples.pydantic_ai_agent import card as pydantic_ai_card


class HeldAgent(AsyncioAgentExecutor):
    """Starts work and waits on asyncio until CancelTask (or shutdown) cancels it."""

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work("holding on asyncio")
        await asyncio.Event().wait()


app = A2AApp(database=os.environ["A2A_TRIO_DATABASE"])
app.mount("/pydantic-ai", pydantic_ai_card, PydanticAIExecutor(agent), name="pydantic_ai")
app.mount("/langgraph", langgraph_card, LangGraphExecutor(graph), name="langgraph")
app.mount("/held", pydantic_ai_card, HeldAgent(), name="held")

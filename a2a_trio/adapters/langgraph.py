"""LangGraph graphs over A2A: :class:`LangGraphExecutor` (extra ``a2a-trio[langgraph]``).

LangGraph runs on asyncio, so the graph runs through the asyncio bridge
(:mod:`a2a_trio.adapters.asyncio`). The graph's thread is the A2A context:
its checkpointer keeps each context's state under ``thread_id = contextId``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph, StateGraph
from langgraph.types import Command, Interrupt
from pydantic_core import to_jsonable_python

from ..protocol import Part, TaskState
from ..runtime.executor import RequestContext, TaskUpdater
from ._text import StreamedTextArtifact
from .asyncio import AsyncioAgentExecutor, AsyncioEventQueue

__all__ = ["LangGraphExecutor", "messages_input"]

#: The node name LangGraph reports an interrupt under, in the "updates" stream.
INTERRUPT = "__interrupt__"


def messages_input(context: RequestContext) -> dict[str, Any]:
    """The default graph input: the user's text as one message of a ``messages`` state."""
    return {"messages": [("user", context.user_text())]}


def resume_value(context: RequestContext) -> Any:
    """The default value an interrupt resumes with: the one data part's data, else the text."""
    parts = context.message.parts if context.message is not None else []
    if len(parts) == 1 and parts[0].text is None and parts[0].data is not None:
        return parts[0].data
    return context.user_text()


class LangGraphExecutor(AsyncioAgentExecutor):
    """Serves a LangGraph graph: one graph run per message, streamed.

    - A new task runs the graph on ``make_input(context)`` (by default
      :func:`messages_input`); the run's thread is the context
      (``configurable.thread_id = contextId``), so the checkpointer keeps the
      conversation of each context.
    - The AI messages the graph produces stream as artifacts: the tokens of a
      chat model as chunks (``append``, then ``lastChunk``), one artifact per
      message; messages a plain node returns arrive as one chunk.
    - Each node that finishes is a WORKING status update (its message says
      ``Node NAME finished``; the event's metadata holds ``{"node": NAME}``).
    - An interrupt (``langgraph.types.interrupt``, human in the loop) pauses
      the task in INPUT_REQUIRED with the interrupt's value as its status
      message. The client's next message with the same taskId resumes the
      graph with ``Command(resume=resume(context))`` (by default the message's
      text, or its one data part).
    - The task ends COMPLETED when the run ends, FAILED if it raises.

    ``graph`` is a compiled graph or a ``StateGraph``. Without a checkpointer
    of its own it gets ``checkpointer`` (default: an ``InMemorySaver``, which
    keeps threads in memory only; pass a durable saver to keep them across
    restarts).
    """

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any] | StateGraph[Any, Any, Any, Any],
        *,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        make_input: Callable[[RequestContext], Any] = messages_input,
        resume: Callable[[RequestContext], Any] = resume_value,
        artifact_name: str = "answer",
    ) -> None:
        if isinstance(graph, StateGraph):
            graph = graph.compile(checkpointer=checkpointer or InMemorySaver())
        elif graph.checkpointer is None or graph.checkpointer is False:
            graph = graph.copy(update={"checkpointer": checkpointer or InMemorySaver()})
        self.graph = graph
        self._make_input = make_input
        self._resume = resume
        self.artifact_name = artifact_name

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        current = context.current_task
        if current is None:
            await updater.submit()
        await updater.start_work()
        if current is not None and current.status.state == TaskState.INPUT_REQUIRED:
            graph_input: Any = Command(resume=self._resume(context))
        else:
            graph_input = self._make_input(context)
        config: Any = {"configurable": {"thread_id": context.context_id}}
        messages = _MessageArtifacts(updater, self.artifact_name)
        interrupts: list[Interrupt] = []
        # (mode, chunk) pairs, as two stream modes are asked for.
        stream: Any = self.graph.astream(graph_input, config, stream_mode=["updates", "messages"])
        async for mode, chunk in stream:
            if mode == "messages":
                message, _metadata = chunk
                await messages.add(message)
            elif mode == "updates":
                for node, update in chunk.items():
                    if node == INTERRUPT:
                        interrupts.extend(update)
                    else:
                        await updater.update_status(
                            TaskState.WORKING, f"Node {node} finished", metadata={"node": node}
                        )
        await messages.close()
        if interrupts:
            await updater.requires_input(_interrupt_parts(interrupts))
        else:
            await updater.complete()


def _interrupt_parts(interrupts: Sequence[Interrupt]) -> list[Part]:
    return [
        Part(text=value) if isinstance(value, str) else Part(data=to_jsonable_python(value))
        for value in (interrupt.value for interrupt in interrupts)
    ]


class _MessageArtifacts:
    """AI messages as artifacts: one per message id, its text streamed in chunks."""

    def __init__(self, updater: TaskUpdater, name: str) -> None:
        self._updater = updater
        self._name = name
        self._message_id: str | None = None
        self._artifact: StreamedTextArtifact | None = None

    async def add(self, message: BaseMessage) -> None:
        if not isinstance(message, AIMessage | AIMessageChunk):
            return
        text = message.text
        if not text:
            return
        if self._artifact is None or message.id != self._message_id or self._message_id is None:
            await self.close()
            self._message_id = message.id
            self._artifact = StreamedTextArtifact(self._updater, self._name)
        await self._artifact.add(text)

    async def close(self) -> None:
        if self._artifact is not None:
            await self._artifact.close()
        self._artifact = None
        self._message_id = None

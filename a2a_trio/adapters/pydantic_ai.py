"""Pydantic AI agents over A2A: :class:`PydanticAIExecutor` (extra ``a2a-trio[pydantic-ai]``).

Pydantic AI is built on anyio, but its agent loop calls asyncio directly (its
run lifecycle starts ``asyncio.create_task``s, its graph hands streams over
``asyncio.Queue``), so an agent does not run on Trio as it is: this executor
runs it through the asyncio bridge (:mod:`a2a_trio.adapters.asyncio`).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai import (
    AgentRunResultEvent,
    AudioUrl,
    BinaryContent,
    DocumentUrl,
    FunctionToolCallEvent,
    ImageUrl,
    ModelMessage,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    UserContent,
    VideoUrl,
)
from pydantic_ai.agent import AbstractAgent
from pydantic_core import to_jsonable_python

from ..protocol import Message, Part, TaskState
from ..runtime.executor import RequestContext, TaskUpdater
from ._text import StreamedTextArtifact
from .asyncio import AsyncioAgentExecutor, AsyncioEventQueue

__all__ = ["PydanticAIExecutor", "user_content"]


class PydanticAIExecutor(AsyncioAgentExecutor):
    """Serves a Pydantic AI agent: one agent run per message, streamed.

    - The user's message becomes the run's prompt (:func:`user_content`:
      text, files by URL or bytes, data as JSON).
    - The model's text streams as chunks of one artifact (``artifact_name``),
      the first with ``append=False``, the rest appended, the last marked
      ``lastChunk``; they concatenate to the model's text. Output that is not
      a string is added as a data artifact (``output``).
    - Each tool call is reported as a WORKING status message (its text names
      the tool; a data part holds ``{"tool", "toolCallId", "arguments"}``).
    - The conversation is kept per contextId: a later message in the same
      context runs with the earlier runs' messages as ``message_history``.
      It is held in memory (the ``max_contexts`` most recent contexts) and
      does not survive a restart.
    - The task ends COMPLETED, or FAILED with the error if the run raises.

    ``deps`` makes the run's dependencies from the request, when the agent has any.
    """

    def __init__(
        self,
        agent: AbstractAgent[Any, Any],
        *,
        deps: Callable[[RequestContext], Any] | None = None,
        artifact_name: str = "answer",
        max_contexts: int = 1024,
    ) -> None:
        self.agent = agent
        self._deps = deps
        self.artifact_name = artifact_name
        self.max_contexts = max_contexts
        self._conversations: OrderedDict[str, list[ModelMessage]] = OrderedDict()

    def conversation(self, context_id: str) -> list[ModelMessage]:
        """The messages of the context's runs so far (empty for a new context)."""
        return list(self._conversations.get(context_id, ()))

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        text = StreamedTextArtifact(updater, self.artifact_name)
        result: Any = None
        async with self.agent.run_stream_events(
            user_content(context.message),
            message_history=self._conversations.get(context.context_id),
            deps=self._deps(context) if self._deps is not None else None,
        ) as events:
            async for event in events:
                if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                    await text.add(event.part.content)
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                    await text.add(event.delta.content_delta)
                elif isinstance(event, FunctionToolCallEvent):
                    await _report_tool_call(updater, event)
                elif isinstance(event, AgentRunResultEvent):
                    result = event.result
        await text.close()
        assert result is not None, "the agent run ended without its result"
        self._remember(context.context_id, result.all_messages())
        if not isinstance(result.output, str):
            await updater.add_artifact(Part(data=to_jsonable_python(result.output)), name="output")
        await updater.complete()

    def _remember(self, context_id: str, messages: list[ModelMessage]) -> None:
        self._conversations[context_id] = messages
        self._conversations.move_to_end(context_id)
        while len(self._conversations) > self.max_contexts:
            self._conversations.popitem(last=False)


def user_content(message: Message | None) -> str | list[UserContent]:
    """A message's parts as a Pydantic AI prompt.

    A message of text parts only is their text, joined by newlines. Otherwise
    each part is one item: text as is, data as JSON text, a file by URL as the
    URL kind its media type says, raw bytes as ``BinaryContent``.
    """
    if message is None:
        return ""
    if all(part.text is not None for part in message.parts):
        return "\n".join(part.text for part in message.parts if part.text is not None)
    return [_content(part) for part in message.parts]


def _content(part: Part) -> UserContent:
    if part.text is not None:
        return part.text
    media_type = part.media_type or ""
    if part.raw is not None:
        return BinaryContent(data=part.raw, media_type=media_type or "application/octet-stream")
    if part.url is not None:
        if media_type.startswith("image/"):
            return ImageUrl(part.url, media_type=part.media_type)
        if media_type.startswith("audio/"):
            return AudioUrl(part.url, media_type=part.media_type)
        if media_type.startswith("video/"):
            return VideoUrl(part.url, media_type=part.media_type)
        return DocumentUrl(part.url, media_type=part.media_type)
    return json.dumps(part.data, ensure_ascii=False)


async def _report_tool_call(updater: TaskUpdater, event: FunctionToolCallEvent) -> None:
    call = event.part
    parts: Sequence[Part] = [
        Part(text=f"Calling tool {call.tool_name}"),
        Part(
            data={
                "tool": call.tool_name,
                "toolCallId": call.tool_call_id,
                "arguments": to_jsonable_python(call.args_as_dict()),
            }
        ),
    ]
    await updater.update_status(TaskState.WORKING, parts)

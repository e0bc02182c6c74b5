"""The text of an agent's answer: what its events, tasks and messages carry."""

from __future__ import annotations

from collections.abc import AsyncIterable, Sequence

from ..protocol import Message, Part, StreamResponse, Task

__all__ = ["answer_text", "text_of"]


def text_of(response: StreamResponse | Task | Message) -> str:
    """The answer text an event carries.

    An artifact update gives its parts' text; a task, the text of every
    artifact's parts; a message, its own text parts.
    """
    if isinstance(response, StreamResponse):
        if response.artifact_update is not None:
            return _texts(response.artifact_update.artifact.parts)
        if response.task is not None:
            return text_of(response.task)
        if response.message is not None:
            return text_of(response.message)
        return ""
    if isinstance(response, Task):
        return "".join(_texts(artifact.parts) for artifact in response.artifacts or [])
    return _texts(response.parts)


def _texts(parts: Sequence[Part]) -> str:
    return "".join(part.text for part in parts if part.text is not None)


async def answer_text(events: AsyncIterable[StreamResponse]) -> str:
    """The whole answer of a send: every event's text, in order."""
    return "".join([text_of(event) async for event in events])

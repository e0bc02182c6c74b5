"""A model's streamed text as one artifact, for the framework adapters."""

from __future__ import annotations

from ..runtime.executor import TaskUpdater

__all__ = ["StreamedTextArtifact"]


class StreamedTextArtifact:
    """Text chunks as chunks of one artifact; the last chunk is held back
    until the next arrives (or :meth:`close`), so it can be marked ``lastChunk``."""

    def __init__(self, updater: TaskUpdater, name: str) -> None:
        self._updater = updater
        self._name = name
        self._artifact_id: str | None = None
        self._held: str | None = None

    async def add(self, text: str) -> None:
        if not text:
            return
        if self._held is not None:
            await self._send(self._held, last=False)
        self._held = text

    async def close(self) -> None:
        if self._held is not None:
            await self._send(self._held, last=True)
            self._held = None

    async def _send(self, text: str, *, last: bool) -> None:
        self._artifact_id = await self._updater.add_artifact(
            text,
            artifact_id=self._artifact_id,
            name=self._name,
            append=self._artifact_id is not None,
            last_chunk=last,
        )

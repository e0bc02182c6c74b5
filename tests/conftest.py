"""Shared fixtures: a live a2a-trio server on a real 127.0.0.1 socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from a2a_trio import A2AApp, AgentCard
from a2a_trio.protocol import AgentCapabilities, AgentSkill

# The fresh PostgreSQL database fixture (skipped where no server answers).
pytest_plugins = ["tests.postgres"]

VERSION_HEADERS = {"A2A-Version": "1.0"}


def make_card(**overrides: Any) -> AgentCard:
    """A valid card for tests; keyword arguments replace its fields."""
    fields: dict[str, Any] = {
        "name": "Test Agent",
        "description": "An agent used by the test suite.",
        "version": "1.0.0",
        "capabilities": AgentCapabilities(streaming=True, push_notifications=True),
        "default_input_modes": ["text/plain"],
        "default_output_modes": ["text/plain"],
        "skills": [AgentSkill(id="test", name="Test", description="Tests.", tags=["test"])],
    }
    fields.update(overrides)
    return AgentCard(**fields)


@dataclass
class LiveServer:
    """A running app and an HTTP client pointed at it."""

    app: A2AApp
    url: str
    client: httpx.AsyncClient

    async def jsonrpc(
        self, method: str, params: dict[str, Any] | None = None, *, prefix: str = "", **kw: Any
    ) -> dict[str, Any]:
        """POST one JSON-RPC call and return the decoded response body."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        response = await self.client.post(f"{prefix}/jsonrpc", json=body, **kw)
        result: dict[str, Any] = response.json()
        return result

    async def rest(self, method: str, path: str, *, prefix: str = "", **kw: Any) -> httpx.Response:
        return await self.client.request(method, f"{prefix}/rest{path}", **kw)

    async def sse(self, method: str, path: str, **kw: Any) -> list[dict[str, Any]]:
        """Read a whole SSE response; returns each frame's decoded ``data``."""
        frames: list[dict[str, Any]] = []
        async with self.client.stream(method, path, **kw) as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    frames.append(json.loads(line[5:]))
        return frames


@asynccontextmanager
async def live_server(
    tmp_path: Path, configure: Callable[[A2AApp], None], **app_kwargs: Any
) -> AsyncIterator[LiveServer]:
    """Serve an app (mounted by ``configure``) on a free port until the block ends."""
    app = A2AApp(database=tmp_path / "a2a.db", **app_kwargs)
    configure(app)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(
                app, config, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        url = binds[0]
        async with httpx.AsyncClient(base_url=url, headers=VERSION_HEADERS, timeout=10.0) as client:
            try:
                yield LiveServer(app, url, client)
            finally:
                stop.set()


def user_message(text: str, **fields: Any) -> dict[str, Any]:
    """A ProtoJSON user message with a fresh id."""
    import uuid

    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    message.update(fields)
    return message


@pytest.fixture
def anyio_backend() -> str:
    return "trio"

"""Shared fixtures: a live a2a-trio server on a real 127.0.0.1 socket."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from hypercorn.config import Config
from hypercorn.trio import serve

from a2a_trio import A2AApp, AgentCard
from a2a_trio.protocol import AgentCapabilities, AgentSkill

from .agents import ScriptedExecutor

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
async def served(app: Any, config: Config) -> AsyncIterator[str]:
    """Serve ``app`` by hypercorn's trio worker as ``config`` says until the block ends.

    Yields the first address it is bound to.
    """
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(
                app, config, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        try:
            yield binds[0]
        finally:
            stop.set()


@asynccontextmanager
async def live_server(
    tmp_path: Path, configure: Callable[[A2AApp], object], **app_kwargs: Any
) -> AsyncIterator[LiveServer]:
    """Serve an app (mounted by ``configure``) on a free port until the block ends.

    The app's database is ``tmp_path/a2a.db`` unless ``database=`` names another.
    """
    app_kwargs.setdefault("database", tmp_path / "a2a.db")
    app = A2AApp(**app_kwargs)
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


@asynccontextmanager
async def scripted_root_server(
    tmp_path: Path, executor: ScriptedExecutor, **app_kwargs: Any
) -> AsyncIterator[LiveServer]:
    """``executor`` at the root with the test card, its count of executions zeroed, served."""
    executor.executions = 0

    def mount(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=executor)

    async with live_server(tmp_path, mount, **app_kwargs) as live:
        yield live


def user_message(text: str, **fields: Any) -> dict[str, Any]:
    """A ProtoJSON user message with a fresh id."""
    import uuid

    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    message.update(fields)
    return message


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


def worker_aware(
    clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> trio.testing.MockClock:
    """``clock``, kept from jumping while a worker thread runs.

    The PostgreSQL store runs every query in a worker thread, and trio counts a
    task waiting for a thread as blocked: an autojumping clock would jump to the
    next deadline in the middle of a query, as if it had taken that long. Every
    ``trio.to_thread.run_sync`` of the test turns autojump off until it returns.
    """
    idle_threshold = clock.autojump_threshold
    running = 0
    run_sync = trio.to_thread.run_sync

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal running
        running += 1
        clock.autojump_threshold = math.inf
        try:
            return await run_sync(*args, **kwargs)
        finally:
            running -= 1
            if not running:
                clock.autojump_threshold = idle_threshold

    monkeypatch.setattr(trio.to_thread, "run_sync", counted)
    return clock


@pytest.fixture
def autojump_clock(monkeypatch: pytest.MonkeyPatch) -> trio.testing.MockClock:
    """pytest-trio's autojump clock, which waits for worker threads (see ``worker_aware``)."""
    return worker_aware(trio.testing.MockClock(autojump_threshold=0), monkeypatch)

"""A live server with the console attached, and a feed client over trio-websocket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from trio_websocket import WebSocketConnection, open_websocket_url

from a2a_trio import A2AApp
from a2a_trio.console import Console, ConsoleSettings, attach_console

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card

TOKEN = "operator-token"


@asynccontextmanager
async def console_server(
    tmp_path: Path,
    *,
    settings: ConsoleSettings | None = None,
    mode: str = "development",
    configure: Callable[[A2AApp], None] | None = None,
    **app_kwargs: Any,
) -> AsyncIterator[tuple[LiveServer, Console, ScriptedExecutor]]:
    """The scripted agent at the root, with a console (token ``TOKEN`` unless ``settings``)."""
    executor = ScriptedExecutor()
    consoles: list[Console] = []

    def setup(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=executor, name="scripted")
        if configure is not None:
            configure(app)
        consoles.append(attach_console(app, settings or ConsoleSettings(token=TOKEN), mode=mode))

    async with live_server(tmp_path, setup, **app_kwargs) as server:
        yield server, consoles[0], executor


def feed_url(server: LiveServer, query: str = "") -> str:
    return server.url.replace("http://", "ws://") + "/_a2a/feed" + (f"?{query}" if query else "")


@asynccontextmanager
async def feed(
    server: LiveServer, query: str = "", token: str = TOKEN
) -> AsyncIterator[WebSocketConnection]:
    """A feed connection whose hello has been read."""
    async with open_websocket_url(
        feed_url(server, query), extra_headers=[(b"Authorization", f"Bearer {token}".encode())]
    ) as ws:
        hello = json.loads(await ws.get_message())
        assert hello["kind"] == "feed.hello"
        yield ws


async def events_until(
    ws: WebSocketConnection, done: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """Feed events up to and including the first for which ``done`` is true."""
    events: list[dict[str, Any]] = []
    while True:
        for line in (await ws.get_message()).splitlines():  # a message holds 1+ events
            event = json.loads(line)
            events.append(event)
            if done(event):
                return events

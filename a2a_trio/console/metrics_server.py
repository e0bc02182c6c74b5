"""``/metrics`` of a process that serves no HTTP otherwise (``a2a-trio worker --metrics-bind``).

A tiny ASGI app served by hypercorn's trio worker beside the queue worker: it
answers ``GET`` of the console's ``metrics_path`` with the same text a web
process serves (asking for ``metrics_token`` when one is set), and 404 to
anything else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from .access import token_matches
from .web import METRICS_CONTENT_TYPE, Console

__all__ = ["serve_metrics"]


def metrics_app(console: Console) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """The ASGI app answering the console's metrics path."""
    path = console.settings.metrics_path
    wanted = console.settings.metrics_token

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        authorization = next(
            (
                value.decode("latin-1")
                for name, value in scope["headers"]
                if name == b"authorization"
            ),
            None,
        )
        if scope["path"] != path or scope["method"] not in ("GET", "HEAD"):
            status, body, content_type = 404, b"not found\n", "text/plain"
        elif wanted is not None and not token_matches(wanted, authorization):
            status, body, content_type = 401, b"a bearer token is required\n", "text/plain"
        else:
            status, body, content_type = 200, await console.render_metrics(), METRICS_CONTENT_TYPE
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", content_type.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


async def serve_metrics(
    console: Console,
    bind: str,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``/metrics`` on ``bind`` (``host:port``) until cancelled.

    Started with the addresses served; a port in use raises ``OSError`` before.
    """
    config = Config()
    config.bind = [bind]
    config.accesslog = None
    config.errorlog = None
    await serve(metrics_app(console), config, task_status=task_status)

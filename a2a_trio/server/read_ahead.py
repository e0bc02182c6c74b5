"""Bodies of the routes Quart serves, read in full before Quart sees the request.

The protocol routes read their bodies under ``server.body_timeout``, the body
budget and ``server.max_body_bytes`` (see :mod:`.asgi`). Quart reads a body
only when a view asks for it, and under no deadline: a body trickled to
``/metrics``, ``/_a2a/*`` or a path no route has held its connection, and
what it sent, for as long as it trickled (150 s measured, issue 31), 1,100
of them shutting out every other client of a 1,024-descriptor process. Here
every request Quart serves has its body read first, under the same three
limits, and Quart gets it replayed: 408, 413 or 503 otherwise, in the JSON
shape of the app's other routing errors.

Reading it first also keeps clear of a quart-trio fault: a POST with a body
to a route Quart answers without reading it (a 404, a 405) went unanswered
1-2 % of the time under 16 keep-alive clients (docs/upstream/quart-trio-unread-body.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol import A2AError
from .asgi import ClientGone, ProtocolRequest, Receive, Scope, Send
from .bindings import ServerSettings, rest_error
from .body_budget import BodyBudget

__all__ = ["serve_read_ahead"]

#: The ASGI app to hand the request to (Quart's own ``__call__``).
App = Callable[..., Awaitable[None]]


class _Replay:
    """An ASGI ``receive`` that gives the body read ahead, then the request's own messages."""

    def __init__(self, body: bytes, receive: Receive) -> None:
        self._first: dict[str, Any] | None = {
            "type": "http.request",
            "body": body,
            "more_body": False,
        }
        self._receive = receive

    async def __call__(self) -> dict[str, Any]:
        first, self._first = self._first, None
        if first is not None:
            return first
        return await self._receive()


async def serve_read_ahead(
    app: App,
    scope: Scope,
    receive: Receive,
    send: Send,
    settings: ServerSettings,
    budget: BodyBudget,
) -> None:
    """Read the request's body within the app's limits, then let ``app`` serve the request.

    The body's share of ``budget`` is held while ``app`` serves it (the body
    stays in memory until then); a request without a body holds none.
    """
    with budget.share() as share:
        request = ProtocolRequest(scope, receive, share)
        try:
            body = await request.body(settings.max_body_bytes, settings.body_timeout)
        except ClientGone:
            return
        except A2AError as error:
            refusal = rest_error(error)
            await (refusal.closing() if request.must_close else refusal).send(send, receive)
            return
        await app(scope, _Replay(body, receive), send)

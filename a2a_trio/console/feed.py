"""The console's live feed: the hub's events over a WebSocket, a line per event.

A client names what it wants (:class:`~.events.FeedFilter`) and where it left
off (``after``, ``epoch``); what piled up while the last message was sent goes
in one message. A client that stops reading is cut off; the server's shutdown
ends every feed at once.
"""

from __future__ import annotations

import json

import trio
from quart import Response, websocket

from ..server import A2AApp
from .access import Access, unauthorized
from .events import FeedFilter
from .hub import FeedHub, Subscriber
from .responses import error_response

__all__ = [
    "CLOSE_GOING_AWAY",
    "CLOSE_TOO_SLOW",
    "COALESCE",
    "MESSAGE_EVENTS",
    "SEND_TIMEOUT",
    "Feed",
]

#: A feed client that has not taken one event in this long is cut off.
SEND_TIMEOUT = 10.0
#: Events one WebSocket message may carry (one JSON object per line).
MESSAGE_EVENTS = 256
#: The least time between two messages to one feed client, in seconds.
COALESCE = 0.1
#: The close code of a dropped subscriber: "try again later" (RFC 6455 7.4.1 registry).
CLOSE_TOO_SLOW = 1013
#: The close code when the server shuts down: "going away".
CLOSE_GOING_AWAY = 1001


class Feed:
    """The WebSocket view of ``hub`` on ``app``, for the operators ``access`` admits."""

    def __init__(self, app: A2AApp, hub: FeedHub, access: Access) -> None:
        self._app = app
        self._hub = hub
        self._access = access

    async def serve(self) -> Response | None:
        """Serve one feed client until it goes, falls behind, or the server stops."""
        args = websocket.args
        authorization = websocket.headers.get("Authorization")
        if authorization is None and args.get("token"):  # browsers cannot set headers
            authorization = f"Bearer {args['token']}"
        if not await self._access.is_operator(authorization):
            return unauthorized()
        try:
            wanted = FeedFilter.parse(args)
            after = int(args["after"]) if args.get("after") else None
        except ValueError as error:
            return error_response(400, "INVALID_ARGUMENT", str(error))
        await websocket.accept()
        subscriber = self._hub.subscribe(wanted, after=after, epoch=args.get("epoch"))
        try:
            await websocket.send(json.dumps(self._hub.hello()))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_closed, nursery.cancel_scope)
                nursery.start_soon(self._until_stopping, subscriber)
                while True:
                    try:
                        texts = await subscriber.next(MESSAGE_EVENTS)
                    except trio.EndOfChannel:
                        break
                    # What piled up while the last message was sent goes in one
                    # message, a line per event: a busy feed costs few frames.
                    with trio.move_on_after(SEND_TIMEOUT) as sending:
                        await websocket.send("\n".join(texts))
                    if sending.cancelled_caught:  # the connection is cut, not closed
                        subscriber.drop("stopped reading", slow=True)
                        return None
                    # An idle feed sends each event at once; a busy one at most
                    # every COALESCE seconds, so readers cost the server little
                    # (a full message goes on at once: the client keeps up).
                    if len(texts) < MESSAGE_EVENTS:
                        await trio.sleep(COALESCE)
                reason = subscriber.dropped or "dropped"
                code = CLOSE_GOING_AWAY if self._app.stopping.is_set() else CLOSE_TOO_SLOW
                with trio.move_on_after(SEND_TIMEOUT):
                    await websocket.close(code, reason[:120])
                nursery.cancel_scope.cancel()
        finally:
            subscriber.close()
        return None

    async def _until_stopping(self, subscriber: Subscriber) -> None:
        # The server's shutdown ends the feed at once (clients resume elsewhere or later).
        await self._app.stopping.wait()
        subscriber.drop("the server is shutting down")

    @staticmethod
    async def _until_closed(scope: trio.CancelScope) -> None:
        # Whatever the client sends is ignored; reading it notices the close.
        while True:
            await websocket.receive()

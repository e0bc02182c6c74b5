"""An app's HTTP requests answered straight from ASGI, or handed to Quart.

Protocol requests (JSON-RPC, HTTP+JSON, gRPC) and GET of a card, the most
frequent requests, are answered here without Quart's routing and request
objects (see :mod:`a2a_trio.server.asgi`); a Host the settings do not allow is
refused first; everything else goes to Quart, its body read under the same
limits (:mod:`a2a_trio.server.read_ahead`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from ..protocol import InvalidRequestError
from .asgi import (
    A2A_JSON_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    ClientGone,
    EventStreamBody,
    ProtocolRequest,
    ProtocolResponse,
    answers_a2a_json,
)
from .bindings import (
    VERSION_HEADER,
    ServerSettings,
    base_url,
    handle_jsonrpc,
    handle_rest,
    rest_error,
)
from .body_budget import BodyBudget
from .cards import card_response
from .grpc_binding import is_grpc, serve_grpc
from .grpc_services import is_standard_service, serve_standard_service
from .hosts import host_allowed
from .mount import AgentMount
from .read_ahead import App, serve_read_ahead
from .routing import ProtocolRoute, Routes

__all__ = ["Dispatch", "RequestObserver"]

#: Told of every protocol request once answered (before a stream is relayed):
#: agent, binding (``jsonrpc``, ``rest`` or ``grpc``), operation, outcome (``ok``, an
#: error's reason, or ``client_gone``) and the seconds it took.
RequestObserver = Callable[[str, str, str, str, float], None]


class Dispatch:
    """Answers the HTTP requests of an app whose agents are ``mounts``, routed by ``routes``.

    ``budget`` holds the bodies being read; ``takes_work`` is the readiness
    check, as gRPC health reports it; ``quart`` answers what is not the agents'.
    """

    def __init__(
        self,
        routes: Routes,
        mounts: Mapping[str, AgentMount],
        settings: ServerSettings,
        budget: BodyBudget,
        takes_work: Callable[[], Awaitable[bool]],
        quart: App,
    ) -> None:
        self._routes = routes
        self._mounts = mounts
        self._settings = settings
        self._budget = budget
        self._takes_work = takes_work
        self._quart = quart
        #: Told of every protocol request (the metrics); see :data:`RequestObserver`.
        self.observer: RequestObserver | None = None
        #: Event streams (SSE) being relayed now.
        self.open_streams = 0

    async def http(self, scope: Any, receive: Any, send: Any) -> None:
        """Answer one HTTP request."""
        if self._host_refused(scope):
            request = ProtocolRequest(scope, receive)
            refusal = InvalidRequestError(f"This server does not serve {request.header('host')}")
            await rest_error(refusal).send(send, receive)
            return
        if is_grpc(scope):
            if is_standard_service(scope["path"]):
                await serve_standard_service(scope, receive, send, self._takes_work)
                return
            guard = next((m for m in self._mounts.values() if m.grpc and m.secured), None)
            await serve_grpc(
                scope,
                receive,
                send,
                self._routes.grpc,
                self._settings,
                self.observer,
                self._budget,
                guard,
            )
            return
        route = self._routes.protocol(scope["path"])
        if route is not None:
            await self._serve_protocol(route, scope, receive, send)
            return
        card_route = self._routes.card(scope["path"])
        if card_route is not None and scope["method"] == "GET":
            await self._serve_card(*card_route, scope, receive, send)
            return
        # Quart's routes read their bodies under the protocol routes' limits.
        await serve_read_ahead(self._quart, scope, receive, send, self._settings, self._budget)

    def _host_refused(self, scope: Any) -> bool:
        """A Host ``server.allowed_hosts`` does not list, where cards would echo it."""
        settings = self._settings
        if not settings.allowed_hosts or settings.public_url:
            return False
        host = next((v for k, v in scope["headers"] if k == b"host"), None)
        return not host_allowed(
            None if host is None else host.decode("latin-1"), settings.allowed_hosts
        )

    async def _serve_card(
        self, mount: AgentMount, v0_3: bool, scope: Any, receive: Any, send: Any
    ) -> None:
        """GET of a card, the most frequent request after messages (clients poll it)."""
        request = ProtocolRequest(scope, receive)
        version = request.header(VERSION_HEADER)
        if version is None:
            version = request.query.get(VERSION_HEADER)
        status, body, headers = card_response(
            mount.card,
            base_url(request, self._settings),
            request.header("If-None-Match"),
            v0_3=v0_3 or mount.card_is_v0_3(version),
            negotiated=mount.compat_v0_3 and not v0_3,
        )
        content_type = JSON_CONTENT_TYPE if status == 200 else None
        await ProtocolResponse(status, body, content_type, headers).send(send, receive)

    async def _serve_protocol(
        self, route: ProtocolRoute, scope: Any, receive: Any, send: Any
    ) -> None:
        began = time.perf_counter()
        # The body's share of the budget is held until the answer is ready:
        # a stream relays its events without it.
        with self._budget.share() as share:
            request = ProtocolRequest(scope, receive, share)
            response = await self._answer(route, request)
        if response is not None and request.must_close:
            response = response.closing()
        if (
            response is not None
            and response.content_type == JSON_CONTENT_TYPE
            and answers_a2a_json(request.header("Accept"))
        ):
            response = replace(response, content_type=A2A_JSON_CONTENT_TYPE)
        if self.observer is not None:
            mount, rest_path = route
            self.observer(
                mount.name,
                "jsonrpc" if rest_path is None else "rest",
                request.operation,
                request.outcome if response is not None else "client_gone",
                time.perf_counter() - began,
            )
        disconnect = request.disconnect
        del request  # a stream holds only what it relays
        if response is None:
            return
        streaming = isinstance(response.body, EventStreamBody)
        self.open_streams += streaming
        try:
            await response.send(send, receive, disconnect)
        finally:
            self.open_streams -= streaming

    async def _answer(
        self, route: ProtocolRoute, request: ProtocolRequest
    ) -> ProtocolResponse | None:
        mount, rest_path = route
        try:
            if rest_path is None:
                return await handle_jsonrpc(request, mount, self._settings)
            return await handle_rest(request, mount, self._settings, rest_path)
        except ClientGone:
            return None

"""The operator console on an app: the feed, the page, its JSON endpoints and ``/metrics``.

:func:`attach_console` adds the routes to an :class:`~a2a_trio.server.A2AApp`
and makes the console the observer of every agent's host and of the push
worker. Everything under the console path asks for the console's bearer
token; protocol credentials (any security scheme of the cards) never open
it, and nothing it serves holds a credential or a webhook's secret.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Literal

import trio
from quart import Response, request, websocket

from ..protocol import A2AError, CancelTaskRequest, TaskState
from ..runtime.execution_log import ExecutionLog
from ..runtime.executor import Principal
from ..server import A2AApp, Authenticator
from ..server.auth import AuthenticationFailed, RequestCredentials
from ..store import Delivery, Notification, Share
from ..store.observer import Observer
from .cluster_feed import ClusterFeed
from .events import FeedFilter
from .fleet_view import deployment_counters, members, served_address, webhook_hosts
from .hub import FeedHub, Subscriber
from .metrics import Metrics

__all__ = ["Console", "ConsoleSettings", "attach_console", "console_of", "ensure_console"]

log = logging.getLogger("a2a_trio.console")

_EXTENSION = "a2a_trio.console"
_ASSETS = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}
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
_MAX_PAGE = 500
#: Where a console token made up in development mode is kept for the whole deployment.
_TOKEN_SETTING = "console_token"
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class ConsoleSettings:
    """The ``[console]`` section (docs/console.md)."""

    #: False: no console, no feed (``/metrics`` is governed by ``metrics``).
    enabled: bool = True
    path: str = "/_a2a"
    #: The operators' bearer token; None (and no scheme): a random one in
    #: development mode, no console in production mode.
    token: str | None = None
    #: Or: a security scheme of the configuration (its credentials in the
    #: ``Authorization`` header: bearer, jwt, basic) whose principals holding
    #: ``scope`` are operators.
    scheme: str | None = None
    scope: str | None = None
    metrics: bool = True
    metrics_path: str = "/metrics"
    #: A bearer token for ``/metrics``; None: it is open, unless an agent's
    #: card declares security schemes: then it asks for the operators'
    #: credentials (the console's token, or its scheme and scope).
    metrics_token: str | None = None
    #: Feed events kept for resuming clients (at least ``buffer``), and how
    #: many events a client may fall behind the feed before it is dropped.
    backlog: int = 10_000
    buffer: int = 1_000


class _Fanout(Observer):
    """Tells every observer, and keeps a failing one from reaching the recorder's loop."""

    def __init__(self, *observers: Observer) -> None:
        self._observers = list(observers)

    def add(self, observer: Observer) -> None:
        self._observers.append(observer)

    def _each(self, method: str, *args: Any) -> None:
        for observer in self._observers:
            try:
                getattr(observer, method)(*args)
            except Exception:
                log.exception("console: %s.%s failed", type(observer).__name__, method)

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        self._each("committed", agent, share, owner, seconds)

    def attempted(
        self,
        notification: Notification,
        outcome: Literal["delivered", "retry", "failed", "abandoned"],
        status: int | None,
        error: str | None,
    ) -> None:
        self._each("attempted", notification, outcome, status, error)

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        self._each("execution_started", agent, task_id, owner)

    def execution_ended(self, agent: str, task_id: str, owner: str, error: str | None) -> None:
        self._each("execution_ended", agent, task_id, owner, error)


class _EventRate(Observer):
    """Counts the task events this process commits (not those read back from others)."""

    def __init__(self, rate: _Rate) -> None:
        self._rate = rate

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        self._rate.add(len(share.events))


class _Rate:
    """Events per second over the last few seconds."""

    def __init__(self, window: int = 5) -> None:
        self._window = window
        self._buckets: deque[list[int]] = deque()

    def add(self, count: int = 1) -> None:
        second = int(time.monotonic())
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += count
        else:
            self._buckets.append([second, count])
            while len(self._buckets) > self._window + 1:
                self._buckets.popleft()

    def per_second(self) -> float:
        now = int(time.monotonic())
        total = sum(count for second, count in self._buckets if now - self._window <= second < now)
        return total / self._window


class Console:
    """One app's console: its hub, its metrics and its routes."""

    def __init__(
        self,
        app: A2AApp,
        settings: ConsoleSettings,
        *,
        mode: str,
        authenticators: Mapping[str, Authenticator] | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        #: The security scheme whose principals with ``settings.scope`` are operators.
        self.scheme: Authenticator | None = None
        if settings.scheme is not None:
            if settings.scope is None:
                raise ValueError("console.scope: required with console.scheme")
            if settings.scheme not in (authenticators or {}):
                raise ValueError(
                    f"console.scheme: {settings.scheme!r} is not one of the security schemes"
                )
            self.scheme = (authenticators or {})[settings.scheme]
        self.path = "/" + settings.path.strip("/") if settings.path.strip("/") else ""
        self.hub = FeedHub(backlog=settings.backlog, buffer=settings.buffer)
        self.metrics = Metrics() if settings.metrics else None
        self.messages = _Rate()
        self.events = _Rate()
        #: The token operators present; None while the console is off.
        self.token = settings.token
        self._executions_logged = False
        #: Whether this process logs the console's URL (one of a deployment's does).
        self._announced = True
        #: Whether the token was made up at start (development mode without one).
        self.generated = False
        #: Where the app is served, for the URL logged at start (``a2a-trio serve`` sets it).
        self.base_url: str | None = app.a2a_settings.public_url
        configured = self.token is not None or self.scheme is not None
        self.on = settings.enabled and (configured or mode == "development")
        if self.on and not configured:
            self.token = secrets.token_urlsafe(24)
            self.generated = True

    # --- wiring -------------------------------------------------------------------------

    def attach(self) -> None:
        app = self.app
        app.extensions[_EXTENSION] = self
        observers: list[Observer] = [_EventRate(self.events)]
        if self.on:
            observers.append(self.hub)
        if self.metrics is not None:
            observers.append(self.metrics)
        observer = _Fanout(*observers)
        metrics = self.metrics

        def on_request(
            agent: str, binding: str, operation: str, outcome: str, seconds: float
        ) -> None:
            if operation in ("SendMessage", "SendStreamingMessage"):
                self.messages.add()
            if metrics is not None:
                metrics.request(agent, binding, operation, outcome, seconds)

        app.request_observer = on_request
        app.push.observer = observer

        self.observer = observer
        app.on_start.append(self._start)

        async def announce() -> None:  # serving only: a worker has no console to open
            self._announce()

        app.before_serving(announce)
        if self.metrics is not None:
            app.add_url_rule(
                self.settings.metrics_path, "a2a.console.metrics", self._metrics, methods=["GET"]
            )
        if not self.on:
            return
        base = self.path
        routes: list[tuple[str, str, Any, list[str]]] = [
            ("/console", "page", self._page, ["GET"]),
            ("/console/<name>", "asset", self._asset, ["GET"]),
            ("/api/agents", "agents", self._agents, ["GET"]),
            ("/api/tasks", "tasks", self._tasks, ["GET"]),
            ("/api/tasks/<agent>/<path:task_id>/cancel", "cancel", self._cancel, ["POST"]),
            ("/api/tasks/<agent>/<path:task_id>", "task", self._task, ["GET"]),
            ("/api/deliveries", "deliveries", self._deliveries, ["GET"]),
            ("/api/deliveries/<int:outbox_id>/redrive", "redrive", self._redrive, ["POST"]),
            ("/api/counters", "counters", self._counters, ["GET"]),
            ("/api/members", "members", self._members, ["GET"]),
        ]
        for rule, name, view, methods in routes:
            app.add_url_rule(f"{base}{rule}", f"a2a.console.{name}", view, methods=methods)
        app.add_websocket(f"{base}/feed", "a2a.console.feed", self._feed)

    async def _start(self) -> None:
        """At start (serving or working): observe every host, join the cluster's view.

        On PostgreSQL a token made up in development mode is the deployment's
        (kept in the database), so every process takes the same one; its URL
        is logged by one of the live web processes (the first to start, and
        after it died, the next one to start).
        """
        app = self.app
        for mount in app.mounts.values():
            mount.host.observe(self.observer)
        if app.role == "worker" and not self._executions_logged:
            self._executions_logged = True  # a line per execution, for the workers' operators
            self.observer.add(ExecutionLog())
        cluster = app.cluster
        if cluster is not None:
            cluster.stats = self.member_stats
            if self.on:  # what the other processes record too
                cluster.watch(ClusterFeed(self.hub, app.store))
            if self.generated and app.role == "web":
                self.token, _ = await cluster.coordination.shared_setting(
                    _TOKEN_SETTING, self.token or secrets.token_urlsafe(24)
                )
                self._announced = await cluster.coordination.claim_duty("console link")

    def member_stats(self) -> dict[str, float]:
        """This process's share of the deployment's counters (reported with its heartbeat)."""
        return {
            "messagesPerSecond": self.messages.per_second(),
            "eventsPerSecond": self.events.per_second(),
            "runningExecutions": sum(m.host.executions_running for m in self.app.mounts.values()),
            "openStreams": self.app.open_streams,
            "feedSubscribers": len(self.hub.subscribers),
        }

    async def render_metrics(self) -> bytes:
        """The Prometheus exposition text of this process (``/metrics``)."""
        assert self.metrics is not None
        return await self.metrics.render(self.app, self.hub)

    def url(self, base: str | None = None) -> str:
        """The console page's address with the token (in the fragment, never sent to logs)."""
        root = (base or self.base_url or "").rstrip("/")
        return f"{root}{self.path}/console#token={self.token}"

    def _announce(self) -> None:
        operators = self.token is not None or self.scheme is not None
        metrics_for_operators = self.settings.metrics_token is None and self._metrics_guarded()
        if self.metrics is not None and metrics_for_operators and not operators:
            log.warning(
                "%s answers no one: the agents declare security schemes, so it asks for"
                " the console's credentials, and there are none; set [console]"
                " metrics_token (see docs/metrics.md)",
                self.settings.metrics_path,
            )
        if not self.on:
            log.warning(
                "console off: production mode and no [console] token or scheme set "
                "(see docs/console.md)"
            )
        elif self.generated and self._announced:
            base = self.base_url or served_address() or "http://<this server>"
            shared = " (every process of the database takes it)" if self.app.cluster else ""
            log.warning(
                "console (development mode, a token made up for this deployment%s): %s",
                shared,
                self.url(base),
            )

    # --- access -------------------------------------------------------------------------

    async def _is_operator(self, authorization: str | None) -> bool:
        """The console's token, or a principal of its scheme holding its scope."""
        if self.token is not None and _token_matches(self.token, authorization):
            return True
        if self.scheme is None or not authorization:
            return False
        credentials = RequestCredentials(headers={"authorization": authorization})
        try:
            principal = await self.scheme.authenticate(credentials)
        except AuthenticationFailed:
            return False
        return principal is not None and self.settings.scope in principal.scopes

    def _metrics_guarded(self) -> bool:
        """Whether ``/metrics``, without a token of its own, is for operators only."""
        return any(mount.secured for mount in self.app.mounts.values())

    async def _operator(self) -> bool:
        return await self._is_operator(request.headers.get("Authorization"))

    # --- pages ---------------------------------------------------------------------------

    async def _page(self) -> Response:
        # The page holds no data: it asks the endpoints below, with the token.
        return _asset_response("console.html", "text/html; charset=utf-8")

    async def _asset(self, name: str) -> Response:
        if name not in _ASSETS:
            return _error(404, "NOT_FOUND", f"no console file {name!r}")
        return _asset_response(name, _ASSETS[name])

    async def _metrics(self) -> Response:
        assert self.metrics is not None
        wanted = self.settings.metrics_token
        authorization = request.headers.get("Authorization")
        if wanted is not None:
            if not _token_matches(wanted, authorization):
                return _unauthorized()
        elif self._metrics_guarded() and not await self._is_operator(authorization):
            # Agent names, task counts across every owner, dead letters: not
            # for anyone on a deployment that asks its callers who they are.
            return _unauthorized()
        body = await self.render_metrics()
        return Response(body, content_type=METRICS_CONTENT_TYPE)

    # --- the feed ----------------------------------------------------------------------

    async def _feed(self) -> Response | None:
        args = websocket.args
        authorization = websocket.headers.get("Authorization")
        if authorization is None and args.get("token"):  # browsers cannot set headers
            authorization = f"Bearer {args['token']}"
        if not await self._is_operator(authorization):
            return _unauthorized()
        try:
            wanted = FeedFilter.parse(args)
            after = int(args["after"]) if args.get("after") else None
        except ValueError as error:
            return _error(400, "INVALID_ARGUMENT", str(error))
        await websocket.accept()
        subscriber = self.hub.subscribe(wanted, after=after, epoch=args.get("epoch"))
        try:
            await websocket.send(json.dumps(self.hub.hello()))
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
                code = CLOSE_GOING_AWAY if self.app.stopping.is_set() else CLOSE_TOO_SLOW
                with trio.move_on_after(SEND_TIMEOUT):
                    await websocket.close(code, reason[:120])
                nursery.cancel_scope.cancel()
        finally:
            subscriber.close()
        return None

    async def _until_stopping(self, subscriber: Subscriber) -> None:
        # The server's shutdown ends the feed at once (clients resume elsewhere or later).
        await self.app.stopping.wait()
        subscriber.drop("the server is shutting down")

    @staticmethod
    async def _until_closed(scope: trio.CancelScope) -> None:
        # Whatever the client sends is ignored; reading it notices the close.
        while True:
            await websocket.receive()

    # --- JSON endpoints -----------------------------------------------------------------

    async def _agents(self) -> Response:
        if not await self._operator():
            return _unauthorized()
        base = (self.base_url or request.host_url).rstrip("/")
        agents = [
            {
                "name": mount.name,
                "prefix": mount.prefix or "/",
                "card": mount.card.served(base).to_wire(),
                "running": mount.host.executions_running,
            }
            for mount in self.app.mounts.values()
        ]
        return _json({"agents": agents})

    async def _tasks(self) -> Response:
        if not await self._operator():
            return _unauthorized()
        args = request.args
        try:
            state = _state(args.get("state"))
            size = _size(args.get("pageSize"), 50)
            page = await self.app.store.browse_tasks(
                args.get("agent") or None,
                state=state,
                page_size=size,
                page_token=args.get("pageToken") or None,
            )
        except (ValueError, A2AError) as error:
            return _error(400, "INVALID_ARGUMENT", str(error))
        return _json(
            {
                "tasks": [
                    {
                        "agent": task.agent,
                        "id": task.id,
                        "owner": task.owner,
                        "contextId": task.context_id,
                        "state": task.state,
                        "createdAt": task.created_at,
                        "updatedAt": task.updated_at,
                    }
                    for task in page.tasks
                ],
                "nextPageToken": page.next_page_token,
            }
        )

    async def _task(self, agent: str, task_id: str) -> Response:
        if not await self._operator():
            return _unauthorized()
        store = self.app.store
        stored = await store.get_task(agent, task_id, owner=None)
        if stored is None or agent not in self.app.mounts:
            return _error(404, "NOT_FOUND", f"no task {task_id!r} of agent {agent!r}")
        after = int(request.args.get("after") or 0)
        entries = await store.timeline(agent, task_id, after=after, limit=_MAX_PAGE)
        deliveries = await store.delivery_page(agent, task_id, limit=_MAX_PAGE)
        hosts = await webhook_hosts(store, deliveries)
        return _json(
            {
                "agent": agent,
                "id": task_id,
                "owner": stored.owner,
                "state": stored.state.value,
                "contextId": stored.task.context_id,
                "timeline": [
                    {"seq": e.seq, "kind": e.kind, "at": e.at, "event": json.loads(e.payload)}
                    for e in entries
                ],
                "more": len(entries) == _MAX_PAGE,
                "deliveries": [_delivery(d, hosts[d.id]) for d in deliveries],
            }
        )

    async def _cancel(self, agent: str, task_id: str) -> Response:
        if not await self._operator():
            return _unauthorized()
        mount = self.app.mounts.get(agent)
        stored = await self.app.store.get_task(agent, task_id, owner=None) if mount else None
        if mount is None or stored is None:
            return _error(404, "NOT_FOUND", f"no task {task_id!r} of agent {agent!r}")
        # The operator acts for the task's owner: the host's own rules apply.
        owner = Principal(identifier=stored.owner, authenticated=True)
        try:
            task = await mount.host.cancel_task(CancelTaskRequest(id=task_id), owner)
        except A2AError as error:
            return _error(error.http_status, error.spec.reason, error.message)
        return _json({"id": task_id, "state": task.status.state.value})

    async def _deliveries(self) -> Response:
        if not await self._operator():
            return _unauthorized()
        args = request.args
        try:
            before = int(args["before"]) if args.get("before") else None
            size = _size(args.get("pageSize"), 50)
        except ValueError as error:
            return _error(400, "INVALID_ARGUMENT", str(error))
        state = args.get("state") or None
        rows = await self.app.store.delivery_page(
            args.get("agent") or None,
            args.get("task") or None,
            state=state,
            before=before,
            limit=size + 1,
        )
        more = len(rows) > size
        rows = rows[:size]
        hosts = await webhook_hosts(self.app.store, rows)
        return _json(
            {
                "deliveries": [_delivery(d, hosts[d.id]) for d in rows],
                "nextBefore": rows[-1].id if more else None,
            }
        )

    async def _redrive(self, outbox_id: int) -> Response:
        if not await self._operator():
            return _unauthorized()
        if not await self.app.store.requeue_notification(outbox_id):
            return _error(404, "NOT_FOUND", f"no failed delivery {outbox_id}")
        self.app.push.notify()
        return _json({"id": outbox_id, "state": "pending"})

    async def _counters(self) -> Response:
        if not await self._operator():
            return _unauthorized()
        outbox = await self.app.store.outbox_summary()
        oldest = outbox.oldest_pending
        # The whole deployment's, with each member's share ("members").
        counters = await deployment_counters(self.app, self.member_stats())
        return _json(
            {
                **counters,
                "outboxBacklog": outbox.pending,
                "oldestPendingSeconds": max(0.0, time.time() - oldest.timestamp())
                if oldest
                else 0.0,
                "deadLetters": outbox.failed,
                # Webhook hosts whose circuit is open, and the outbox caps that
                # turn a backlog past them into dead letters (docs/push.md).
                "openWebhookHosts": [
                    {"host": host, "secondsLeft": round(left, 1)}
                    for host, left in sorted(self.app.push.hosts.open_hosts().items())
                ],
                "outboxCaps": {
                    "perWebhook": self.app.store.outbox_caps.per_webhook,
                    "perTask": self.app.store.outbox_caps.per_task,
                },
                "feedSubscribers": len(self.hub.subscribers),
                "feedSeq": self.hub.seq,
            }
        )

    async def _members(self) -> Response:
        if not await self._operator():
            return _unauthorized()
        return _json({"members": await members(self.app, self.member_stats())})


def attach_console(
    app: A2AApp,
    settings: ConsoleSettings | None = None,
    *,
    mode: str = "development",
    authenticators: Mapping[str, Authenticator] | None = None,
) -> Console:
    """Serve the console, its feed and ``/metrics`` on ``app`` (see :class:`ConsoleSettings`).

    ``mode`` is the configuration's: in ``development`` a console without a
    token gets a random one, logged with the console's URL at start; in
    ``production`` it stays off. ``authenticators`` are the security schemes
    a ``settings.scheme`` may name. Call it before the app starts serving.
    """
    console = Console(app, settings or ConsoleSettings(), mode=mode, authenticators=authenticators)
    console.attach()
    return console


def console_of(app: A2AApp) -> Console | None:
    """The console attached to ``app``, if any."""
    console = app.extensions.get(_EXTENSION)
    return console if isinstance(console, Console) else None


def ensure_console(app: A2AApp) -> Console:
    """The console of ``app``; the default one (:class:`ConsoleSettings`, development
    mode) attached now when it has none.

    Every app gets its console here or from its configuration's ``[console]``
    section, whose defaults are :class:`ConsoleSettings`'s: an app built in
    code and one built from a2a.toml are served alike.
    """
    return console_of(app) or attach_console(app)


def _token_matches(token: str, authorization: str | None) -> bool:
    offered = _bearer(authorization)
    return offered is not None and hmac.compare_digest(offered.encode(), token.encode())


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _state(value: str | None) -> TaskState | None:
    if not value:
        return None
    wire = value.upper() if value.upper().startswith("TASK_STATE_") else f"TASK_STATE_{value}"
    try:
        return TaskState(wire.upper())
    except ValueError:
        raise ValueError(f"unknown state {value!r}") from None


def _size(value: str | None, default: int) -> int:
    size = int(value) if value else default
    if not 1 <= size <= _MAX_PAGE:
        raise ValueError(f"pageSize must be 1 to {_MAX_PAGE}")
    return size


def _delivery(delivery: Delivery, host: str | None) -> dict[str, Any]:
    # The config is named and its webhook's host shown, never its URL's path or
    # query, its token or credentials: they stay in the store.
    return {
        "webhookHost": host,
        "id": delivery.id,
        "notificationId": delivery.notification_id,
        "agent": delivery.agent,
        "task": delivery.task_id,
        "config": delivery.config_id,
        "eventSeq": delivery.seq,
        "state": delivery.state,
        "attemptsMade": delivery.attempts_made,
        "lastError": delivery.last_error,
        "createdAt": delivery.created_at,
        "attempts": [
            {
                "number": a.number,
                "at": a.at,
                "status": a.status,
                "error": a.error,
                "durationMs": round(a.duration_ms, 2),
            }
            for a in delivery.attempts
        ],
    }


def _json(body: object, status: int = 200) -> Response:
    return Response(
        json.dumps(body, ensure_ascii=False),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _error(status: int, code: str, message: str) -> Response:
    return _json({"error": {"code": status, "status": code, "message": message}}, status)


def _unauthorized() -> Response:
    response = _error(401, "UNAUTHENTICATED", "the console's bearer token is required")
    response.headers["WWW-Authenticate"] = 'Bearer realm="a2a-trio console"'
    return response


def _asset_response(name: str, content_type: str) -> Response:
    body = files("a2a_trio.console").joinpath("static", name).read_bytes()
    return Response(body, content_type=content_type, headers={"Cache-Control": "no-cache"})

"""The operator console on an app: its settings, and the rooms it wires onto the app.

:func:`attach_console` adds the routes to an :class:`~a2a_trio.server.A2AApp`
and makes the console the observer of every agent's host and of the push
worker. Its rooms: who may open it (:mod:`.access`), the live feed
(:mod:`.feed`), the JSON API (:mod:`.api`), the page (:mod:`.assets`) and
``/metrics`` (:mod:`.metrics`). Everything under the console path asks for
the console's bearer token; protocol credentials (any security scheme of the
cards) never open it, and nothing it serves holds a credential or a
webhook's secret.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from quart import Response, request

from ..runtime.execution_log import ExecutionLog
from ..server import A2AApp, Authenticator
from ..store.observer import Observer
from . import assets
from .access import Access, token_matches, unauthorized
from .api import ConsoleApi
from .cluster_feed import ClusterFeed
from .feed import Feed
from .fleet_view import served_address
from .hub import FeedHub
from .metrics import Metrics
from .observers import EventRate, Fanout, Rate

__all__ = ["Console", "ConsoleSettings", "attach_console", "console_of", "ensure_console"]

log = logging.getLogger("a2a_trio.console")

_EXTENSION = "a2a_trio.console"
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
        scheme: Authenticator | None = None
        if settings.scheme is not None:
            if settings.scope is None:
                raise ValueError("console.scope: required with console.scheme")
            if settings.scheme not in (authenticators or {}):
                raise ValueError(
                    f"console.scheme: {settings.scheme!r} is not one of the security schemes"
                )
            scheme = (authenticators or {})[settings.scheme]
        #: Who may open the console: its token, or its scheme's principals with its scope.
        self.access = Access(settings.token, scheme, settings.scope)
        self.path = "/" + settings.path.strip("/") if settings.path.strip("/") else ""
        self.hub = FeedHub(backlog=settings.backlog, buffer=settings.buffer)
        self.metrics = Metrics() if settings.metrics else None
        self.messages = Rate()
        self.events = Rate()
        self._executions_logged = False
        #: Whether this process logs the console's URL (one of a deployment's does).
        self._announced = True
        #: Whether the token was made up at start (development mode without one).
        self.generated = False
        #: Where a made-up token lasts: "run", "database" (kept beside its
        #: file) or "deployment" (every process of the database takes it).
        self._kept_for = "run"
        #: Where the app is served, for the URL logged at start (``a2a-trio serve`` sets it).
        self.base_url: str | None = app.a2a_settings.public_url
        configured = self.token is not None or scheme is not None
        self.on = settings.enabled and (configured or mode == "development")
        if self.on and not configured:
            self.token = secrets.token_urlsafe(24)
            self.generated = True
        self.observer = Fanout()

    @property
    def token(self) -> str | None:
        """The token operators present; None while the console is off."""
        return self.access.token

    @token.setter
    def token(self, token: str | None) -> None:
        self.access.token = token

    # --- wiring -------------------------------------------------------------------------

    def attach(self) -> None:
        """Serve the console's routes on its app and observe what the app records."""
        app = self.app
        app.extensions[_EXTENSION] = self
        observers: list[Observer] = [EventRate(self.events)]
        if self.on:
            observers.append(self.hub)
        if self.metrics is not None:
            observers.append(self.metrics)
        observer = Fanout(*observers)
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
        api = ConsoleApi(app, self.hub, self.access, self.member_stats, lambda: self.base_url)
        routes = [
            ("/console", "page", assets.page, ["GET"]),
            ("/console/<name>", "asset", assets.asset, ["GET"]),
            *api.routes(),
        ]
        for rule, name, view, methods in routes:
            app.add_url_rule(f"{base}{rule}", f"a2a.console.{name}", view, methods=methods)
        feed = Feed(app, self.hub, self.access)
        app.add_websocket(f"{base}/feed", "a2a.console.feed", feed.serve)

    async def _start(self) -> None:
        """At start (serving or working): observe every host, join the cluster's view.

        On PostgreSQL a token made up in development mode is the deployment's
        (kept in the database), so every process takes the same one; its URL
        is logged by one of the live web processes (the first to start, and
        after it died, the next one to start). A SQLite file keeps it in a
        file beside itself, so the URL stays the same from start to start.
        """
        app = self.app
        for mount in app.mounts.values():
            mount.host.observe(self.observer)
        if app.role == "worker" and not self._executions_logged:
            self._executions_logged = True  # a line per execution, for the workers' operators
            self.observer.add(ExecutionLog())
        for database in app.databases.all:
            if database.cluster is None:
                continue
            # Reported to every database this process serves: a worker of
            # another database's agents alone is counted there.
            database.cluster.stats = self.member_stats
            if self.on:  # what the other processes record too, in each database
                database.cluster.watch(ClusterFeed(self.hub, database.store))
        cluster = app.cluster
        if cluster is not None:
            if self.generated and app.role == "web":
                self.token, _ = await cluster.coordination.shared_setting(
                    _TOKEN_SETTING, self.token or secrets.token_urlsafe(24)
                )
                self._kept_for = "deployment"
                self._announced = await cluster.coordination.claim_duty("console link")
        elif self.generated:
            kept = app.store.development_token()  # a SQLite file keeps it beside itself
            if kept is not None:
                self.token, self._kept_for = kept, "database"

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
        operators = self.token is not None or self.access.scheme is not None
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
            kept = {
                "run": "made up for this run",
                "database": f"kept beside {self.app.store.display}, the same at every start",
                "deployment": "made up for this deployment (every process of the database"
                " takes it)",
            }[self._kept_for]
            log.warning("console (development mode, a token %s): %s", kept, self.url(base))

    # --- /metrics ---------------------------------------------------------------------

    def _metrics_guarded(self) -> bool:
        """Whether ``/metrics``, without a token of its own, is for operators only."""
        return any(mount.secured for mount in self.app.mounts.values())

    async def _metrics(self) -> Response:
        assert self.metrics is not None
        wanted = self.settings.metrics_token
        authorization = request.headers.get("Authorization")
        if wanted is not None:
            if not token_matches(wanted, authorization):
                return unauthorized()
        elif self._metrics_guarded() and not await self.access.is_operator(authorization):
            # Agent names, task counts across every owner, dead letters: not
            # for anyone on a deployment that asks its callers who they are.
            return unauthorized()
        body = await self.render_metrics()
        return Response(body, content_type=METRICS_CONTENT_TYPE)


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

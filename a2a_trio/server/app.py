"""The Quart-trio application that hosts agents: settings, mounting, and its rooms.

:class:`A2AApp` holds the settings and the mounted agents; it hands a path to
its :class:`~.routing.Routes`, an HTTP request to its
:class:`~.dispatch.Dispatch` and its lifetime to its
:class:`~.lifespan.Lifespan`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import trio
from quart import Response
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from .._lazy_app import LazyApp
from ..adapters.asyncio import AsyncioAgentExecutor, AsyncioBridge
from ..protocol import AgentCard
from ..protocol.signing import CardSigner
from ..push import PushDispatcher, PushSettings
from ..runtime import AgentExecutor, AgentHost, HostSettings
from ..runtime.cluster import Cluster
from ..runtime.retention import RetentionSettings, RetentionStats
from ..store import Store
from ..store.outage import quiet_retries
from ..store.postgres import PoolSettings
from ..store.url import DatabaseLocation
from . import h2_header_checks, hypercorn_h2, hypercorn_release, hypercorn_tcp
from .asgi import JSON_CONTENT_TYPE
from .auth import Authenticator, CardGuard
from .bindings import ServerSettings
from .body_budget import BodyBudget
from .cards import CardSource, ServedCard, check_signable, import_object, resolve_card
from .databases import Databases, Storage
from .dispatch import Dispatch, RequestObserver
from .health import HEALTH_PATH, liveness, readiness
from .lifespan import Lifespan, LifespanSettings
from .mount import AgentMount, Authenticate
from .routing import Routes

__all__ = ["DEFAULT_CONSOLE", "A2AApp", "LazyApp", "RequestObserver"]

#: What an app built with ``console=True`` calls when it starts serving: the
#: operator console's :func:`~a2a_trio.console.ensure_console`, which attaches
#: the default console unless one was attached before. Named, not imported:
#: the console is built on the server (it imports this module), so the
#: dependency points one way, as it does for an executor named by its path.
DEFAULT_CONSOLE = "a2a_trio.console:ensure_console"
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")

ExecutorSource = (
    AgentExecutor | type[AgentExecutor] | AsyncioAgentExecutor | type[AsyncioAgentExecutor] | str
)


def _resolve_executor(source: ExecutorSource) -> AgentExecutor:
    value: Any = import_object(source) if isinstance(source, str) else source
    if isinstance(value, type):
        value = value()
    if isinstance(value, AsyncioAgentExecutor):  # served on an asyncio loop of its own
        value = AsyncioBridge(value)
    if not isinstance(value, AgentExecutor):
        raise TypeError(
            f"an executor must be an AgentExecutor or an AsyncioAgentExecutor "
            f"(instance, class or import path), got {type(value).__name__}"
        )
    return value


def normalise_prefix(prefix: str) -> str:
    """A mount prefix as routes use it: ``""`` for the root, else ``/a/b``."""
    prefix = "/" + prefix.strip().strip("/")
    return "" if prefix == "/" else prefix


class A2AApp(QuartTrio):
    """An ASGI app serving any number of agents, each under its own prefix.

    ::

        app = A2AApp(database="agents.db")
        app.mount("/echo", card=my_card, executor=EchoExecutor(), name="echo")

    With a ``card_signer`` every card and extended card is served signed
    (spec 8.4). With a ``retention`` whose ``max_age`` is set, finished work
    older than that is pruned on a schedule while the app serves
    (:mod:`a2a_trio.runtime.retention`). An agent mounted with ``storage``
    lives in a database of its own (:attr:`databases`). Unless ``console``
    is False, the app serves the operator console and ``/metrics`` with
    their defaults when it starts, as an app
    built from a2a.toml does (an :func:`~a2a_trio.console.attach_console` of
    your own before then takes their place). Serve it with ``a2a-trio serve
    module:app``, ``hypercorn --worker-class trio module:app``, or inside a
    trio program with :func:`a2a_trio.server.serve` (or ``hypercorn.trio.serve``). The hosts
    start with the app's lifespan and shut down in order with it;
    docs/configuration.md says when their grace begins under each.
    """

    def __init__(
        self,
        import_name: str = "a2a_trio",
        *,
        database: str | Path | DatabaseLocation = "a2a.db",
        store: Store | None = None,
        pool: PoolSettings | None = None,
        lease_seconds: float = 10.0,
        secret_key: str | bytes | None = None,
        settings: ServerSettings | None = None,
        host_settings: HostSettings | None = None,
        push_settings: PushSettings | None = None,
        card_signer: CardSigner | None = None,
        console: bool = True,
        retention: RetentionSettings | None = None,
    ) -> None:
        super().__init__(import_name)
        self.a2a_settings = settings or ServerSettings()
        # Before any connection: hypercorn's connections, and HTTP/2 on them, mended.
        # Each app's own send_timeout; on a release the mends do not cover,
        # HTTP/2 is refused and the start logs what else is open.
        hypercorn_tcp.install(
            self, self.a2a_settings.send_timeout, self.a2a_settings.header_timeout
        )
        hypercorn_h2.install(self, self.a2a_settings.send_timeout)
        h2_header_checks.install()  # the same checks of received headers, in C
        self.before_serving(hypercorn_release.log_unprotected)
        quiet_retries()  # a database away: one line when it goes, however this is served
        self.host_settings = host_settings or HostSettings()
        self.push_settings = push_settings or PushSettings()
        #: Signs every agent's card and extended card when they are served.
        self.card_signer = card_signer
        self.config["RESPONSE_TIMEOUT"] = None  # streams live as long as their task
        self.config["MAX_CONTENT_LENGTH"] = self.a2a_settings.max_body_bytes
        #: The bytes of request bodies the process holds at once (see .body_budget).
        self.body_budget = BodyBudget(
            self.a2a_settings.body_budget, self.a2a_settings.body_budget_wait
        )
        self.mounts: dict[str, AgentMount] = {}
        #: Which agent answers a path (see .routing).
        self.routes = Routes(self, self.a2a_settings)
        #: Each database's store, cluster, push worker and hosts (see .databases).
        self.databases = Databases(
            database=database,
            store=store,
            settings=LifespanSettings(
                pool=pool,
                lease_seconds=lease_seconds,
                secret_key=secret_key,
                push=self.push_settings,
                retention=retention or RetentionSettings(),
            ),
            freeze_gc=self.a2a_settings.freeze_gc,
        )
        #: Called once the store is open (and the cluster joined), before the
        #: hosts start, when serving and when working (the console hooks on here).
        self.on_start: list[Callable[[], Awaitable[None]]] = self.databases.on_start
        #: Answers the HTTP requests, the agents' straight from ASGI (see .dispatch).
        self.dispatch = Dispatch(
            self.routes,
            self.mounts,
            self.a2a_settings,
            self.body_budget,
            self._takes_work,
            super().__call__,
        )
        if console:  # first: the console's own start-up hook follows the hosts'
            self.before_serving(self._ensure_console)
        self.before_serving(self._start)
        self.add_url_rule(f"{HEALTH_PATH}/live", "a2a.health.live", self._live, methods=["GET"])
        self.add_url_rule(f"{HEALTH_PATH}/ready", "a2a.health.ready", self._ready, methods=["GET"])
        self.register_error_handler(HTTPException, self._http_error)

    @property
    def store(self) -> Store:
        """The store (``database``: a SQLite file or a PostgreSQL URL); opened at start-up.

        From start-up on, the app serves the database alone: starting a second
        app on the same database, in this process or another, fails with
        :class:`~a2a_trio.store.DatabaseInUseError`. It lets go when the app
        stops (a store passed in keeps it until you close that store).
        """
        return self.lifespan.store

    @property
    def lifespan(self) -> Lifespan:
        """The services of the app's own database (agents mounted without ``storage``)."""
        return self.databases.default

    @property
    def push(self) -> PushDispatcher:
        """Delivers the webhooks of the agents in the app's own database from its
        outbox (see :mod:`a2a_trio.push`); an agent mounted with ``storage`` has
        its database's (``app.databases.for_storage(...).push``).

        Replace it before mounting agents (a dispatcher with another address
        screen or clock, say): the hosts mounted after and the push worker the
        app starts use the one set here.
        """
        return self.lifespan.push

    @push.setter
    def push(self, dispatcher: PushDispatcher) -> None:
        self.lifespan.push = dispatcher

    @property
    def cluster(self) -> Cluster | None:
        """This process's membership when several serve the database (PostgreSQL)."""
        return self.lifespan.cluster

    @property
    def retention(self) -> RetentionSettings:
        """When finished work is pruned (``retention=``; off unless ``max_age`` is set)."""
        return self.databases.retention

    @property
    def retention_stats(self) -> RetentionStats:
        """What this app's pruners did, across restarts (the metrics read it)."""
        return self.databases.retention_stats

    @property
    def role(self) -> str:
        """What this process is to the others on the database: ``web`` or ``worker``."""
        return self.databases.role

    @property
    def stopping(self) -> trio.Event:
        """Set when the shutdown begins: long-lived connections of the app's own
        (the console's feed) close then instead of holding it up."""
        return self.databases.stopping

    @property
    def request_observer(self) -> RequestObserver | None:
        """Told of every protocol request (the metrics); see :data:`RequestObserver`."""
        return self.dispatch.observer

    @request_observer.setter
    def request_observer(self, observer: RequestObserver | None) -> None:
        self.dispatch.observer = observer

    @property
    def open_streams(self) -> int:
        """Event streams (SSE) being relayed now."""
        return self.dispatch.open_streams

    # --- mounting -----------------------------------------------------------------

    def mount(
        self,
        prefix: str,
        card: CardSource,
        executor: ExecutorSource,
        *,
        name: str | None = None,
        well_known: bool | None = None,
        extended_card: CardSource | None = None,
        authenticators: Mapping[str, Authenticator] | None = None,
        guard: str | None = None,
        authenticate: Authenticate | None = None,
        compat_v0_3: bool = True,
        default_card_v0_3: bool = False,
        execution: Literal["inline", "queued"] = "inline",
        restartable: bool = False,
        grpc: bool = True,
        storage: Storage | None = None,
    ) -> AgentMount:
        """Serve an agent under ``prefix``.

        ``well_known`` makes this agent own ``/.well-known/agent-card.json``;
        when no agent claims it explicitly, the first agent mounted (without
        ``well_known=False``) owns it. A second explicit claim is an error.
        The root route is added when the app starts. The card routes are Quart
        routes named ``a2a.<name>.well-known`` and ``a2a.<name>.card`` (and
        ``...-v0-3`` for the 0.3 form); the
        protocol routes (``{prefix}/jsonrpc``, ``{prefix}/rest/...``) are
        answered before Quart's routing (see :mod:`a2a_trio.server.asgi`).

        Protocol routes are protected as the card's ``securitySchemes`` and
        ``securityRequirements`` say: ``authenticators`` maps each scheme name
        to its :class:`Authenticator`, and ``guard`` names the scheme whose
        identifier owns tasks (the first satisfied one when unset).
        ``authenticate`` replaces all of that with a function of your own.

        ``compat_v0_3`` (the default) serves protocol 0.3 clients too: its
        JSON-RPC methods, its HTTP+JSON paths under ``{prefix}/rest/v1/``,
        and the card with its 0.3 keys at ``{prefix}/.well-known/agent.json``
        (docs/compatibility.md). False serves 1.0 only. At
        ``/.well-known/agent-card.json`` a request naming ``A2A-Version: 0.3``
        gets that card too, and so does one naming no version when
        ``default_card_v0_3`` is set (or the card lists a 0.3 interface): what
        deployed 0.3 clients read with their default card resolution. It is
        off by default because the conformance kit fetches the card without
        ``A2A-Version`` and refuses any key the 1.0 card does not define.

        ``execution="queued"`` runs the agent's executions on ``a2a-trio
        worker`` processes instead of the process a message reaches, when
        several processes share the database (PostgreSQL); on SQLite it runs
        them here, as ``"inline"`` does (docs/deployment.md, "Queue workers").
        ``restartable`` declares its executions safe to run again from the
        start: one a stopping worker cannot finish within its grace goes back
        to the queue instead of ending FAILED.

        ``grpc`` (the default) serves the gRPC binding too, on the same port
        over HTTP/2, and lists it in the card; the agent's tenant there is
        its prefix without the leading slash (docs/protocol.md).

        ``storage`` (a path, a ``sqlite:///`` or ``postgresql://`` URL) keeps
        this agent's tasks in a database of its own instead of the app's
        ``database``, with its own leases, wake-ups, outbox and pruner;
        agents naming the same database share it (docs/deployment.md,
        "Several databases"). A URL that cannot be used raises
        :class:`~a2a_trio.store.url.DatabaseURLError` (a ValueError).
        """
        if execution not in ("inline", "queued"):
            raise ValueError(f"execution must be 'inline' or 'queued', not {execution!r}")
        name = name or "default"
        if not _NAME.match(name):
            raise ValueError(f"agent name {name!r} may only hold letters, digits, '-' and '_'")
        if name in self.mounts:
            raise ValueError(f"an agent named {name!r} is already mounted")
        prefix = normalise_prefix(prefix)
        if any(m.prefix == prefix for m in self.mounts.values()):
            raise ValueError(f"prefix {prefix or '/'!r} is already mounted")
        database = self.databases.for_storage(storage)
        owns_root = self.routes.owns_root(name, well_known)
        public_card = resolve_card(card)
        capabilities = public_card.capabilities
        if capabilities.push_notifications and not self.push_settings.enabled:
            # The card must not promise what push.enabled = false switches off.
            capabilities = capabilities.model_copy(update={"push_notifications": False})
            public_card = public_card.model_copy(update={"capabilities": capabilities})
        card_guard = CardGuard(public_card, authenticators or {}, owner_scheme=guard)
        resolved_extended = resolve_card(extended_card) if extended_card is not None else None
        if self.card_signer is not None:
            # A card that cannot be signed (an integer beyond 2**53 in its
            # extension params, say) stops start-up, not its first GET.
            for signed in (public_card, resolved_extended):
                if signed is not None:
                    check_signable(signed, self.card_signer)
        host = AgentHost(
            name=name,
            executor=_resolve_executor(executor),
            store=database.store,
            streaming=bool(capabilities.streaming),
            push_notifications=bool(capabilities.push_notifications) and self.push_settings.enabled,
            push=database.push,
            settings=self.host_settings,
            queued=execution == "queued",
            restartable=restartable,
        )
        mount = AgentMount(
            name=name,
            prefix=prefix,
            card=ServedCard(
                public_card,
                prefix,
                max_age=self.a2a_settings.card_max_age,
                signer=self.card_signer,
                grpc=grpc,
            ),
            host=host,
            well_known=owns_root,
            authenticate=authenticate or card_guard,
            extended_card=resolved_extended,
            secured=card_guard.declares_security,
            challenge=card_guard.challenge(),
            signer=self.card_signer,
            compat_v0_3=compat_v0_3,
            default_card_v0_3=default_card_v0_3,
            grpc=grpc,
        )
        self.mounts[name] = database.mounts[name] = mount
        self.routes.add(mount, claimed=bool(well_known))
        return mount

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI entry point: lifespan, protocol routes and cards here, the rest via Quart."""
        if scope["type"] == "lifespan":
            await self.databases.serve(super().__call__, scope, receive, send)
        elif scope["type"] == "http":
            await self.dispatch.http(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def _live(self) -> Response:
        status, body = liveness()
        return Response(body, status, content_type=JSON_CONTENT_TYPE)

    async def _takes_work(self) -> bool:
        """What ``/_a2a/health/ready`` answers, as gRPC health reports it."""
        status, _ = await readiness(self.mounts, self._databases_checked())
        return status == 200

    def _databases_checked(self) -> list[tuple[Store, Cluster | None]]:
        return [(database.store, database.cluster) for database in self.databases.all]

    async def _ready(self) -> Response:
        status, body = await readiness(self.mounts, self._databases_checked())
        return Response(body, status, content_type=JSON_CONTENT_TYPE)

    # --- lifespan -------------------------------------------------------------------

    async def _ensure_console(self) -> None:
        import_object(DEFAULT_CONSOLE)(self)

    async def _start(self) -> None:
        self.routes.seal()
        await self.databases.start()

    async def work(
        self,
        agents: list[str] | None = None,
        *,
        concurrency: int = 16,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Be a queue worker, without HTTP: run the queued executions of ``agents``.

        ``agents`` are names of agents mounted with ``execution="queued"``
        (all of them when None); at most ``concurrency`` executions per agent
        run at once. Returns after :meth:`begin_shutdown`, once the running
        executions finished (within ``shutdown_grace``) and the process left
        the cluster. Needs a database several processes share (PostgreSQL).
        """
        names = (
            agents
            if agents is not None
            else [name for name, mount in self.mounts.items() if mount.host.queued]
        )
        for name in names:
            mount = self.mounts.get(name)
            if mount is None or not mount.host.queued:
                raise ValueError(f"{name!r} is not an agent mounted with execution = 'queued'")
        if not names:
            raise ValueError("no agent is mounted with execution = 'queued': nothing to work on")
        self.routes.seal()
        await self.databases.work(names, concurrency, task_status)

    def begin_shutdown(self, *, now: bool = False) -> None:
        """Start the orderly shutdown; returns at once.

        Every agent stops accepting work, and running executions get
        ``shutdown_grace`` from this moment, while the server still serves
        the requests in flight: a blocking SendMessage whose task finishes
        within the grace gets its answer, and streams end with their tasks.
        Call it when your server begins its shutdown (``a2a-trio serve`` and
        :func:`a2a_trio.server.serve` do); without it the grace begins
        with the ASGI lifespan shutdown, which hypercorn sends only after the
        requests in flight have ended or been cut off. ``now`` ends the grace
        at once: running executions are cancelled and their tasks end FAILED.
        """
        self.databases.begin_shutdown(now=now)

    async def _http_error(self, error: HTTPException) -> Response:
        """Routing errors answer in JSON too (AIP-193 shape), never HTML."""
        status = error.code or 500
        body = {
            "error": {
                "code": status,
                "status": {404: "NOT_FOUND", 405: "UNIMPLEMENTED"}.get(status, "UNKNOWN"),
                "message": error.description or error.name,
            }
        }
        return Response(json.dumps(body), status=status, content_type=JSON_CONTENT_TYPE)

    def card_for(self, name: str, base: str) -> AgentCard:
        """The card of agent ``name`` exactly as served at ``base``, signatures included."""
        return self.mounts[name].card.served(base)

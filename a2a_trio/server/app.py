"""The Quart-trio application that hosts agents."""

from __future__ import annotations

import gc
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from .. import telemetry
from .._lazy_app import LazyApp
from ..adapters.asyncio import AsyncioAgentExecutor, AsyncioBridge
from ..protocol import AgentCard, InvalidRequestError
from ..protocol.signing import CardSigner
from ..push import PushDispatcher, PushSettings
from ..runtime import AgentExecutor, AgentHost, HostSettings
from ..runtime.cluster import Cluster
from ..store import SqliteStore, Store, checkpoint_periodically
from ..store.factory import store_at
from ..store.postgres import PoolSettings
from ..store.url import DatabaseLocation
from . import hypercorn_h2, hypercorn_release, hypercorn_tcp
from .asgi import (
    A2A_JSON_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    ClientGone,
    EventStreamBody,
    ProtocolRequest,
    ProtocolResponse,
    answers_a2a_json,
)
from .auth import Authenticator, CardGuard
from .bindings import (
    VERSION_HEADER,
    ServerSettings,
    base_url,
    handle_jsonrpc,
    handle_rest,
    rest_error,
)
from .body_budget import BodyBudget
from .cards import (
    CardSource,
    ServedCard,
    card_response,
    check_signable,
    grpc_tenant,
    import_object,
    resolve_card,
)
from .failed_start import refuse_start
from .grpc_binding import is_grpc, serve_grpc
from .grpc_services import is_standard_service, serve_standard_service
from .health import HEALTH_PATH, liveness, readiness
from .hosts import host_allowed
from .mount import AgentMount, Authenticate
from .read_ahead import serve_read_ahead

__all__ = ["A2AApp", "LazyApp", "RequestObserver"]

#: Told of every protocol request once answered (before a stream is relayed):
#: agent, binding (``jsonrpc``, ``rest`` or ``grpc``), operation, outcome (``ok``, an
#: error's reason, or ``client_gone``) and the seconds it took.
RequestObserver = Callable[[str, str, str, str, float], None]

WELL_KNOWN_PATH = "/.well-known/agent-card.json"
#: Where 0.2 and 0.3 servers served the card (a2a-sdk 0.3's
#: PREV_AGENT_CARD_WELL_KNOWN_PATH): the card with its 0.3 keys is served
#: there, since the 1.0 card at WELL_KNOWN_PATH may hold no other keys.
V0_3_CARD_PATH = "/.well-known/agent.json"
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
    (spec 8.4). Unless ``console`` is False, the app serves the operator
    console and ``/metrics`` with their defaults when it starts, as an app
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
        self.before_serving(hypercorn_release.log_unprotected)
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
        self._database = database
        self._pool = pool
        self._lease_seconds = lease_seconds
        self._secret_key = secret_key
        self._store = store
        self._owns_store = store is None
        self.mounts: dict[str, AgentMount] = {}
        self._root_card_owner: AgentMount | None = None
        self._root_claim_explicit = False
        self._root_route_added = False
        #: Mounts whose protocol routes __call__ answers, longest prefix first.
        self._protocol_routes: list[AgentMount] = []
        #: Card paths (GET answered in __call__), the agent each belongs to, and
        #: whether it is the card's 0.3 form.
        self._card_routes: dict[str, tuple[AgentMount, bool]] = {}
        #: Delivers every agent's webhooks from the outbox (see a2a_trio.push).
        self.push = PushDispatcher(self.store, self.push_settings)
        self._push_scope: trio.CancelScope | None = None
        self._push_stopped = trio.Event()
        #: This process's membership when several serve the database (PostgreSQL).
        self.cluster: Cluster | None = None
        self._cluster_stopped = trio.Event()
        self._agents_served: list[str] = []
        #: Set by begin_shutdown: a queue worker (see work) stops.
        self._stop_working = trio.Event()
        #: The WAL checkpointer's scope and end, once it runs.
        self._checkpoints: tuple[trio.CancelScope, trio.Event] | None = None
        #: The nursery of the hosts, the push worker and the WAL checkpointer,
        #: while the lifespan runs.
        self._services: trio.Nursery | None = None
        #: Called once the store is open (and the cluster joined), before the
        #: hosts start, when serving and when working (the console hooks on here).
        self.on_start: list[Callable[[], Awaitable[None]]] = []
        #: What this process is to the others on the database: ``web`` or ``worker``.
        self.role = "web"
        #: Told of every protocol request (the metrics); see :data:`RequestObserver`.
        self.request_observer: RequestObserver | None = None
        #: Event streams (SSE) being relayed now.
        self.open_streams = 0
        #: Set when the shutdown begins: long-lived connections of the app's
        #: own (the console's feed) close then instead of holding it up.
        self.stopping = trio.Event()
        if console:  # first: the console's own start-up hook follows the hosts'
            self.before_serving(self._ensure_console)
        self.before_serving(self._start_hosts)
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
        if self._store is None:
            self._store = store_at(
                self._database,
                secret_key=self._secret_key,
                pool=self._pool,
                lease_seconds=self._lease_seconds,
            )
        return self._store

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
        if well_known and self._root_claim_explicit and self._root_card_owner is not None:
            raise ValueError(
                f"well_known: agents {self._root_card_owner.name!r} and {name!r} both claim "
                f"{WELL_KNOWN_PATH}; only one agent may own the root card"
            )
        if self._root_route_added:
            raise RuntimeError("agents are mounted before the app starts serving")
        owns_root = well_known if well_known is not None else self._root_card_owner is None
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
            store=self.store,
            streaming=bool(capabilities.streaming),
            push_notifications=bool(capabilities.push_notifications) and self.push_settings.enabled,
            push=self.push,
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
        self.mounts[name] = mount
        if owns_root:
            if self._root_card_owner is not None:  # an explicit claim takes over a default one
                self._root_card_owner.well_known = False
            self._root_card_owner = mount
            self._root_claim_explicit = bool(well_known)
        self._add_routes(mount)
        return mount

    def _add_root_route(self) -> None:
        owner = self._root_card_owner
        if owner is None or self._root_route_added:
            return
        self._root_route_added = True
        for path, v0_3 in self._card_paths(owner, ""):
            self._card_routes[path] = (owner, v0_3)
            suffix = "well-known-v0-3" if v0_3 else "well-known"
            view = self.view_functions[f"a2a.{owner.name}.{'card-v0-3' if v0_3 else 'card'}"]
            self.add_url_rule(path, f"a2a.{owner.name}.{suffix}", view, methods=["GET"])

    @staticmethod
    def _card_paths(mount: AgentMount, prefix: str) -> list[tuple[str, bool]]:
        """The card paths of ``mount`` under ``prefix``: (path, whether it is the 0.3 form)."""
        paths = [(f"{prefix}{WELL_KNOWN_PATH}", False)]
        if mount.compat_v0_3:
            paths.append((f"{prefix}{V0_3_CARD_PATH}", True))
        return paths

    def _add_routes(self, mount: AgentMount) -> None:
        settings = self.a2a_settings
        served = mount.card
        base = f"a2a.{mount.name}"
        for path, v0_3 in self._card_paths(mount, mount.prefix):

            async def card_view(v0_3: bool = v0_3) -> Response:
                # GET is answered in __call__; this serves HEAD (and OPTIONS) the same way.
                version = request.headers.get(VERSION_HEADER, request.args.get(VERSION_HEADER))
                status, body, headers = card_response(
                    served,
                    base_url(request, settings),
                    request.headers.get("If-None-Match"),
                    v0_3=v0_3 or mount.card_is_v0_3(version),
                    negotiated=mount.compat_v0_3 and not v0_3,
                )
                if status == 304:
                    return Response(b"", status=304, headers=headers)
                return Response(body, status=200, headers=headers, content_type=JSON_CONTENT_TYPE)

            name = f"{base}.card-v0-3" if v0_3 else f"{base}.card"
            self.add_url_rule(path, name, card_view, methods=["GET"])
            self._card_routes[path] = (mount, v0_3)
        # Protocol routes are answered in __call__, before Quart (see server.asgi).
        self._protocol_routes.append(mount)
        self._protocol_routes.sort(key=lambda m: len(m.prefix), reverse=True)

    def _protocol_route(self, path: str) -> tuple[AgentMount, str | None] | None:
        """The mount serving ``path`` and, for HTTP+JSON, the path below ``/rest``.

        The JSON-RPC route also answers with a trailing slash: the kit (and
        some clients) post to the interface URL that way.
        """
        for mount in self._protocol_routes:
            prefix = mount.prefix
            if not path.startswith(prefix):
                continue
            below = path[len(prefix) :]
            if below in ("/jsonrpc", "/jsonrpc/"):
                return mount, None
            if below.startswith("/rest/") and len(below) > len("/rest/"):
                return mount, below[len("/rest/") :]
        return None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI entry point: lifespan, protocol routes and cards here, the rest via Quart."""
        if scope["type"] == "lifespan":
            await self._serve_lifespan(scope, receive, send)
            return
        if scope["type"] == "http":
            if self._host_refused(scope):
                request = ProtocolRequest(scope, receive)
                refusal = InvalidRequestError(
                    f"This server does not serve {request.header('host')}"
                )
                await rest_error(refusal).send(send, receive)
                return
            if is_grpc(scope):
                if is_standard_service(scope["path"]):
                    await serve_standard_service(scope, receive, send, self._takes_work)
                    return
                guard = next((m for m in self.mounts.values() if m.grpc and m.secured), None)
                await serve_grpc(
                    scope,
                    receive,
                    send,
                    self._grpc_mount,
                    self.a2a_settings,
                    self.request_observer,
                    self.body_budget,
                    guard,
                )
                return
            route = self._protocol_route(scope["path"])
            if route is not None:
                await self._serve_protocol(route, scope, receive, send)
                return
            card_route = self._card_routes.get(scope["path"])
            if card_route is not None and scope["method"] == "GET":
                await self._serve_card(*card_route, scope, receive, send)
                return
            # Quart's routes read their bodies under the protocol routes' limits.
            await serve_read_ahead(
                super().__call__, scope, receive, send, self.a2a_settings, self.body_budget
            )
            return
        await super().__call__(scope, receive, send)

    def _host_refused(self, scope: Any) -> bool:
        """A Host ``server.allowed_hosts`` does not list, where cards would echo it."""
        settings = self.a2a_settings
        if not settings.allowed_hosts or settings.public_url:
            return False
        host = next((v for k, v in scope["headers"] if k == b"host"), None)
        return not host_allowed(
            None if host is None else host.decode("latin-1"), settings.allowed_hosts
        )

    async def _takes_work(self) -> bool:
        """What ``/_a2a/health/ready`` answers, as gRPC health reports it."""
        status, _ = await readiness(self)
        return status == 200

    def _grpc_mount(self, tenant: str) -> AgentMount | None:
        """The agent a gRPC call's ``tenant`` names: by prefix, by name, or the root's."""
        tenant = tenant.strip("/")
        candidates = [m for m in self.mounts.values() if m.grpc]
        for mount in candidates:
            if grpc_tenant(mount.prefix) == tenant:
                return mount
        if tenant:
            return next((m for m in candidates if m.name == tenant), None)
        owner = self._root_card_owner
        return owner if owner is not None and owner.grpc else None

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
            base_url(request, self.a2a_settings),
            request.header("If-None-Match"),
            v0_3=v0_3 or mount.card_is_v0_3(version),
            negotiated=mount.compat_v0_3 and not v0_3,
        )
        content_type = JSON_CONTENT_TYPE if status == 200 else None
        await ProtocolResponse(status, body, content_type, headers).send(send, receive)

    async def _serve_protocol(
        self, route: tuple[AgentMount, str | None], scope: Any, receive: Any, send: Any
    ) -> None:
        began = time.perf_counter()
        # The body's share of the budget is held until the answer is ready:
        # a stream relays its events without it.
        with self.body_budget.share() as share:
            request = ProtocolRequest(scope, receive, share)
            response = await self._answer(route, request)
        if (
            response is not None
            and response.content_type == JSON_CONTENT_TYPE
            and answers_a2a_json(request.header("Accept"))
        ):
            response = replace(response, content_type=A2A_JSON_CONTENT_TYPE)
        if self.request_observer is not None:
            mount, rest_path = route
            self.request_observer(
                mount.name,
                "jsonrpc" if rest_path is None else "rest",
                request.operation,
                request.outcome if response is not None else "client_gone",
                time.perf_counter() - began,
            )
        del request  # a stream holds only what it relays
        if response is None:
            return
        streaming = isinstance(response.body, EventStreamBody)
        self.open_streams += streaming
        try:
            await response.send(send, receive)
        finally:
            self.open_streams -= streaming

    async def _answer(
        self, route: tuple[AgentMount, str | None], request: ProtocolRequest
    ) -> ProtocolResponse | None:
        mount, rest_path = route
        try:
            if rest_path is None:
                return await handle_jsonrpc(request, mount, self.a2a_settings)
            return await handle_rest(request, mount, self.a2a_settings, rest_path)
        except ClientGone:
            return None

    async def _live(self) -> Response:
        status, body = liveness()
        return Response(body, status, content_type=JSON_CONTENT_TYPE)

    async def _ready(self) -> Response:
        status, body = await readiness(self)
        return Response(body, status, content_type=JSON_CONTENT_TYPE)

    # --- lifespan -------------------------------------------------------------------

    async def _serve_lifespan(self, scope: Any, receive: Any, send: Any) -> None:
        """Quart-trio's lifespan, inside a nursery of the app's own for the hosts.

        Quart-trio's shutdown gives its nursery, and the shutdown functions
        running in it, ``BACKGROUND_TASK_SHUTDOWN_TIMEOUT`` (5 s) before
        cancelling them, which would cut the hosts' grace short. So the hosts
        and the push worker live in this nursery, and are stopped when the
        server announces the shutdown, before quart-trio's own begins.
        """

        async def receive_event() -> Any:
            event = await receive()
            if event["type"] == "lifespan.shutdown":
                await self._stop_hosts()
            return event

        try:
            async with trio.open_nursery() as self._services:
                await super().__call__(scope, receive_event, send)
                # Stopped in order by now, unless the start-up failed halfway:
                # then whatever did start ends here (hosts still record their
                # endings) instead of holding the lifespan open for good.
                self._services.cancel_scope.cancel()
        finally:
            await self._services_ended()

    async def _services_ended(self) -> None:
        """The services' nursery is gone: close the store if it is the app's own."""
        self._services = None
        if self._owns_store and self._store is not None:
            with trio.CancelScope(shield=True):
                await self._store.aclose()
            self._store = None

    async def _ensure_console(self) -> None:
        # The console sits on top of this module (it imports it), so it is
        # imported here, when serving begins.
        from ..console import ensure_console

        ensure_console(self)

    async def _start_hosts(self) -> None:
        telemetry.configure()  # traces, if the OTEL_* variables ask for them
        self.stopping = trio.Event()
        self._add_root_route()
        # Serving holds the database: a second server on it is refused here, as
        # are a bad path and a newer schema.
        try:
            await self.store.open(exclusive=True)
        except Exception as error:
            refuse_start(error)  # under hypercorn's CLI: one line, a non-zero exit
            raise
        services = self._services
        assert services is not None, "the hosts start with the app's ASGI lifespan"
        coordination = self.store.coordination
        if coordination is not None:  # several processes may serve this database
            self.cluster, self._cluster_stopped = Cluster(coordination), trio.Event()
            self.cluster.role = self.role
            self.cluster.agents = list(self._agents_served or self.mounts)
            # Each heartbeat says whether webhooks are pending: no poll.
            self.cluster.push_pending = self.push.notify
            self.push.poll_interval = math.inf
            for mount in self.mounts.values():
                mount.host.attach(self.cluster)
            await services.start(self._run_cluster, self.cluster)
        for hook in self.on_start:
            await hook()
        await services.start(self._run_checkpoints)
        await services.start(self._run_push)
        for mount in self.mounts.values():
            await services.start(mount.host.run)
        if self.a2a_settings.freeze_gc and gc.get_freeze_count() == 0:
            # Once per process (a program that froze its own heap is left as
            # it is), and garbage first, so that none is kept for good.
            gc.collect()
            gc.freeze()

    async def _run_cluster(self, cluster: Cluster, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            await cluster.run(task_status=task_status)
        finally:
            self._cluster_stopped.set()

    async def _run_push(self, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            with trio.CancelScope() as self._push_scope:
                await self.push.run(task_status=task_status)
        finally:
            self._push_stopped.set()

    async def _run_checkpoints(self, *, task_status: trio.TaskStatus[None]) -> None:
        scope, stopped = self._checkpoints = trio.CancelScope(), trio.Event()
        try:
            with scope:
                if isinstance(self.store, SqliteStore):
                    await checkpoint_periodically(self.store, task_status=task_status)
                else:  # PostgreSQL checkpoints on its own
                    task_status.started()
        finally:
            stopped.set()

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
        self._stop_working = trio.Event()
        self.role, self._agents_served = "worker", names
        try:
            await self.store.open(exclusive=True)
            if self.store.coordination is None:
                raise ValueError(
                    "a queue worker needs a database several processes share (PostgreSQL);"
                    f" {self.store.display} is not one: set storage.url (or"
                    " A2A_TRIO_DATABASE) to a postgresql:// URL"
                )
            async with trio.open_nursery() as self._services:
                await self._start_hosts()
                for name in names:
                    await self._services.start(self.mounts[name].host.serve_queue, concurrency)
                task_status.started()
                await self._stop_working.wait()
                await self._stop_hosts()
                self._services.cancel_scope.cancel()
        finally:
            await self._services_ended()

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
        self.stopping.set()
        for mount in self.mounts.values():
            mount.host.begin_close(now=now)
        self._stop_working.set()

    async def _stop_hosts(self) -> None:
        self.stopping.set()
        async with trio.open_nursery() as nursery:
            for mount in self.mounts.values():
                nursery.start_soon(mount.host.close)
        # Hosts are done, so nothing new is queued; what is undelivered stays
        # in the outbox for the next start.
        if self._push_scope is not None:
            self._push_scope.cancel()
            await self._push_stopped.wait()
        if self._checkpoints is not None:  # before the store closes under it
            scope, stopped = self._checkpoints
            scope.cancel()
            await stopped.wait()
            self._checkpoints = None
        if self.cluster is not None:  # last: the hosts' leases go with the membership
            self.cluster.stop()
            await self._cluster_stopped.wait()
            self.cluster = None

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

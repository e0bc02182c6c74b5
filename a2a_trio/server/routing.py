"""Which mounted agent answers a path: protocol routes, card routes and the root card.

The protocol routes (``{prefix}/jsonrpc``, ``{prefix}/rest/...``) and GET of a
card are answered straight from ASGI, before Quart's routing (see
:mod:`a2a_trio.server.asgi`); :class:`Routes` is the table they are looked up
in. The card routes are Quart routes too (named ``a2a.<name>.card``), which
answer HEAD and OPTIONS the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import NamedTuple

from quart import Quart, Response, request

from .asgi import JSON_CONTENT_TYPE
from .bindings import VERSION_HEADER, ServerSettings, base_url
from .cards import card_response, grpc_tenant
from .mount import AgentMount

__all__ = ["V0_3_CARD_PATH", "WELL_KNOWN_PATH", "CardRoute", "ProtocolRoute", "Routes"]

WELL_KNOWN_PATH = "/.well-known/agent-card.json"
#: Where 0.2 and 0.3 servers served the card (a2a-sdk 0.3's
#: PREV_AGENT_CARD_WELL_KNOWN_PATH): the card with its 0.3 keys is served
#: there, since the 1.0 card at WELL_KNOWN_PATH may hold no other keys.
V0_3_CARD_PATH = "/.well-known/agent.json"


class ProtocolRoute(NamedTuple):
    """The agent a protocol request goes to, and the path below ``/rest`` (None: JSON-RPC)."""

    mount: AgentMount
    rest_path: str | None


class CardRoute(NamedTuple):
    """The agent a card path belongs to, and whether it serves the card's 0.3 form."""

    mount: AgentMount
    v0_3: bool


class Routes:
    """The routes of an app's agents, and which agent owns the root card.

    ``app`` is the Quart app the card routes are added to, ``settings`` the
    server settings the cards' base URL is read from.
    """

    def __init__(self, app: Quart, settings: ServerSettings) -> None:
        self._app = app
        self._settings = settings
        #: Mounts whose protocol routes are answered, longest prefix first.
        self._protocol: list[AgentMount] = []
        #: Card paths (GET answered from ASGI) and the agent each belongs to.
        self._cards: dict[str, CardRoute] = {}
        #: The agent that owns ``/.well-known/agent-card.json``, and whether it claimed it.
        self.root_owner: AgentMount | None = None
        self._root_claimed = False
        #: Set when the root route is added (serving began): no agent is mounted after.
        self.sealed = False

    def owns_root(self, name: str, well_known: bool | None) -> bool:
        """Whether agent ``name``, mounted with ``well_known``, owns the root card.

        When no agent claims it explicitly, the first agent mounted (without
        ``well_known=False``) owns it; a second explicit claim is a ValueError,
        and so is any mount once serving began (a RuntimeError).
        """
        if well_known and self._root_claimed and self.root_owner is not None:
            raise ValueError(
                f"well_known: agents {self.root_owner.name!r} and {name!r} both claim "
                f"{WELL_KNOWN_PATH}; only one agent may own the root card"
            )
        if self.sealed:
            raise RuntimeError("agents are mounted before the app starts serving")
        return well_known if well_known is not None else self.root_owner is None

    def add(self, mount: AgentMount, *, claimed: bool) -> None:
        """Route ``mount``'s cards and protocol requests; ``claimed``: it asked for the root."""
        if self.sealed:
            raise RuntimeError("agents are mounted before the app starts serving")
        if mount.well_known:
            if self.root_owner is not None:  # an explicit claim takes over a default one
                self.root_owner.well_known = False
            self.root_owner = mount
            self._root_claimed = claimed
        for path, v0_3 in card_paths(mount, mount.prefix):
            name = f"a2a.{mount.name}.card-v0-3" if v0_3 else f"a2a.{mount.name}.card"
            self._app.add_url_rule(path, name, self._card_view(mount, v0_3), methods=["GET"])
            self._cards[path] = CardRoute(mount, v0_3)
        self._protocol.append(mount)
        self._protocol.sort(key=lambda m: len(m.prefix), reverse=True)

    def seal(self) -> None:
        """Serving begins: add the root card's routes; nothing is mounted after.

        An app with no agent yet stays open to mounting (it has no root card).
        """
        owner = self.root_owner
        if owner is None or self.sealed:
            return
        self.sealed = True
        for path, v0_3 in card_paths(owner, ""):
            self._cards[path] = CardRoute(owner, v0_3)
            suffix = "well-known-v0-3" if v0_3 else "well-known"
            view = self._app.view_functions[f"a2a.{owner.name}.{'card-v0-3' if v0_3 else 'card'}"]
            self._app.add_url_rule(path, f"a2a.{owner.name}.{suffix}", view, methods=["GET"])

    def protocol(self, path: str) -> ProtocolRoute | None:
        """The mount serving ``path`` and, for HTTP+JSON, the path below ``/rest``.

        The JSON-RPC route also answers with a trailing slash: the kit (and
        some clients) post to the interface URL that way.
        """
        for mount in self._protocol:
            prefix = mount.prefix
            if not path.startswith(prefix):
                continue
            below = path[len(prefix) :]
            if below in ("/jsonrpc", "/jsonrpc/"):
                return ProtocolRoute(mount, None)
            if below.startswith("/rest/") and len(below) > len("/rest/"):
                return ProtocolRoute(mount, below[len("/rest/") :])
        return None

    def card(self, path: str) -> CardRoute | None:
        """The agent whose card is served at ``path``, if any."""
        return self._cards.get(path)

    def grpc(self, tenant: str) -> AgentMount | None:
        """The agent a gRPC call's ``tenant`` names: by prefix, by name, or the root's."""
        tenant = tenant.strip("/")
        candidates = [m for m in self._protocol if m.grpc]
        for mount in candidates:
            if grpc_tenant(mount.prefix) == tenant:
                return mount
        if tenant:
            return next((m for m in candidates if m.name == tenant), None)
        owner = self.root_owner
        return owner if owner is not None and owner.grpc else None

    def _card_view(self, mount: AgentMount, v0_3: bool) -> Callable[[], Awaitable[Response]]:
        settings = self._settings

        async def card_view() -> Response:
            # GET is answered from ASGI; this serves HEAD (and OPTIONS) the same way.
            version = request.headers.get(VERSION_HEADER, request.args.get(VERSION_HEADER))
            status, body, headers = card_response(
                mount.card,
                base_url(request, settings),
                request.headers.get("If-None-Match"),
                v0_3=v0_3 or mount.card_is_v0_3(version),
                negotiated=mount.compat_v0_3 and not v0_3,
            )
            if status == 304:
                return Response(b"", status=304, headers=headers)
            return Response(body, status=200, headers=headers, content_type=JSON_CONTENT_TYPE)

        return card_view


def card_paths(mount: AgentMount, prefix: str) -> Iterable[tuple[str, bool]]:
    """The card paths of ``mount`` under ``prefix``: (path, whether it is the 0.3 form)."""
    yield f"{prefix}{WELL_KNOWN_PATH}", False
    if mount.compat_v0_3:
        yield f"{prefix}{V0_3_CARD_PATH}", True

"""Agent Cards: where they come from, and how they are served."""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import urlsplit

from ..protocol import PROTOCOL_VERSION, AgentCard, AgentInterface
from ..protocol.compat_v0_3 import card_for_both
from ..protocol.signing import CardSigner, signed_payload

__all__ = [
    "CardSource",
    "ServedCard",
    "card_document",
    "card_problems",
    "card_response",
    "check_signable",
    "import_object",
    "resolve_card",
    "signed_card",
    "v0_3_card_document",
]

#: A card, its JSON mapping, an import path ("pkg.mod:obj"), a callable that
#: returns either, or a provider object with a ``card()`` method (a class is
#: instantiated first).
CardSource = AgentCard | Mapping[str, Any] | Callable[[], Any] | str | object

JSONRPC_BINDING = "JSONRPC"
HTTP_JSON_BINDING = "HTTP+JSON"
GRPC_BINDING = "GRPC"


def import_object(path: str) -> Any:
    """Import ``package.module:attribute`` (or ``package.module.attribute``).

    A module that fails as it is imported (a SyntaxError, a NameError, ...)
    raises ImportError saying what and where (:func:`describe_failure`).
    """
    module_name, _, attribute = path.partition(":")
    if not attribute:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"{path!r} is not an import path like 'package.module:name'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError:
        raise
    except Exception as error:
        raise ImportError(f"importing {module_name} failed: {describe_failure(error)}") from None
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def describe_failure(error: BaseException) -> str:
    """``Kind: message (file, line N)``: what went wrong in the application's code, and where."""
    if isinstance(error, SyntaxError):  # where the parser stopped, not a frame
        return f"{type(error).__name__}: {error.msg} ({error.filename}, line {error.lineno})"
    frames = traceback.extract_tb(error.__traceback__)
    # The innermost frame of the application's own code, not of importlib.
    own = [frame for frame in frames if "importlib" not in frame.filename]
    where = f" ({own[-1].filename}, line {own[-1].lineno})" if own else ""
    return f"{type(error).__name__}: {error}{where}"


def resolve_card(source: CardSource) -> AgentCard:
    """Turn any accepted card source into a validated :class:`AgentCard`."""
    value: Any = source
    if isinstance(value, str):
        value = import_object(value)
    if isinstance(value, type) and not issubclass(value, AgentCard):
        value = value()
    if not isinstance(value, AgentCard | Mapping) and hasattr(value, "card"):
        value = value.card()
    elif callable(value) and not isinstance(value, AgentCard | Mapping):
        value = value()
    if isinstance(value, AgentCard):
        return value
    if isinstance(value, Mapping):
        return AgentCard.model_validate(value)
    raise TypeError(f"cannot make an Agent Card from {type(source).__name__}")


def grpc_target(base_url: str) -> str:
    """``host:port`` of ``base_url``: what a gRPC channel is opened to.

    gRPC addresses a server, never a path: a path in ``base_url`` (a public
    URL under a proxy's prefix) has no place here, and the agent is named by
    its tenant instead (see :mod:`a2a_trio.server.grpc_binding`).
    """
    try:
        parts = urlsplit(base_url)
        host = parts.hostname or "localhost"
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        # A Host header no URL can hold (a port past 65535, an unclosed
        # bracket): echoed as it came, as the other interfaces echo it.
        return base_url.partition("://")[2].partition("/")[0]
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}"


def grpc_tenant(prefix: str) -> str:
    """The tenant that names the agent mounted at ``prefix`` on the gRPC binding."""
    return prefix.strip("/")


def interfaces_for(base_url: str, prefix: str, *, grpc: bool = False) -> list[AgentInterface]:
    """The interfaces a mount at ``prefix`` serves, JSON-RPC first, gRPC last when on."""
    root = base_url.rstrip("/") + prefix
    interfaces = [
        AgentInterface(
            url=f"{root}/jsonrpc",
            protocol_binding=JSONRPC_BINDING,
            protocol_version=PROTOCOL_VERSION,
        ),
        AgentInterface(
            url=f"{root}/rest",
            protocol_binding=HTTP_JSON_BINDING,
            protocol_version=PROTOCOL_VERSION,
        ),
    ]
    if grpc:
        interfaces.append(
            AgentInterface(
                url=grpc_target(base_url),
                protocol_binding=GRPC_BINDING,
                tenant=grpc_tenant(prefix) or None,
                protocol_version=PROTOCOL_VERSION,
            )
        )
    return interfaces


def card_document(card: AgentCard, signer: CardSigner | None, *, v0_3: bool) -> dict[str, Any]:
    """A card as served: with the 0.3 keys when ``v0_3``, then signed by ``signer``.

    With the 0.3 keys, ``signer`` signs twice. The first signature covers
    the card as served, 0.3 keys included: what :func:`verify_card` (and any
    verifier of the received JSON) checks. The second covers the 1.0 form:
    a2a-sdk and @a2a-js/sdk 1.x read a card into their 1.0 model before they
    canonicalise it, which drops the 0.3 keys, so only that one verifies
    there. A card that carries signatures made elsewhere (a registry's, say)
    keeps its 1.0 form: they cover that form only.
    """
    if not v0_3 or card.signatures:
        document = card.to_wire()
        return signer.sign(document) if signer is not None else document
    document = card_for_both(card)
    if signer is None:
        return document
    signed = signer.sign(document)
    signed["signatures"].append(signer.signature(signer.served_form(card.to_wire())))
    return signed


def v0_3_card_document(served: AgentCard, signer: CardSigner | None) -> dict[str, Any]:
    """A card :func:`signed_card` made, as a 0.3 reader gets it: signed again with its 0.3 keys."""
    if signer is not None and served.signatures:
        # signed_card appended this signer's signature last; it is made again.
        served = served.model_copy(update={"signatures": served.signatures[:-1] or None})
    return card_document(served, signer, v0_3=True)


log = logging.getLogger("a2a_trio.server")


def check_signable(card: AgentCard, signer: CardSigner) -> None:
    """ValueError when ``card`` cannot be served signed; a warning naming what it leaves out.

    The signer's served form leaves out every empty value (see
    :meth:`CardSigner.sign`): a required field that is empty cannot be, and
    a scheme required with no scopes, say, is no longer in the card.
    """
    wire = card.to_wire()
    signed_payload(wire)  # an integer beyond 2**53 has no canonical form
    try:
        AgentCard.model_validate(signer.served_form(wire))
    except ValueError as error:
        raise ValueError(
            f"card {card.name!r}: signed, it leaves out its empty values, and then it is "
            f"not a card ({error}); fill them in, or sign with keep_empty"
        ) from None
    dropped = signer.dropped(wire)
    if dropped:
        log.warning(
            "card %r is served signed without its empty values %s, so that a2a-sdk and "
            "@a2a-js/sdk verify it too (signing keep_empty keeps them)",
            card.name,
            ", ".join(dropped),
        )


def signed_card(card: AgentCard, signer: CardSigner) -> AgentCard:
    """``card`` with ``signer``'s signature appended, as a model (the extended card's form).

    The model is made from the signer's served form and signed as it
    renders (a model puts back an empty ``capabilities``, say): rendering it
    gives the signed document up to the defaults that the signed payload
    leaves out anyway, so the signature holds.
    """
    served = AgentCard.model_validate(signer.served_form(card.to_wire()))
    return AgentCard.model_validate(signer.sign(served.to_wire(), as_rendered=True))


@dataclass
class ServedCard:
    """One card as served from one mount, with its HTTP caching validators.

    ``supportedInterfaces`` is filled in from the mount when the card leaves it
    out. The rendered body (and so the ETag) depends on the address clients
    use, so it is cached per base URL. With a ``signer`` the body is the
    signed card (see :meth:`CardSigner.sign`); it is signed once per base URL
    and again only when ``card`` is replaced (replace it, do not mutate it).
    Its 0.3 form (``v0_3``, the 1.0 card with the keys a 0.3 client reads) is
    rendered and cached beside it.
    """

    card: AgentCard
    prefix: str
    max_age: int = 300
    signer: CardSigner | None = None
    #: The agent answers on the gRPC binding: its card lists the GRPC interface.
    grpc: bool = False
    last_modified: datetime = field(
        default_factory=lambda: datetime.now(UTC).replace(microsecond=0)
    )
    _rendered: dict[tuple[str, bool], tuple[bytes, str]] = field(default_factory=dict)
    _rendered_card: AgentCard | None = None

    def complete(self, base_url: str) -> AgentCard:
        """The card with ``supportedInterfaces`` filled in for ``base_url``."""
        if self.card.supported_interfaces:
            return self.card
        return self.card.model_copy(
            update={"supported_interfaces": interfaces_for(base_url, self.prefix, grpc=self.grpc)}
        )

    def served(self, base_url: str) -> AgentCard:
        """The card exactly as served at ``base_url``, signatures included."""
        return AgentCard.model_validate_json(self.render(base_url)[0])

    def render(self, base_url: str, *, v0_3: bool = False) -> tuple[bytes, str]:
        """The JSON body and its strong ETag (of the 0.3 form with ``v0_3``)."""
        if self._rendered_card is not self.card:
            self._rendered.clear()
            self._rendered_card = self.card
        cached = self._rendered.get((base_url, v0_3))
        if cached is None:
            card = self.complete(base_url)
            if self.signer is None and not v0_3:
                body = card.to_json().encode()
            else:
                document = card_document(card, self.signer, v0_3=v0_3)
                body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            if len(self._rendered) > 64:  # many Host headers: do not grow without bound
                self._rendered.clear()
            cached = self._rendered[base_url, v0_3] = (body, etag)
        return cached

    def headers(self, etag: str) -> dict[str, str]:
        return {
            "ETag": etag,
            "Cache-Control": f"public, max-age={self.max_age}",
            "Last-Modified": format_datetime(self.last_modified, usegmt=True),
        }


def card_response(
    served: ServedCard,
    base_url: str,
    if_none_match: str | None,
    *,
    v0_3: bool = False,
    negotiated: bool = False,
) -> tuple[int, bytes, dict[str, str]]:
    """Status, body and headers of a card GET: 304 when ``If-None-Match`` names its ETag.

    ``negotiated``: which form is served depends on the request's
    ``A2A-Version``, so caches are told so (``Vary``).
    """
    body, etag = served.render(base_url, v0_3=v0_3)
    headers = served.headers(etag) | {"Access-Control-Allow-Origin": "*"}
    if negotiated:
        headers["Vary"] = "A2A-Version"
    match = (if_none_match or "").strip()
    if match and (match == "*" or etag in (tag.strip() for tag in match.split(","))):
        return 304, b"", headers
    return 200, body, headers


#: A gRPC interface's address: ``host:port`` (a gRPC target), or an http(s) URL.
_GRPC_TARGET = re.compile(r"^(https?://\S+|(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):\d{1,5})$")
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][\w!#$&^.+-]*/[A-Za-z0-9*][\w!#$&^.+*-]*(\s*;.*)?$")


def card_problems(card: AgentCard) -> list[str]:
    """What makes a card unusable for clients; empty when it is valid.

    Required fields are filled, there is at least one skill and one
    interface, media types parse, and every security requirement names a
    declared scheme.
    """
    problems: list[str] = []
    for field_name in ("name", "description", "version"):
        if not getattr(card, field_name).strip():
            problems.append(f"{field_name}: must not be empty")
    if not card.skills:
        problems.append("skills: at least one skill is required")
    if not card.supported_interfaces:
        problems.append("supportedInterfaces: at least one interface is required")
    for index, interface in enumerate(card.supported_interfaces or []):
        where = f"supportedInterfaces[{index}]"
        if interface.protocol_binding == GRPC_BINDING:
            if not _GRPC_TARGET.match(interface.url):
                problems.append(
                    f"{where}.url: {interface.url!r} is neither host:port nor an http(s) URL"
                )
        elif not interface.url.startswith(("http://", "https://")):
            problems.append(f"{where}.url: {interface.url!r} is not an http(s) URL")
        if interface.protocol_binding not in (JSONRPC_BINDING, HTTP_JSON_BINDING, GRPC_BINDING):
            problems.append(f"{where}.protocolBinding: {interface.protocol_binding!r} is unknown")
        if not re.match(r"^\d+\.\d+$", interface.protocol_version):
            problems.append(
                f"{where}.protocolVersion: {interface.protocol_version!r} is not Major.Minor"
            )
    modes = [("defaultInputModes", card.default_input_modes)]
    modes.append(("defaultOutputModes", card.default_output_modes))
    for index, skill in enumerate(card.skills):
        if not skill.id.strip() or not skill.name.strip():
            problems.append(f"skills[{index}]: id and name must not be empty")
        if not skill.tags:
            problems.append(f"skills[{index}].tags: at least one tag is required")
        modes.append((f"skills[{index}].inputModes", skill.input_modes or []))
        modes.append((f"skills[{index}].outputModes", skill.output_modes or []))
    for where, values in modes:
        if where.startswith("default") and not values:
            problems.append(f"{where}: at least one media type is required")
        for value in values:
            if not _MEDIA_TYPE.match(value):
                problems.append(f"{where}: {value!r} is not a media type")
    declared = set(card.security_schemes or {})
    requirements = [("securityRequirements", r) for r in card.security_requirements or []]
    for index, skill in enumerate(card.skills):
        requirements += [
            (f"skills[{index}].securityRequirements", r) for r in skill.security_requirements or []
        ]
    for where, requirement in requirements:
        for name in requirement.schemes:
            if name not in declared:
                problems.append(f"{where}: scheme {name!r} is not declared in securitySchemes")
    return problems

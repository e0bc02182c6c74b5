"""One Agent Card that a 1.0 client and a 0.3 client both read. Pure.

The 1.0 card lists its endpoints in ``supportedInterfaces``; a 0.3 client
looks for ``url``, ``preferredTransport`` and ``additionalInterfaces``
instead, and for the authentication it needs in ``security`` and in
security schemes tagged by ``type``. Both sets of keys live side by side:
each reader ignores the other's, so the served card keeps every 1.0 field
and adds what 0.3 needs, derived from the same interfaces.
"""

from __future__ import annotations

from typing import Any

from ..models import AgentCard, AgentInterface, SecurityRequirement, SecurityScheme

__all__ = ["V0_3_PROTOCOL_VERSION", "card_for_both", "card_v0_3_fields", "declares_v0_3"]

#: What a 0.3 card says in ``protocolVersion``.
V0_3_PROTOCOL_VERSION = "0.3.0"

JSON = dict[str, Any]


def _interfaces_for_v0_3(card: AgentCard) -> list[AgentInterface]:
    interfaces = card.supported_interfaces or []
    declared = [i for i in interfaces if i.protocol_version.startswith("0.3")]
    # The server answers 0.3 on the JSON endpoints it serves 1.0 on (it tells
    # the versions apart per request), so without 0.3 entries each of those
    # counts; not gRPC, whose 0.3 service (package a2a.v1) is not served.
    chosen = declared or [i for i in interfaces if i.protocol_binding != "GRPC"]
    unique: dict[tuple[str, str], AgentInterface] = {}
    for interface in chosen:
        unique.setdefault((interface.url, interface.protocol_binding), interface)
    return list(unique.values())


def declares_v0_3(card: AgentCard) -> bool:
    """True when the card lists an interface of protocol 0.3 (or of no version).

    a2a-sdk 1.3's rule for adding the 0.3 keys to the card it serves
    (``to_compat_agent_card``): an agent that names a 0.3 interface expects
    0.3 readers at its default card path.
    """
    return any(
        not i.protocol_version or i.protocol_version.startswith("0.")
        for i in card.supported_interfaces or []
    )


def _requirements(requirements: list[SecurityRequirement] | None) -> list[JSON] | None:
    if requirements is None:
        return None
    return [
        {name: list(scopes.values) for name, scopes in requirement.schemes.items()}
        for requirement in requirements
    ]


def card_v0_3_fields(card: AgentCard) -> JSON:
    """The top-level fields a 0.3 card has and a 1.0 card does not.

    ``url`` and ``preferredTransport`` name the first interface, as 1.0's
    first ``supportedInterfaces`` entry is the preferred one;
    ``additionalInterfaces`` lists all of them, the first included, as the
    0.3 spec recommends.
    """
    interfaces = _interfaces_for_v0_3(card)
    fields: JSON = {"protocolVersion": V0_3_PROTOCOL_VERSION}
    if interfaces:
        fields["url"] = interfaces[0].url
        fields["preferredTransport"] = interfaces[0].protocol_binding
        fields["additionalInterfaces"] = [
            {"url": interface.url, "transport": interface.protocol_binding}
            for interface in interfaces
        ]
    if card.capabilities.extended_agent_card is not None:
        fields["supportsAuthenticatedExtendedCard"] = card.capabilities.extended_agent_card
    security = _requirements(card.security_requirements)
    if security is not None:
        fields["security"] = security
    return fields


def _scheme_v0_3_fields(scheme: SecurityScheme) -> JSON:
    """The 0.3 keys of one security scheme (``type`` and its flat members)."""
    if scheme.api_key_security_scheme is not None:
        api_key = scheme.api_key_security_scheme
        fields: JSON = {"type": "apiKey", "in": api_key.location, "name": api_key.name}
        description = api_key.description
    elif scheme.http_auth_security_scheme is not None:
        http = scheme.http_auth_security_scheme
        fields = {"type": "http", "scheme": http.scheme}
        if http.bearer_format is not None:
            fields["bearerFormat"] = http.bearer_format
        description = http.description
    elif scheme.oauth2_security_scheme is not None:
        oauth2 = scheme.oauth2_security_scheme
        # 1.0 and 0.3 spell the flows alike. 0.3 has no device code flow, but
        # it stays: a2a-sdk 1.x, seeing `type`, rebuilds the 1.0 scheme from
        # these members and would lose it, and a2a-sdk 0.3 ignores the key.
        flows = oauth2.flows.model_dump(mode="json", exclude_none=True)
        fields = {"type": "oauth2", "flows": flows}
        if oauth2.oauth2_metadata_url is not None:
            fields["oauth2MetadataUrl"] = oauth2.oauth2_metadata_url
        description = oauth2.description
    elif scheme.open_id_connect_security_scheme is not None:
        oidc = scheme.open_id_connect_security_scheme
        fields = {"type": "openIdConnect", "openIdConnectUrl": oidc.open_id_connect_url}
        description = oidc.description
    else:
        assert scheme.mtls_security_scheme is not None
        fields = {"type": "mutualTLS"}
        description = scheme.mtls_security_scheme.description
    if description is not None:
        fields["description"] = description
    return fields


def card_for_both(card: AgentCard) -> JSON:
    """The card as served to every reader: the 1.0 card with the 0.3 keys added.

    No 1.0 key is changed or removed; security schemes and skills gain their
    0.3 members next to their 1.0 ones.
    """
    wire = card.to_wire()
    wire.update(card_v0_3_fields(card))
    if card.security_schemes:
        for name, scheme in card.security_schemes.items():
            wire["securitySchemes"][name].update(_scheme_v0_3_fields(scheme))
    for skill_wire, skill in zip(wire.get("skills", []), card.skills, strict=True):
        security = _requirements(skill.security_requirements)
        if security is not None:
            skill_wire["security"] = security
    return wire

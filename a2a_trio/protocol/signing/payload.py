"""The payload a card's signatures cover (spec 8.4.1), and the form the SDKs sign."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import rfc8785

from .keys import CardSignatureError

__all__ = ["inside", "presence_normalised", "signed_payload", "without_empties"]

# --- the payload ----------------------------------------------------------------------
#
# Rule 1 of spec 8.4.1 needs the schema: a REQUIRED field stays even when empty,
# an `optional` field stays whenever it is present, any other field is left out
# when it holds its default ("", false, an empty list or map). Message fields
# stay when present. Struct values (extension params, a signature's header) are
# data, not fields: they are kept exactly. The table is a2a.proto's, for every
# message a card reaches; a key it does not list (a newer field) is kept, so the
# signature covers it.

_REQUIRED, _OPTIONAL, _PLAIN, _STRUCT = "required", "optional", "plain", "struct"

_Field = tuple[str, str | None]  # (presence, message type of the value or its items)

_SCHEMA: dict[str, dict[str, _Field]] = {
    "AgentCard": {
        "name": (_REQUIRED, None),
        "description": (_REQUIRED, None),
        "supportedInterfaces": (_REQUIRED, "AgentInterface"),
        "provider": (_OPTIONAL, "AgentProvider"),
        "version": (_REQUIRED, None),
        "documentationUrl": (_OPTIONAL, None),
        "capabilities": (_REQUIRED, "AgentCapabilities"),
        "securitySchemes": (_PLAIN, "SecurityScheme"),
        "securityRequirements": (_PLAIN, "SecurityRequirement"),
        "defaultInputModes": (_REQUIRED, None),
        "defaultOutputModes": (_REQUIRED, None),
        "skills": (_REQUIRED, "AgentSkill"),
        "iconUrl": (_OPTIONAL, None),
    },
    "AgentInterface": {
        "url": (_REQUIRED, None),
        "protocolBinding": (_REQUIRED, None),
        "tenant": (_PLAIN, None),
        "protocolVersion": (_REQUIRED, None),
    },
    "AgentProvider": {"url": (_REQUIRED, None), "organization": (_REQUIRED, None)},
    "AgentCapabilities": {
        "streaming": (_OPTIONAL, None),
        "pushNotifications": (_OPTIONAL, None),
        "extensions": (_PLAIN, "AgentExtension"),
        "extendedAgentCard": (_OPTIONAL, None),
    },
    "AgentExtension": {
        "uri": (_PLAIN, None),
        "description": (_PLAIN, None),
        "required": (_PLAIN, None),
        "params": (_STRUCT, None),
    },
    "SecurityScheme": {
        "apiKeySecurityScheme": (_OPTIONAL, "APIKeySecurityScheme"),
        "httpAuthSecurityScheme": (_OPTIONAL, "HTTPAuthSecurityScheme"),
        "oauth2SecurityScheme": (_OPTIONAL, "OAuth2SecurityScheme"),
        "openIdConnectSecurityScheme": (_OPTIONAL, "OpenIdConnectSecurityScheme"),
        "mtlsSecurityScheme": (_OPTIONAL, "MutualTlsSecurityScheme"),
    },
    "APIKeySecurityScheme": {
        "description": (_PLAIN, None),
        "location": (_REQUIRED, None),
        "name": (_REQUIRED, None),
    },
    "HTTPAuthSecurityScheme": {
        "description": (_PLAIN, None),
        "scheme": (_REQUIRED, None),
        "bearerFormat": (_PLAIN, None),
    },
    "OAuth2SecurityScheme": {
        "description": (_PLAIN, None),
        "flows": (_REQUIRED, "OAuthFlows"),
        "oauth2MetadataUrl": (_PLAIN, None),
    },
    "OAuthFlows": {
        "authorizationCode": (_OPTIONAL, "OAuthFlow"),
        "clientCredentials": (_OPTIONAL, "OAuthFlow"),
        "implicit": (_OPTIONAL, "OAuthFlow"),
        "password": (_OPTIONAL, "OAuthFlow"),
        "deviceCode": (_OPTIONAL, "OAuthFlow"),
    },
    # The five flows share their field names; a flow's REQUIRED URLs are never
    # empty in a usable card, so treating every URL as plain loses nothing.
    "OAuthFlow": {
        "authorizationUrl": (_PLAIN, None),
        "tokenUrl": (_PLAIN, None),
        "refreshUrl": (_PLAIN, None),
        "deviceAuthorizationUrl": (_PLAIN, None),
        "scopes": (_PLAIN, None),
        "pkceRequired": (_PLAIN, None),
    },
    "OpenIdConnectSecurityScheme": {
        "description": (_PLAIN, None),
        "openIdConnectUrl": (_REQUIRED, None),
    },
    "MutualTlsSecurityScheme": {"description": (_PLAIN, None)},
    "SecurityRequirement": {"schemes": (_PLAIN, "StringList")},
    "StringList": {"list": (_PLAIN, None)},
    "AgentSkill": {
        "id": (_REQUIRED, None),
        "name": (_REQUIRED, None),
        "description": (_REQUIRED, None),
        "tags": (_REQUIRED, None),
        "examples": (_PLAIN, None),
        "inputModes": (_PLAIN, None),
        "outputModes": (_PLAIN, None),
        "securityRequirements": (_PLAIN, "SecurityRequirement"),
    },
}

#: Map fields: their values are messages (or strings), their keys are data.
_MAPS = {("AgentCard", "securitySchemes"), ("SecurityRequirement", "schemes")}


def _is_default(value: Any) -> bool:
    return value is None or value is False or value == "" or value == [] or value == {}


def _normalise(value: Any, message: str | None) -> Any:
    if message is None or not isinstance(value, Mapping):
        if isinstance(value, list) and message is not None:
            return [_normalise(item, message) for item in value]
        return value
    schema = _SCHEMA[message]
    result: dict[str, Any] = {}
    for key, item in value.items():
        presence, child = schema.get(key, (_STRUCT, None))
        # ProtoJSON's null is an absent field, whatever the field.
        if (presence == _PLAIN and _is_default(item)) or (presence != _STRUCT and item is None):
            continue
        if presence == _STRUCT or child is None:
            result[key] = item
        elif (message, key) in _MAPS and isinstance(item, Mapping):
            result[key] = {name: _normalise(entry, child) for name, entry in item.items()}
        else:
            result[key] = _normalise(item, child)
    return result


def presence_normalised(card: Mapping[str, Any]) -> dict[str, Any]:
    """The card's ProtoJSON object as proto3 field presence has it, signatures kept.

    Plain fields holding their default (``""``, ``false``, empty lists and
    maps, ``null``) are removed; REQUIRED fields, ``optional`` fields that are
    present, messages, map entries and Struct contents are kept as they are.
    A signing server serves this form, so that the card a client receives is
    exactly the payload plus its signatures.
    """
    normalised: dict[str, Any] = _normalise(card, "AgentCard")
    signatures = card.get("signatures")
    if signatures:
        normalised["signatures"] = signatures
    else:
        normalised.pop("signatures", None)
    return normalised


def signed_payload(card: Mapping[str, Any]) -> bytes:
    """The bytes a card's signatures cover (spec 8.4.1).

    The card without ``signatures``, normalised by
    :func:`presence_normalised`, in RFC 8785 canonical form (UTF-8). Raises
    :class:`CardSignatureError` when the card has no canonical form (an
    integer beyond 2**53, a NaN, an unpaired surrogate).
    """
    document = presence_normalised(card)
    document.pop("signatures", None)
    try:
        return rfc8785.dumps(document)
    except rfc8785.CanonicalizationError as error:
        raise CardSignatureError(
            f"the card has no RFC 8785 canonical form, so no signature can cover it: {error}"
        ) from None


# a2a-sdk and @a2a-js/sdk (as of 1.3) remove every empty value before
# canonicalising, where spec 8.4.1 keeps REQUIRED fields, present optional
# fields, map entries and Struct contents. A signature over their form says
# nothing about what it leaves out, so it is not accepted; it is only
# recognised, so that the failure explains itself.


def without_empties(value: Any, path: str, dropped: list[str]) -> Any:
    """``value`` without its empty values (as the SDKs sign); their paths go to ``dropped``."""
    cleaned: Any = value
    if isinstance(value, Mapping):
        cleaned = {}
        for key, item in value.items():
            kept = without_empties(item, f"{path}.{key}" if path else str(key), dropped)
            if kept is not None:
                cleaned[key] = kept
    elif isinstance(value, list):
        cleaned = []
        for index, item in enumerate(value):
            kept = without_empties(item, f"{path}[{index}]", dropped)
            if kept is not None:
                cleaned.append(kept)
    if cleaned is None or cleaned in ("", [], {}):
        dropped.append(path)
        return None
    return cleaned


def inside(path: str, other: str) -> bool:
    """Whether the value at ``path`` lies inside the one at ``other``."""
    return path != other and path.startswith((other + ".", other + "["))

"""Agent Card signatures (spec 8.4): the signed payload, signing, verifying.

A signature is a JWS (RFC 7515) whose payload is the card without its
``signatures``, with the values proto3 field presence leaves out removed
(spec 8.4.1 rule 1, see :func:`signed_payload`), in its RFC 8785 (JCS)
canonical form. The payload is not carried: a verifier rebuilds it from the
card it received. Canonicalisation is the ``rfc8785`` package's, the JWS is
PyJWT's; nothing here does I/O, so fetching cards and key sets is the
caller's business.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jwt
import rfc8785
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt.api_jws import PyJWS
from jwt.utils import base64url_decode, base64url_encode

__all__ = [
    "SIGNING_ALGORITHMS",
    "CardKeys",
    "CardSignatureError",
    "CardSigner",
    "SigningAlgorithm",
    "VerifiedSignature",
    "presence_normalised",
    "signature_headers",
    "signed_payload",
    "verify_card",
]

SigningAlgorithm = Literal["ES256", "RS256", "EdDSA"]
SIGNING_ALGORITHMS: tuple[SigningAlgorithm, ...] = ("ES256", "RS256", "EdDSA")

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


# --- keys -----------------------------------------------------------------------------


class CardSignatureError(ValueError):
    """A card's signatures cannot be made or do not verify; the message says why."""


def _key_kind(key: Any) -> str:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "an RSA key"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return f"an EC key on {key.curve.name}"
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return "an Ed25519 key"
    if isinstance(key, ed448.Ed448PrivateKey | ed448.Ed448PublicKey):
        return "an Ed448 key"
    return f"a {type(key).__name__}"


def _fits(algorithm: str, key: Any) -> bool:
    """Whether ``key`` is of the type ``algorithm`` signs with."""
    if algorithm == "ES256":
        return (
            isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey)
            and key.curve.name == "secp256r1"
        )
    if algorithm == "RS256":
        return isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey)
    if algorithm == "EdDSA":
        return isinstance(
            key,
            ed25519.Ed25519PrivateKey
            | ed25519.Ed25519PublicKey
            | ed448.Ed448PrivateKey
            | ed448.Ed448PublicKey,
        )
    return False


_KEY_FOR = {
    "ES256": "an EC key on P-256",
    "RS256": "an RSA key",
    "EdDSA": "an Ed25519 (or Ed448) key",
}


@dataclass(frozen=True)
class CardKeys:
    """Public keys trusted to sign cards.

    ``by_kid`` answers signatures naming that ``kid`` (a JWKS gives these);
    ``any_kid`` is tried for every signature (a PEM key given on its own).
    """

    by_kid: Mapping[str, Any] = field(default_factory=dict)
    any_kid: Sequence[Any] = ()

    @classmethod
    def from_jwks(cls, jwks: Any) -> CardKeys:
        """The keys of a JWKS document (``{"keys": [...]}``); a key without ``kid`` fits any."""
        if not isinstance(jwks, Mapping) or not isinstance(jwks.get("keys"), list):
            raise ValueError('a JWKS is a JSON object with a "keys" list')
        by_kid: dict[str, Any] = {}
        any_kid: list[Any] = []
        for index, entry in enumerate(jwks["keys"]):
            try:
                key = jwt.PyJWK(entry).key
            except jwt.PyJWTError as error:
                raise ValueError(f"JWKS key {index} cannot be used: {error}") from None
            kid = entry.get("kid") if isinstance(entry, Mapping) else None
            if isinstance(kid, str):
                by_kid[kid] = key
            else:
                any_kid.append(key)
        return cls(by_kid, any_kid)

    @classmethod
    def from_pem(cls, *pems: str | bytes) -> CardKeys:
        """PEM public keys (or certificates' keys) that may sign under any ``kid``."""
        keys = []
        for pem in pems:
            data = pem.encode() if isinstance(pem, str) else pem
            try:
                keys.append(serialization.load_pem_public_key(data))
            except ValueError:
                raise ValueError("not a PEM public key (-----BEGIN PUBLIC KEY-----)") from None
        return cls({}, keys)

    def __bool__(self) -> bool:
        return bool(self.by_kid or self.any_kid)

    def for_kid(self, kid: str | None) -> list[Any]:
        """The keys to try for a signature whose header names ``kid``.

        The key of that ``kid`` first, if there is one, then every unnamed key.
        """
        named = [self.by_kid[kid]] if kid is not None and kid in self.by_kid else []
        return named + list(self.any_kid)


# --- signing --------------------------------------------------------------------------


class CardSigner:
    """Signs cards with one private key under one ``kid`` (and optional ``jku``).

    The protected header is ``{"alg", "typ": "JOSE", "kid"[, "jku"]}``, as
    spec 8.4.2 asks.
    """

    def __init__(
        self,
        private_key_pem: str | bytes,
        *,
        algorithm: SigningAlgorithm,
        kid: str,
        jku: str | None = None,
        keep_empty: bool = False,
    ) -> None:
        if algorithm not in SIGNING_ALGORITHMS:
            raise ValueError(
                f"algorithm {algorithm!r} is not one of {', '.join(SIGNING_ALGORITHMS)}"
            )
        if not kid:
            raise ValueError("a kid is required: verifiers pick the key by it")
        data = private_key_pem.encode() if isinstance(private_key_pem, str) else private_key_pem
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as error:
            raise ValueError(f"not an unencrypted PEM private key: {error}") from None
        private = (
            rsa.RSAPrivateKey,
            ec.EllipticCurvePrivateKey,
            ed25519.Ed25519PrivateKey,
            ed448.Ed448PrivateKey,
        )
        if not isinstance(key, private) or not _fits(algorithm, key):
            raise ValueError(f"{algorithm} needs {_KEY_FOR[algorithm]}; this is {_key_kind(key)}")
        self.algorithm: SigningAlgorithm = algorithm
        self.kid = kid
        self.jku = jku
        #: Serve empty values that spec 8.4.1 keeps ("capabilities": {}, a
        #: scheme required with no scopes); see :meth:`served_form`.
        self.keep_empty = keep_empty
        self._key = key

    @property
    def public_key_pem(self) -> str:
        """The public half, as a PEM ``PUBLIC KEY`` (for ``a2a-trio card --verify --key``)."""
        public = self._key.public_key()
        return public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode()

    def jwks(self) -> dict[str, Any]:
        """A JWKS holding the public key, to publish at ``jku``."""
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        jwk = algorithm.to_jwk(self._key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig"}]}

    def signature(self, card: Mapping[str, Any]) -> dict[str, str]:
        """The ``AgentCardSignature`` object of ``card`` (ProtoJSON)."""
        header: dict[str, Any] = {"typ": "JOSE", "kid": self.kid}
        if self.jku:
            header["jku"] = self.jku
        compact = PyJWS().encode(
            signed_payload(card), self._key, algorithm=self.algorithm, headers=header
        )
        protected, _, signature = compact.split(".")
        return {"protected": protected, "signature": signature}

    def served_form(self, card: Mapping[str, Any]) -> dict[str, Any]:
        """The card as this signer serves it, signatures kept: see :meth:`sign`."""
        document = presence_normalised(card)
        if self.keep_empty:
            return document
        signatures = document.pop("signatures", None)
        cleaned: dict[str, Any] = _without_empties(document, "", []) or {}
        if signatures:
            cleaned["signatures"] = signatures
        return cleaned

    def dropped(self, card: Mapping[str, Any]) -> list[str]:
        """Where the served form leaves out an empty value that spec 8.4.1 keeps."""
        if self.keep_empty:
            return []
        document = presence_normalised(card)
        document.pop("signatures", None)
        dropped: list[str] = []
        _without_empties(document, "", dropped)
        return [path for path in dropped if not any(_inside(path, q) for q in dropped)]

    def sign(self, card: Mapping[str, Any], *, as_rendered: bool = False) -> dict[str, Any]:
        """The card as a signing server serves it: normalised, this signature appended.

        Normalised is :func:`presence_normalised` and then, unless
        ``keep_empty``, without any empty value (``""``, ``[]``, ``{}``,
        recursively): a2a-sdk and @a2a-js/sdk drop those before they
        canonicalise, where spec 8.4.1 keeps some, so only a card that has
        none gives every verifier the same bytes. Signatures the card already
        carries (a registry's, say) are kept: a card that has them is served
        as it came (their signer chose its form), and so is one
        ``as_rendered`` (a model's rendering, which puts its defaults back).
        """
        as_is = as_rendered or bool(card.get("signatures"))
        document = presence_normalised(card) if as_is else self.served_form(card)
        document["signatures"] = [*document.get("signatures", []), self.signature(document)]
        return document


# --- verifying ------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifiedSignature:
    """The signature that verified: its position in ``signatures`` and its header."""

    index: int
    algorithm: str
    kid: str | None
    jku: str | None


def signature_headers(card: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each signature's protected header (``{}`` for one that does not decode)."""
    headers = []
    for entry in card.get("signatures") or []:
        headers.append(_protected_header(entry) if isinstance(entry, Mapping) else {})
    return headers


def _protected_header(entry: Mapping[str, Any]) -> dict[str, Any]:
    try:
        header = json.loads(base64url_decode(str(entry.get("protected", "")).encode()))
    except (binascii.Error, ValueError):
        return {}
    return header if isinstance(header, dict) else {}


def verify_card(
    card: Mapping[str, Any],
    keys: CardKeys,
    *,
    algorithms: Iterable[str] = SIGNING_ALGORITHMS,
) -> VerifiedSignature:
    """Check that at least one of the card's signatures verifies with ``keys``.

    ``card`` is the card as received (decoded JSON), not a model: fields this
    version does not know are covered too. Returns the first signature that
    verifies; raises :class:`CardSignatureError` naming each signature's
    problem otherwise.
    """
    accepted = list(algorithms)
    entries = card.get("signatures")
    if not entries:
        raise CardSignatureError("the card has no signatures")
    if not isinstance(entries, list):
        raise CardSignatureError("the card's signatures field is not a list")
    payload = base64url_encode(signed_payload(card)).decode()
    problems = []
    for index, entry in enumerate(entries):
        problem = _check(index, entry, payload, keys, accepted)
        if isinstance(problem, VerifiedSignature):
            return problem
        problems.append(f"signature {index + 1}: {problem}")
    hint = _sdk_form_hint(card, keys, accepted)
    raise CardSignatureError("no signature verifies: " + "; ".join(problems) + hint)


# a2a-sdk and @a2a-js/sdk (as of 1.3) remove every empty value before
# canonicalising, where spec 8.4.1 keeps REQUIRED fields, present optional
# fields, map entries and Struct contents. A signature over their form says
# nothing about what it leaves out, so it is not accepted; it is only
# recognised, so that the failure explains itself.


def _without_empties(value: Any, path: str, dropped: list[str]) -> Any:
    cleaned: Any = value
    if isinstance(value, Mapping):
        cleaned = {}
        for key, item in value.items():
            kept = _without_empties(item, f"{path}.{key}" if path else str(key), dropped)
            if kept is not None:
                cleaned[key] = kept
    elif isinstance(value, list):
        cleaned = []
        for index, item in enumerate(value):
            kept = _without_empties(item, f"{path}[{index}]", dropped)
            if kept is not None:
                cleaned.append(kept)
    if cleaned is None or cleaned in ("", [], {}):
        dropped.append(path)
        return None
    return cleaned


def _sdk_form_hint(card: Mapping[str, Any], keys: CardKeys, accepted: list[str]) -> str:
    """A sentence when a signature verifies over the SDKs' form of the card only."""
    document = presence_normalised(card)
    document.pop("signatures", None)
    dropped: list[str] = []
    cleaned = _without_empties(document, "", dropped) or {}
    if not dropped:
        return ""
    try:
        payload = base64url_encode(rfc8785.dumps(cleaned)).decode()
    except rfc8785.CanonicalizationError:
        return ""
    for index, entry in enumerate(card.get("signatures") or []):
        if isinstance(_check(index, entry, payload, keys, accepted), VerifiedSignature):
            outermost = [p for p in dropped if not any(_inside(p, q) for q in dropped)]
            return (
                f". Signature {index + 1} verifies only over the form a2a-sdk and "
                "@a2a-js/sdk sign, which leaves out empty values that spec 8.4.1 keeps, "
                f"so it does not cover: {', '.join(outermost)}"
            )
    return ""


def _inside(path: str, other: str) -> bool:
    return path != other and path.startswith((other + ".", other + "["))


def _check(
    index: int, entry: Any, payload: str, keys: CardKeys, accepted: list[str]
) -> VerifiedSignature | str:
    """The signature that verifies ``payload`` (base64url), or what is wrong with it."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("signature"), str):
        return "it is not an object with protected and signature strings"
    header = _protected_header(entry)
    if not header:
        return "its protected header is not base64url-encoded JSON"
    algorithm, kid, jku = header.get("alg"), header.get("kid"), header.get("jku")
    if header.get("b64") is False or "crit" in header:
        return "its protected header asks for extensions (crit, b64) that cards do not use"
    if algorithm not in accepted:
        return f"its algorithm {algorithm!r} is not accepted (accepted: {', '.join(accepted)})"
    named = f"kid {kid!r}" if kid is not None else "no kid"
    candidates = keys.for_kid(kid if isinstance(kid, str) else None)
    if not candidates:
        known = ", ".join(repr(k) for k in keys.by_kid) or "none"
        return f"no trusted key has {named} (the key set has kids: {known})"
    fitting = [key for key in candidates if _fits(algorithm, key)]
    if not fitting:
        kinds = ", ".join(sorted({_key_kind(key) for key in candidates}))
        return f"it is {algorithm} ({named}), but the trusted key is {kinds}"
    token = f"{entry['protected']}.{payload}.{entry['signature']}"
    for key in fitting:
        try:
            PyJWS().decode_complete(token, key, algorithms=[algorithm])
        except jwt.InvalidSignatureError:
            continue
        except jwt.DecodeError as error:
            return f"it is malformed ({error})"
        return VerifiedSignature(index, algorithm, kid, jku if isinstance(jku, str) else None)
    return (
        f"it ({algorithm}, {named}) does not match the card: the card was changed after "
        "it was signed, or another key made the signature"
    )

"""Verifying a card's signatures against trusted keys (spec 8.4.3)."""

from __future__ import annotations

import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
import rfc8785
from jwt.api_jws import PyJWS
from jwt.utils import base64url_decode, base64url_encode

from .keys import SIGNING_ALGORITHMS, CardKeys, CardSignatureError, fits, key_kind
from .payload import inside, presence_normalised, signed_payload, without_empties

__all__ = ["VerifiedSignature", "signature_headers", "verify_card"]


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


def _sdk_form_hint(card: Mapping[str, Any], keys: CardKeys, accepted: list[str]) -> str:
    """A sentence when a signature verifies over the SDKs' form of the card only."""
    document = presence_normalised(card)
    document.pop("signatures", None)
    dropped: list[str] = []
    cleaned = without_empties(document, "", dropped) or {}
    if not dropped:
        return ""
    try:
        payload = base64url_encode(rfc8785.dumps(cleaned)).decode()
    except rfc8785.CanonicalizationError:
        return ""
    for index, entry in enumerate(card.get("signatures") or []):
        if isinstance(_check(index, entry, payload, keys, accepted), VerifiedSignature):
            outermost = [p for p in dropped if not any(inside(p, q) for q in dropped)]
            return (
                f". Signature {index + 1} verifies only over the form a2a-sdk and "
                "@a2a-js/sdk sign, which leaves out empty values that spec 8.4.1 keeps, "
                f"so it does not cover: {', '.join(outermost)}"
            )
    return ""


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
    fitting = [key for key in candidates if fits(algorithm, key)]
    if not fitting:
        kinds = ", ".join(sorted({key_kind(key) for key in candidates}))
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

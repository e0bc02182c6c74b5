"""Keys: the algorithms cards are signed with, the keys each takes, trusted key sets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

__all__ = [
    "KEY_FOR",
    "SIGNING_ALGORITHMS",
    "CardKeys",
    "CardSignatureError",
    "SigningAlgorithm",
    "fits",
    "key_kind",
]

SigningAlgorithm = Literal["ES256", "RS256", "EdDSA"]
SIGNING_ALGORITHMS: tuple[SigningAlgorithm, ...] = ("ES256", "RS256", "EdDSA")


class CardSignatureError(ValueError):
    """A card's signatures cannot be made or do not verify; the message says why."""


def key_kind(key: Any) -> str:
    """What ``key`` is, for messages (``an EC key on secp256r1``)."""
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "an RSA key"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return f"an EC key on {key.curve.name}"
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return "an Ed25519 key"
    if isinstance(key, ed448.Ed448PrivateKey | ed448.Ed448PublicKey):
        return "an Ed448 key"
    return f"a {type(key).__name__}"


def fits(algorithm: str, key: Any) -> bool:
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


#: The key each algorithm needs, for messages.
KEY_FOR = {
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

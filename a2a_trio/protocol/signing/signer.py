"""Signing cards with one private key (spec 8.4.2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt.api_jws import PyJWS

from .keys import KEY_FOR, SIGNING_ALGORITHMS, SigningAlgorithm, fits, key_kind
from .payload import inside, presence_normalised, signed_payload, without_empties

__all__ = ["CardSigner"]


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
        if not isinstance(key, private) or not fits(algorithm, key):
            raise ValueError(f"{algorithm} needs {KEY_FOR[algorithm]}; this is {key_kind(key)}")
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
        cleaned: dict[str, Any] = without_empties(document, "", []) or {}
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
        without_empties(document, "", dropped)
        return [path for path in dropped if not any(inside(path, q) for q in dropped)]

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

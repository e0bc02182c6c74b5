"""Bearer JWT access tokens (OAuth 2.0, OpenID Connect), verified with PyJWT."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import trio

from ...runtime import Principal
from .credentials import AuthenticationFailed, RequestCredentials

__all__ = ["JWTAuthenticator"]

log = logging.getLogger("a2a_trio.auth")


class JWTAuthenticator:
    """Bearer JWT access tokens (OAuth 2.0, OpenID Connect), verified with PyJWT.

    Keys come from ``keys`` (PEM strings or JWK dicts) or a JWKS URL, fetched
    with httpx and cached for ``jwks_ttl`` seconds. A token naming an unknown
    ``kid`` makes the set be fetched again once (key rotation); the same
    unknown id does not cause another fetch until the set is next refreshed,
    so forged ids cannot make the agent hammer its identity provider. A
    failed fetch is retried by the next token that needs it. Issuer, audience,
    expiry and signature are checked, and a key is only tried for the
    algorithms of its own type. The principal is the ``sub`` claim (or
    ``identifier_claim``); its scopes come from ``scope`` (space separated)
    or ``scp``.
    """

    def __init__(
        self,
        *,
        issuer: str | None = None,
        audience: str | Sequence[str] | None = None,
        keys: Iterable[str | Mapping[str, Any]] = (),
        jwks_url: str | None = None,
        algorithms: Sequence[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        identifier_claim: str = "sub",
        leeway: float = 30.0,
        jwks_ttl: float = 300.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.algorithms = list(algorithms)
        self.identifier_claim = identifier_claim
        self.leeway = leeway
        self._static = [self._key(key) for key in keys]
        self._jwks_url = jwks_url
        self._jwks_ttl = jwks_ttl
        #: Unknown kids that already caused a refetch since the last refresh.
        self._missed: set[str] = set()
        self._jwks: dict[str | None, _Key] = {}
        self._jwks_fetched = -float("inf")
        self._jwks_lock = trio.Lock()
        self._http = http
        if not self._static and not jwks_url:
            raise ValueError("a JWT authenticator needs keys or a jwks_url")

    def _key(self, key: str | Mapping[str, Any]) -> _Key:
        if isinstance(key, Mapping):
            jwk = jwt.PyJWK.from_dict(dict(key))
            return _Key(jwk.key, _family(jwk.key_type), jwk.key_id)
        return _Key(key, _pem_family(key), None)

    async def _jwks_keys(self, kid: str | None) -> list[_Key]:
        if self._jwks_url is None:
            return []
        async with self._jwks_lock:
            stale = time.monotonic() - self._jwks_fetched > self._jwks_ttl
            unknown = kid is not None and kid not in self._jwks and kid not in self._missed
            if stale or unknown:
                await self._fetch_jwks()
                if kid is not None and kid not in self._jwks:
                    self._missed.add(kid)
        if kid is not None and kid in self._jwks:
            return [self._jwks[kid]]
        return list(self._jwks.values())

    async def _fetch_jwks(self) -> None:
        assert self._jwks_url is not None
        try:
            if self._http is not None:
                response = await self._http.get(self._jwks_url)
            else:
                async with httpx.AsyncClient(timeout=10.0) as client:
                    response = await client.get(self._jwks_url)
            response.raise_for_status()
            keyset = jwt.PyJWKSet.from_dict(response.json())
        except (httpx.HTTPError, jwt.PyJWKSetError, ValueError) as error:
            log.warning("could not fetch the JWKS from %s: %s", self._jwks_url, error)
            return
        self._jwks = {k.key_id: _Key(k.key, _family(k.key_type), k.key_id) for k in keyset.keys}
        self._jwks_fetched = time.monotonic()
        self._missed.clear()

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        """The caller the request's credentials of this kind name; None when it carries none."""
        token = request.authorization("Bearer")
        if token is None:
            return None
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationFailed("the bearer token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise AuthenticationFailed(f"the token's algorithm {algorithm!r} is not accepted")
        family = _ALGORITHM_FAMILIES.get(str(algorithm))
        kid = header.get("kid")
        candidates = [
            key
            for key in self._static + await self._jwks_keys(kid)
            if key.family is None or key.family == family
        ]
        claims = None
        last_error = "no key of this agent verifies the token"
        for key in candidates:
            try:
                claims = jwt.decode(
                    token,
                    key.key,
                    algorithms=[str(algorithm)],
                    audience=self.audience,
                    issuer=self.issuer,
                    leeway=self.leeway,
                    options={"require": ["exp"]},
                )
                break
            except jwt.ExpiredSignatureError:
                raise AuthenticationFailed("the token has expired") from None
            except (jwt.InvalidAudienceError, jwt.InvalidIssuerError) as error:
                raise AuthenticationFailed(f"the token is not for this agent: {error}") from None
            except (jwt.PyJWTError, TypeError, ValueError) as error:
                # TypeError/ValueError: a key PyJWT cannot use for this algorithm.
                last_error = str(error)
        if claims is None:
            raise AuthenticationFailed(f"the token is not valid: {last_error}")
        identifier = claims.get(self.identifier_claim)
        if not isinstance(identifier, str) or not identifier:
            raise AuthenticationFailed(f"the token has no {self.identifier_claim} claim")
        scope = claims.get("scope", claims.get("scp", ""))
        scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope or []]
        return Principal(identifier, frozenset(scopes), authenticated=True, claims=claims)

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value asking for this scheme."""
        return 'Bearer realm="a2a", error="invalid_token"'


@dataclass(frozen=True, slots=True)
class _Key:
    key: Any
    #: "RSA", "EC" or "OKP"; None when unknown (then tried for any algorithm).
    family: str | None
    kid: str | None


_ALGORITHM_FAMILIES = {
    **{f"{p}{n}": "RSA" for p in ("RS", "PS") for n in (256, 384, 512)},
    **{f"ES{n}": "EC" for n in (256, 384, 512)},
    "ES256K": "EC",
    "EdDSA": "OKP",
    **{f"HS{n}": "oct" for n in (256, 384, 512)},
}


def _family(key_type: str | None) -> str | None:
    return key_type if key_type in ("RSA", "EC", "OKP", "oct") else None


def _pem_family(pem: str) -> str | None:
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    try:
        loaded = load_pem_public_key(pem.encode())
    except ValueError:
        return None
    if isinstance(loaded, rsa.RSAPublicKey):
        return "RSA"
    if isinstance(loaded, ec.EllipticCurvePublicKey):
        return "EC"
    if isinstance(loaded, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return "OKP"
    return None

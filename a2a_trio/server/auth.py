"""Authentication driven by the Agent Card's security schemes.

Each scheme the card declares in ``securitySchemes`` is backed by an
:class:`Authenticator` with the same name. A request must satisfy one of the
card's ``securityRequirements`` (every scheme of it, with the scopes it lists);
a card without requirements lets anonymous callers in, and still identifies
callers who present valid credentials. Card routes never go through this.

Missing or bad credentials are ``UnauthenticatedError`` (HTTP 401, with a
``WWW-Authenticate`` challenge naming the schemes); valid credentials without
the required scopes are ``ForbiddenError`` (HTTP 403).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import httpx
import jwt
import trio

from ..protocol import AgentCard, ForbiddenError, SecurityScheme, UnauthenticatedError
from ..runtime import Principal
from ..runtime.executor import ANONYMOUS

__all__ = [
    "ApiKeyAuthenticator",
    "AuthenticationFailed",
    "Authenticator",
    "BasicAuthenticator",
    "BearerAuthenticator",
    "CardGuard",
    "JWTAuthenticator",
    "MutualTLSAuthenticator",
    "RequestCredentials",
]

log = logging.getLogger("a2a_trio.auth")


class AuthenticationFailed(Exception):
    """Credentials of this scheme were presented and are not valid."""


@dataclass(frozen=True, slots=True)
class RequestCredentials:
    """What a request presents: headers (lower-case names), query and cookies."""

    headers: Mapping[str, str]
    query: Mapping[str, str] = field(default_factory=dict)
    cookies: Mapping[str, str] = field(default_factory=dict)
    #: The client certificate's details when TLS client auth happened.
    client_certificate: Mapping[str, Any] | None = None

    def authorization(self, scheme: str) -> str | None:
        """The credentials of an ``Authorization: <scheme> <credentials>`` header."""
        value = self.headers.get("authorization", "")
        name, _, credentials = value.strip().partition(" ")
        if name.lower() != scheme.lower():
            return None
        return credentials.strip() or None


@runtime_checkable
class Authenticator(Protocol):
    """Turns a request's credentials into a principal.

    Return None when the request carries no credentials of this kind; raise
    :class:`AuthenticationFailed` when it carries invalid ones.
    """

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        """The caller the request's credentials of this kind name; None when it carries none."""
        ...

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value asking for this scheme."""
        ...


Verify = Callable[[str], Awaitable[Principal | None] | Principal | None]


async def _call(verify: Callable[..., Any], *args: Any) -> Principal | None:
    result = verify(*args)
    if isinstance(result, Awaitable):
        result = await result
    if result is not None and not isinstance(result, Principal):
        raise TypeError("an authentication callback must return a Principal or None")
    return result


def _lookup(secrets: Mapping[str, str], presented: str) -> str | None:
    """The identifier of a presented secret, compared in constant time."""
    found = None
    for secret, identifier in secrets.items():
        if hmac.compare_digest(secret.encode(), presented.encode()):
            found = identifier
    return found


class ApiKeyAuthenticator:
    """An API key in a header, a query parameter or a cookie (spec 4.5.2)."""

    def __init__(
        self,
        *,
        name: str,
        location: str = "header",
        keys: Mapping[str, str] | None = None,
        verify: Verify | None = None,
    ) -> None:
        if location not in ("header", "query", "cookie"):
            raise ValueError(f"API key location must be header, query or cookie, not {location!r}")
        if (keys is None) == (verify is None):
            raise ValueError("an API key authenticator needs keys or a verify callback (one)")
        self.name = name
        self.location = location
        self._keys = dict(keys or {})
        self._verify = verify

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        """The caller the request's credentials of this kind name; None when it carries none."""
        if self.location == "header":
            presented = request.headers.get(self.name.lower())
        elif self.location == "query":
            presented = request.query.get(self.name)
        else:
            presented = request.cookies.get(self.name)
        if not presented:
            return None
        if self._verify is not None:
            principal = await _call(self._verify, presented)
        else:
            identifier = _lookup(self._keys, presented)
            principal = Principal(identifier, authenticated=True) if identifier else None
        if principal is None:
            raise AuthenticationFailed("the API key is not valid")
        return principal

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value asking for this scheme."""
        return f'ApiKey {self.location}="{self.name}"'


class BearerAuthenticator:
    """``Authorization: Bearer <token>`` against static tokens or a callback."""

    def __init__(self, *, tokens: Mapping[str, str] | None = None, verify: Verify | None = None):
        if (tokens is None) == (verify is None):
            raise ValueError("a bearer authenticator needs tokens or a verify callback (one)")
        self._tokens = dict(tokens or {})
        self._verify = verify

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        """The caller the request's credentials of this kind name; None when it carries none."""
        token = request.authorization("Bearer")
        if token is None:
            return None
        if self._verify is not None:
            principal = await _call(self._verify, token)
        else:
            identifier = _lookup(self._tokens, token)
            principal = Principal(identifier, authenticated=True) if identifier else None
        if principal is None:
            raise AuthenticationFailed("the bearer token is not valid")
        return principal

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value asking for this scheme."""
        return 'Bearer realm="a2a"'


class BasicAuthenticator:
    """``Authorization: Basic`` against a user table or a callback."""

    def __init__(
        self,
        *,
        users: Mapping[str, str] | None = None,
        verify: Callable[[str, str], Awaitable[Principal | None] | Principal | None] | None = None,
    ) -> None:
        if (users is None) == (verify is None):
            raise ValueError("a basic authenticator needs users or a verify callback (one)")
        self._users = dict(users or {})
        self._verify = verify

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        """The caller the request's credentials of this kind name; None when it carries none."""
        encoded = request.authorization("Basic")
        if encoded is None:
            return None
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise AuthenticationFailed("malformed basic credentials") from None
        if not sep:
            raise AuthenticationFailed("malformed basic credentials")
        if self._verify is not None:
            principal = await _call(self._verify, user, password)
        else:
            expected = self._users.get(user)
            ok = expected is not None and hmac.compare_digest(expected.encode(), password.encode())
            principal = Principal(user, authenticated=True) if ok else None
        if principal is None:
            raise AuthenticationFailed("unknown user or wrong password")
        return principal

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value asking for this scheme."""
        return 'Basic realm="a2a"'


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


class MutualTLSAuthenticator:
    """Client certificates: only with a callback that maps a certificate to a principal."""

    def __init__(
        self, verify: Callable[[Mapping[str, Any]], Awaitable[Principal | None] | Principal | None]
    ) -> None:
        self._verify = verify

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        """The caller the request's credentials of this kind name; None when it carries none."""
        if request.client_certificate is None:
            return None
        principal = await _call(self._verify, request.client_certificate)
        if principal is None:
            raise AuthenticationFailed("the client certificate is not accepted")
        return principal

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value asking for this scheme."""
        return 'MutualTLS realm="a2a"'


class CardGuard:
    """Protects one agent's protocol routes as its card's security says."""

    def __init__(
        self,
        card: AgentCard,
        authenticators: Mapping[str, Authenticator],
        *,
        owner_scheme: str | None = None,
    ) -> None:
        schemes: Mapping[str, SecurityScheme] = card.security_schemes or {}
        requirements = card.security_requirements or []
        missing = [name for name in schemes if name not in authenticators]
        if missing:
            raise ValueError(
                "the card declares security scheme(s) without an authenticator: "
                + ", ".join(sorted(missing))
            )
        for name, scheme in schemes.items():
            if scheme.mtls_security_scheme is not None and not isinstance(
                authenticators[name], MutualTLSAuthenticator
            ):
                raise ValueError(
                    f"security scheme {name!r} is mutual TLS: it needs a MutualTLSAuthenticator "
                    "with a callback that maps client certificates to principals"
                )
        undeclared = sorted(
            {name for req in requirements for name in req.schemes if name not in schemes}
        )
        if undeclared:
            raise ValueError(
                "securityRequirements name undeclared scheme(s): " + ", ".join(undeclared)
            )
        self._authenticators = {name: authenticators[name] for name in schemes}
        self._requirements = [
            {name: frozenset(scopes.values) for name, scopes in req.schemes.items()}
            for req in requirements
        ]
        self._owner_scheme = owner_scheme
        self.protected = bool(self._requirements)

    @property
    def declares_security(self) -> bool:
        """Whether any authenticator is configured (the card declares security schemes)."""
        return bool(self._authenticators)

    async def __call__(self, request: RequestCredentials) -> Principal:
        """The caller, or UnauthenticatedError / ForbiddenError.

        Every scheme is tried; a requirement is met when all its schemes
        authenticated (a scheme that refused its credentials only fails the
        requirements that need it).
        """
        found: dict[str, Principal] = {}
        failures: dict[str, str] = {}
        for name, authenticator in self._authenticators.items():
            try:
                principal = await authenticator.authenticate(request)
            except AuthenticationFailed as failure:
                failures[name] = str(failure)
                continue
            if principal is not None:
                found[name] = principal
        if not self.protected:
            if failures and not found:
                raise self._refusal(failures)
            return self._owner(found, found.keys()) if found else ANONYMOUS
        short_of_scopes: list[str] = []
        for requirement in self._requirements:
            if not all(name in found for name in requirement):
                continue
            lacking = [
                f"{name}: {', '.join(sorted(scopes - found[name].scopes))}"
                for name, scopes in requirement.items()
                if not scopes <= found[name].scopes
            ]
            if not lacking:
                return self._owner(found, requirement.keys())
            short_of_scopes += lacking
        if short_of_scopes:
            raise ForbiddenError("missing scope(s): " + "; ".join(short_of_scopes))
        raise self._refusal(failures)

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value naming every scheme of the card."""
        return ", ".join(a.challenge() for a in self._authenticators.values())

    def _refusal(self, failures: Mapping[str, str]) -> UnauthenticatedError:
        if failures:
            detail = "; ".join(f"{name}: {reason}" for name, reason in failures.items())
            return _unauthenticated(detail, self.challenge())
        return _unauthenticated("this agent requires authentication", self.challenge())

    def _owner(self, found: Mapping[str, Principal], used: Iterable[str]) -> Principal:
        if self._owner_scheme is not None and self._owner_scheme in found:
            return found[self._owner_scheme]
        for name in used:
            if name in found:
                return found[name]
        return next(iter(found.values()))


def _unauthenticated(message: str, challenge: str) -> UnauthenticatedError:
    error = UnauthenticatedError(message)
    error.challenge = challenge  # type: ignore[attr-defined]
    return error

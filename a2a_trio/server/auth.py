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

    async def authenticate(self, request: RequestCredentials) -> Principal | None: ...

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
        return f'ApiKey {self.location}="{self.name}"'


class BearerAuthenticator:
    """``Authorization: Bearer <token>`` against static tokens or a callback."""

    def __init__(self, *, tokens: Mapping[str, str] | None = None, verify: Verify | None = None):
        if (tokens is None) == (verify is None):
            raise ValueError("a bearer authenticator needs tokens or a verify callback (one)")
        self._tokens = dict(tokens or {})
        self._verify = verify

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
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
        return 'Basic realm="a2a"'


class JWTAuthenticator:
    """Bearer JWT access tokens (OAuth 2.0, OpenID Connect), verified with PyJWT.

    Keys come from ``keys`` (PEM strings or JWK dicts) or a JWKS URL, fetched
    with httpx and cached for ``jwks_ttl`` seconds (refetched once on an
    unknown ``kid``). Issuer, audience, expiry and signature are checked; the
    principal is the ``sub`` claim (or ``identifier_claim``) and its scopes
    come from ``scope`` (space separated) or ``scp``.
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
        self._jwks: dict[str | None, Any] = {}
        self._jwks_fetched = -float("inf")
        self._jwks_lock = trio.Lock()
        self._http = http
        if not self._static and not jwks_url:
            raise ValueError("a JWT authenticator needs keys or a jwks_url")

    @staticmethod
    def _key(key: str | Mapping[str, Any]) -> Any:
        if isinstance(key, Mapping):
            return jwt.PyJWK.from_dict(dict(key)).key
        return key

    async def _jwks_keys(self, kid: str | None, *, refresh: bool) -> list[Any]:
        if self._jwks_url is None:
            return []
        async with self._jwks_lock:
            stale = time.monotonic() - self._jwks_fetched > self._jwks_ttl
            if stale or (refresh and kid not in self._jwks):
                try:
                    if self._http is not None:
                        response = await self._http.get(self._jwks_url)
                    else:
                        async with httpx.AsyncClient(timeout=10.0) as client:
                            response = await client.get(self._jwks_url)
                    response.raise_for_status()
                    keyset = jwt.PyJWKSet.from_dict(response.json())
                    self._jwks = {key.key_id: key.key for key in keyset.keys}
                    self._jwks_fetched = time.monotonic()
                except (httpx.HTTPError, jwt.PyJWKSetError, ValueError) as error:
                    log.warning("could not fetch the JWKS from %s: %s", self._jwks_url, error)
        if kid is not None and kid in self._jwks:
            return [self._jwks[kid]]
        return list(self._jwks.values())

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        token = request.authorization("Bearer")
        if token is None:
            return None
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationFailed("the bearer token is not a JWT") from None
        kid = header.get("kid")
        candidates = self._static + await self._jwks_keys(kid, refresh=False)
        if kid is not None and self._jwks_url and kid not in self._jwks:
            candidates += await self._jwks_keys(kid, refresh=True)
        claims = None
        last_error = "no key verifies the token"
        for key in candidates:
            try:
                claims = jwt.decode(
                    token,
                    key,
                    algorithms=self.algorithms,
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
            except jwt.PyJWTError as error:
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
        return 'Bearer realm="a2a", error="invalid_token"'


class MutualTLSAuthenticator:
    """Client certificates: only with a callback that maps a certificate to a principal."""

    def __init__(
        self, verify: Callable[[Mapping[str, Any]], Awaitable[Principal | None] | Principal | None]
    ) -> None:
        self._verify = verify

    async def authenticate(self, request: RequestCredentials) -> Principal | None:
        if request.client_certificate is None:
            return None
        principal = await _call(self._verify, request.client_certificate)
        if principal is None:
            raise AuthenticationFailed("the client certificate is not accepted")
        return principal

    def challenge(self) -> str:
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
        return bool(self._authenticators)

    def _challenge(self) -> str:
        return ", ".join(a.challenge() for a in self._authenticators.values())

    async def __call__(self, request: RequestCredentials) -> Principal:
        """The caller, or UnauthenticatedError / ForbiddenError."""
        found: dict[str, Principal] = {}
        for name, authenticator in self._authenticators.items():
            try:
                principal = await authenticator.authenticate(request)
            except AuthenticationFailed as failure:
                raise _unauthenticated(f"{name}: {failure}", self._challenge()) from None
            if principal is not None:
                found[name] = principal
        if not self.protected:
            return self._owner(found, found.keys()) if found else ANONYMOUS
        if not found:
            raise _unauthenticated("this agent requires authentication", self._challenge())
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
        raise _unauthenticated(
            "the credentials presented satisfy none of this agent's security requirements",
            self._challenge(),
        )

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

"""The authenticators of secrets a request presents: API keys, bearer tokens,
basic credentials and client certificates (spec 4.5.2)."""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...runtime import Principal
from .credentials import (
    AuthenticationFailed,
    RequestCredentials,
    Verify,
    lookup_secret,
    verified,
)

__all__ = [
    "ApiKeyAuthenticator",
    "BasicAuthenticator",
    "BearerAuthenticator",
    "MutualTLSAuthenticator",
]


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
            principal = await verified(self._verify, presented)
        else:
            identifier = lookup_secret(self._keys, presented)
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
            principal = await verified(self._verify, token)
        else:
            identifier = lookup_secret(self._tokens, token)
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
            principal = await verified(self._verify, user, password)
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
        principal = await verified(self._verify, request.client_certificate)
        if principal is None:
            raise AuthenticationFailed("the client certificate is not accepted")
        return principal

    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value asking for this scheme."""
        return 'MutualTLS realm="a2a"'

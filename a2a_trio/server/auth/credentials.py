"""What a request presents, and the interface every authenticator keeps."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ...runtime import Principal

__all__ = [
    "AuthenticationFailed",
    "Authenticator",
    "RequestCredentials",
    "Verify",
    "lookup_secret",
    "verified",
]


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


#: A callback mapping a presented secret to its principal, or None (may be async).
Verify = Callable[[str], Awaitable[Principal | None] | Principal | None]


async def verified(verify: Callable[..., Any], *args: Any) -> Principal | None:
    """What a callback of the application makes of presented credentials (awaited if async)."""
    result = verify(*args)
    if isinstance(result, Awaitable):
        result = await result
    if result is not None and not isinstance(result, Principal):
        raise TypeError("an authentication callback must return a Principal or None")
    return result


def lookup_secret(secrets: Mapping[str, str], presented: str) -> str | None:
    """The identifier of a presented secret, compared in constant time."""
    found = None
    for secret, identifier in secrets.items():
        if hmac.compare_digest(secret.encode(), presented.encode()):
            found = identifier
    return found

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

from .credentials import AuthenticationFailed, Authenticator, RequestCredentials
from .guard import CardGuard
from .jwt_bearer import JWTAuthenticator
from .schemes import (
    ApiKeyAuthenticator,
    BasicAuthenticator,
    BearerAuthenticator,
    MutualTLSAuthenticator,
)

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

"""The Quart-trio application: mounting, the two bindings, SSE and cards."""

from __future__ import annotations

from .._lazy_app import LazyApp
from .app import A2AApp
from .auth import (
    ApiKeyAuthenticator,
    AuthenticationFailed,
    Authenticator,
    BasicAuthenticator,
    BearerAuthenticator,
    CardGuard,
    JWTAuthenticator,
    MutualTLSAuthenticator,
    RequestCredentials,
)
from .bindings import ServerSettings
from .mount import AgentMount
from .serving import serve

__all__ = [
    "A2AApp",
    "AgentMount",
    "ApiKeyAuthenticator",
    "AuthenticationFailed",
    "Authenticator",
    "BasicAuthenticator",
    "BearerAuthenticator",
    "CardGuard",
    "JWTAuthenticator",
    "LazyApp",
    "MutualTLSAuthenticator",
    "RequestCredentials",
    "ServerSettings",
    "serve",
]

"""Who may open the console: its bearer token, or a security scheme's principals with a scope.

Protocol credentials (any security scheme of the cards) never open the console
by themselves; the console's token is compared in constant time.
"""

from __future__ import annotations

import hmac

from quart import Response

from ..server import Authenticator
from ..server.auth import AuthenticationFailed, RequestCredentials
from .responses import error_response

__all__ = ["Access", "bearer", "token_matches", "unauthorized"]


class Access:
    """The console's operators: whoever presents ``token``, or a principal of
    ``scheme`` holding ``scope``."""

    def __init__(self, token: str | None, scheme: Authenticator | None, scope: str | None) -> None:
        #: The token operators present; None: only the scheme opens the console.
        self.token = token
        #: The security scheme whose principals with ``scope`` are operators.
        self.scheme = scheme
        self.scope = scope

    async def is_operator(self, authorization: str | None) -> bool:
        """Whether the ``Authorization`` header is an operator's."""
        if self.token is not None and token_matches(self.token, authorization):
            return True
        if self.scheme is None or not authorization:
            return False
        credentials = RequestCredentials(headers={"authorization": authorization})
        try:
            principal = await self.scheme.authenticate(credentials)
        except AuthenticationFailed:
            return False
        return principal is not None and self.scope in principal.scopes


def token_matches(token: str, authorization: str | None) -> bool:
    """Whether the ``Authorization`` header carries the bearer ``token``."""
    offered = bearer(authorization)
    return offered is not None and hmac.compare_digest(offered.encode(), token.encode())


def bearer(header: str | None) -> str | None:
    """The token of a ``Bearer`` ``Authorization`` header, if it is one."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def unauthorized() -> Response:
    """401 with the console's challenge."""
    response = error_response(401, "UNAUTHENTICATED", "the console's bearer token is required")
    response.headers["WWW-Authenticate"] = 'Bearer realm="a2a-trio console"'
    return response

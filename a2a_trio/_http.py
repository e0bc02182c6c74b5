"""How a2a-trio's own HTTP clients (the A2A client, the CLI, webhook delivery) pool connections."""

from __future__ import annotations

import httpx

__all__ = ["CLIENT_LIMITS", "KEEPALIVE_EXPIRY"]

#: Seconds an idle pooled connection is kept: under the 5 s for which most
#: servers keep one (hypercorn's and uvicorn's default). A client that reuses
#: a connection at the instant its server closes it loses the request
#: ("Server disconnected without sending a response"), and no client retries
#: a POST; with httpx's own 5 s the two timers race.
KEEPALIVE_EXPIRY = 4.0

#: httpx's default pool sizes, with :data:`KEEPALIVE_EXPIRY`.
CLIENT_LIMITS = httpx.Limits(
    max_connections=100, max_keepalive_connections=20, keepalive_expiry=KEEPALIVE_EXPIRY
)

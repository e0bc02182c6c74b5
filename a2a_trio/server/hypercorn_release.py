"""Which hypercorn release runs, and what is left open when a2a-trio's mends do not cover it.

The mends (:mod:`.hypercorn_tcp`, :mod:`.hypercorn_h2`) override private
methods of hypercorn, so they are written for exact releases:
:data:`MENDED_VERSIONS`, the versions pyproject.toml pins. On any other
release they stay out, HTTP/2 is refused (an HTTP/2 fault ends the whole
process), and :func:`log_unprotected` says at start, as an ERROR, which
faults are open. docs/upstream/ writes each fault up for hypercorn.
"""

from __future__ import annotations

import logging
from functools import cache
from importlib.metadata import version

__all__ = ["MENDED_VERSIONS", "UNPROTECTED", "log_unprotected", "mendable", "running"]

#: The hypercorn releases (full versions) the mends were written and tested for.
MENDED_VERSIONS = ("0.18.0",)

#: What a server on an unmended release lacks, each as a person reads it.
UNPROTECTED = (
    "an exception in one connection stops the worker, and with --workers N every worker "
    "(one unauthenticated request reaches it: a WebSocket handshake the app refuses "
    "followed by a byte, hypercorn#225)",
    "a connection its client closed stays open until the keep-alive timeout",
    "a client that stops reading holds its answer in memory and delays shutdown "
    "(server.send_timeout is not applied)",
    "a request whose client closes as soon as it has the answer is often in the access "
    "log twice, first as unanswered ('- -')",
    "HTTP/2 is refused (GOAWAY HTTP_1_1_REQUIRED), so the gRPC binding is unavailable: "
    "its stock faults let one client stop the server",
)

_log = logging.getLogger("a2a_trio.server")


def running() -> str:
    """The version of the hypercorn installed, as its package metadata gives it."""
    return version("hypercorn")


@cache
def mendable() -> bool:
    """Whether the hypercorn installed is exactly a release the mends were written for."""
    return running() in MENDED_VERSIONS


def log_unprotected() -> None:
    """Log an ERROR naming every open fault when the running hypercorn is not mended."""
    if mendable():
        return
    _log.error(
        "hypercorn %s is not a release a2a-trio's mends cover (%s); serving without them: %s. "
        "Install hypercorn==%s (pyproject.toml pins it).",
        running(),
        ", ".join(MENDED_VERSIONS),
        "; ".join(UNPROTECTED),
        MENDED_VERSIONS[-1],
    )

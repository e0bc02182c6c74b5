"""Which ``Host`` a request may name, when the cards' URLs are built from it.

Without ``server.public_url`` the cards' interface URLs echo the request's
``Host``: a client naming another host got a card pointing there, which a
cache in front keeps for ``card_max_age`` and serves to everyone (issue 31).
``server.allowed_hosts`` lists the hosts the server answers to; a request
naming any other is refused before it is routed.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["host_allowed"]


def _split(authority: str) -> tuple[str, str | None]:
    """``host[:port]`` (an IPv6 host in brackets) as its lower-case host and its port."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        host, _, rest = authority.partition("]")
        return host + "]", rest[1:] if rest.startswith(":") else None
    host, colon, port = authority.rpartition(":")
    return (host, port) if colon else (authority, None)


def host_allowed(authority: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request naming ``authority`` (its ``Host``) is one ``allowed`` lets in.

    Each entry is a host (any port), ``host:port`` (that port only),
    ``.example.com`` (that domain and every subdomain) or ``*`` (any). A
    request naming no host (HTTP/1.0) is let in: its cards name the address
    it reached.
    """
    if authority is None:
        return True
    host, port = _split(authority)
    for entry in allowed:
        wanted_host, wanted_port = _split(entry)
        if wanted_host == "*":
            return True
        if wanted_port is not None and wanted_port != port:
            continue
        if wanted_host.startswith("."):
            if host == wanted_host[1:] or host.endswith(wanted_host):
                return True
        elif host == wanted_host:
            return True
    return False

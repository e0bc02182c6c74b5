"""Screen webhook URLs so push notifications cannot be aimed at private networks.

A push-notification config lets a client choose a URL that *this server* will
later POST to. Unchecked, that is server-side request forgery (SSRF): a client
could point the webhook at ``http://127.0.0.1:6379/``, at a host on the private
network behind the server, or at the cloud metadata service on
``169.254.169.254`` and have the server reach places the client cannot.

:class:`AddressScreen` refuses URLs that are not plain ``http``/``https`` and
hosts whose addresses are not globally routable (see :func:`address_refusal`).
A name is refused if *any* of its addresses is refused, so a name cannot smuggle
one private address among public ones.

Checking a name once is not enough: with DNS rebinding the name resolves to a
public address while it is screened and to a private one a moment later, when
the connection is made. So screen before creating a config *and* before every
delivery attempt, and connect to :attr:`ScreenedTarget.address` -- the address
that was checked -- rather than resolving the name again (sending ``host`` in the
``Host`` header and as the TLS server name). Only when ``address`` is ``None``
(screening disabled, or an allow-listed host) should the caller connect normally.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias
from urllib.parse import urlsplit

import trio

__all__ = [
    "AddressScreen",
    "Resolver",
    "ScreenedTarget",
    "WebhookRefused",
    "address_refusal",
    "system_resolver",
]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

Resolver: TypeAlias = Callable[[str, int], Awaitable[list[str]]]
"""Resolves ``(host, port)`` to the IP address strings a connection could use."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


class WebhookRefused(Exception):
    """A webhook URL that this server will not send notifications to.

    ``reason`` says why, for people (it may be shown to the client that asked).
    ``retryable`` is true only when the host did not resolve, which may be a
    passing DNS failure; every other refusal will be the same next time.
    ``exemptable_host`` is the host when naming it in ``allowed_hosts`` would
    let it through (its address is what was refused).
    """

    def __init__(
        self, reason: str, *, retryable: bool = False, exemptable_host: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.exemptable_host = exemptable_host


def _v4(network: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(network)


def _v6(network: str) -> ipaddress.IPv6Network:
    return ipaddress.IPv6Network(network)


# The first matching row names the reason, so more specific rows come first.
_REFUSED_IPV4: list[tuple[ipaddress.IPv4Network, str]] = [
    (_v4("0.0.0.0/8"), 'an unspecified ("this network") address'),
    (_v4("127.0.0.0/8"), "a loopback address"),
    (_v4("10.0.0.0/8"), "a private address"),
    (_v4("172.16.0.0/12"), "a private address"),
    (_v4("192.168.0.0/16"), "a private address"),
    (_v4("169.254.169.254/32"), "the cloud metadata address"),
    (_v4("169.254.0.0/16"), "a link-local address"),
    (_v4("100.64.0.0/10"), "a carrier-grade NAT address"),
    (_v4("224.0.0.0/4"), "a multicast address"),
    (_v4("255.255.255.255/32"), "the broadcast address"),
    (_v4("240.0.0.0/4"), "a reserved address"),
    (_v4("198.18.0.0/15"), "a benchmarking address"),
    (_v4("192.0.2.0/24"), "a documentation address"),
    (_v4("198.51.100.0/24"), "a documentation address"),
    (_v4("203.0.113.0/24"), "a documentation address"),
    (_v4("192.0.0.0/24"), "an IETF protocol assignment address"),
]

# Ranges outside global unicast (2000::/3) with a reason of their own, and the
# special-purpose blocks inside it. The first matching row names the reason, so
# more specific rows come first. The rest of 2001::/23 is refused by a row of its
# own: Python's ``is_global`` for it (the AMT block 2001:3::/32, say) changed
# within 3.11, 3.12 and 3.13, and screening must not depend on the patch release.
_REFUSED_IPV6: list[tuple[ipaddress.IPv6Network, str]] = [
    (_v6("::/128"), "the unspecified address"),
    (_v6("::1/128"), "the loopback address"),
    (_v6("fe80::/10"), "a link-local address"),
    (_v6("fc00::/7"), "a unique local address"),
    (_v6("ff00::/8"), "a multicast address"),
    (_v6("2001:db8::/32"), "a documentation address"),
    (_v6("3fff::/20"), "a documentation address"),
    (_v6("2001::/32"), "a Teredo address"),
    (_v6("2001:2::/48"), "a benchmarking address"),
    (_v6("2001:10::/28"), "an ORCHID address"),
    (_v6("2001:20::/28"), "an ORCHIDv2 address"),
    (_v6("2001::/23"), "an IETF protocol assignment address"),
]

_GLOBAL_UNICAST = _v6("2000::/3")


def _low_32_bits(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)


def _sixtofour_bits(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address((int(address) >> 80) & 0xFFFF_FFFF)


# IPv6 addresses that stand for an IPv4 address: judged by that address alone.
_EMBEDDING_IPV4: list[
    tuple[ipaddress.IPv6Network, str, Callable[[ipaddress.IPv6Address], ipaddress.IPv4Address]]
] = [
    (_v6("::ffff:0:0/96"), "an IPv4-mapped address", _low_32_bits),
    (_v6("64:ff9b::/96"), "a NAT64 address", _low_32_bits),
    (_v6("2002::/16"), "a 6to4 address", _sixtofour_bits),
]


def address_refusal(address: str | IPAddress) -> str | None:
    """Why a webhook may not be sent to ``address``, or ``None`` if it may.

    The reason is a sentence naming the address, such as
    ``"127.0.0.1 is a loopback address"``. A string that is not an IP address is
    refused too. Only globally routable unicast addresses are accepted.
    """
    if isinstance(address, str):
        try:
            address = ipaddress.ip_address(address)
        except ValueError:
            return f"{address!r} is not an IP address"
    if isinstance(address, ipaddress.IPv4Address):
        return _ipv4_refusal(address)
    return _ipv6_refusal(address)


def _ipv4_refusal(address: ipaddress.IPv4Address) -> str | None:
    for network, what in _REFUSED_IPV4:
        if address in network:
            return f"{address} is {what}"
    if not address.is_global:
        return f"{address} is not a globally routable address"
    return None


def _ipv6_refusal(address: ipaddress.IPv6Address) -> str | None:
    for network, what, embedded_in in _EMBEDDING_IPV4:
        if address in network:
            embedded = embedded_in(address)
            refusal = _ipv4_refusal(embedded)
            if refusal is None:
                # Whatever ``is_global`` says of the IPv6 form (it differs between
                # Python versions), the packets go to the embedded IPv4 address.
                return None
            return f"{address} is {what} for {embedded}, and {refusal}"
    for network, what in _REFUSED_IPV6:
        if address in network:
            return f"{address} is {what}"
    if address not in _GLOBAL_UNICAST:
        return f"{address} is outside global unicast space (2000::/3)"
    if not address.is_global:
        return f"{address} is not a globally routable address"
    return None


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the operating system resolves ``host`` to, first seen first.

    A failed lookup gives an empty list rather than an exception.
    """
    try:
        entries = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    except OSError:  # trio.socket.gaierror included
        return []
    addresses = (entry[4][0] for entry in entries)
    return list(dict.fromkeys(a for a in addresses if isinstance(a, str)))


@dataclass(frozen=True)
class ScreenedTarget:
    """Where an accepted webhook URL may be delivered.

    ``host`` is the URL's host, lowercased and without brackets; send it as the
    ``Host`` header and TLS server name. ``address`` is the checked IP address
    to connect to instead of resolving ``host`` again, or ``None`` when nothing
    was checked (screening disabled, or ``host`` is allow-listed).
    """

    url: str
    scheme: str
    host: str
    port: int
    address: str | None


# Characters that URL parsers treat differently; refusing them keeps the host we
# screen the host the HTTP client connects to.
_AMBIGUOUS_CHARACTERS = frozenset("\\ \x7f") | frozenset(map(chr, range(0x20)))


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _normalize_host(host: str) -> str:
    """Lowercase, unbracketed, and IP literals in one spelling (``0::1`` is ``::1``)."""
    host = host.strip("[]").lower()
    literal = _ip_literal(host)
    return host if literal is None else str(literal)


class AddressScreen:
    """Decides whether a webhook URL may be used, and which address to connect to.

    ``allowed_hosts`` are exempt from address checks (for example a webhook
    receiver on the private network that is meant to be reached); they match the
    URL's host exactly, ignoring case, and may be IP literals. With
    ``enabled=False`` only the scheme and host are checked -- for tests and
    closed deployments. ``resolver`` is the seam for tests.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        allowed_hosts: Iterable[str] = (),
        resolver: Resolver = system_resolver,
    ) -> None:
        self.enabled = enabled
        self.allowed_hosts = frozenset(_normalize_host(host) for host in allowed_hosts)
        self.resolver = resolver

    async def screen(self, url: str) -> ScreenedTarget:
        """Check ``url`` and say where to deliver to it.

        Raises :class:`WebhookRefused` if the URL is not ``http``/``https`` with a
        host, or (when screening) if its host is, or resolves to, any address
        that :func:`address_refusal` refuses. A name that does not resolve is
        refused with ``retryable=True``; a resolver that raises is refused too.
        """
        scheme, host, port = _split(url)
        if not self.enabled or _normalize_host(host) in self.allowed_hosts:
            return ScreenedTarget(url, scheme, host, port, address=None)
        literal = _ip_literal(host)
        if literal is not None:
            refusal = address_refusal(literal)
            if refusal is not None:
                raise WebhookRefused(refusal, exemptable_host=host)
            return ScreenedTarget(url, scheme, host, port, address=str(literal))
        address = await self._resolve_and_check(host, port)
        return ScreenedTarget(url, scheme, host, port, address=address)

    async def _resolve_and_check(self, host: str, port: int) -> str:
        try:
            addresses = await self.resolver(host, port)
        except Exception as exc:
            # Fail closed. system_resolver turns lookup failures into [], so an
            # exception here is a bad name or a broken resolver, not a DNS hiccup.
            raise WebhookRefused(f"{host} could not be resolved: {exc!r}") from exc
        if not addresses:
            raise WebhookRefused(f"{host} does not resolve", retryable=True)
        for address in addresses:
            refusal = address_refusal(address)
            if refusal is not None:
                raise WebhookRefused(
                    f"{host} resolves to a refused address: {refusal}", exemptable_host=host
                )
        return addresses[0]


def _split(url: str) -> tuple[str, str, int]:
    """The scheme, host and port of a webhook URL, or :class:`WebhookRefused`."""
    if any(character in _AMBIGUOUS_CHARACTERS for character in url):
        raise WebhookRefused("webhook URL contains whitespace, control characters or backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookRefused(f"webhook URL is malformed: {exc}") from exc
    if not parts.scheme:
        raise WebhookRefused("webhook URL has no scheme; it must be http or https")
    if parts.scheme not in _DEFAULT_PORTS:
        raise WebhookRefused(f"webhook URL scheme must be http or https, not {parts.scheme!r}")
    if not parts.hostname:
        raise WebhookRefused("webhook URL has no host")
    return parts.scheme, parts.hostname, port if port is not None else _DEFAULT_PORTS[parts.scheme]

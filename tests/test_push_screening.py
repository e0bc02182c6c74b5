"""Webhook URLs are screened so push notifications cannot reach private networks."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import pytest

from a2a_trio.push.screening import (
    AddressScreen,
    ScreenedTarget,
    WebhookRefused,
    address_refusal,
    system_resolver,
)


class FakeResolver:
    """Resolves names from a dict; names mapped to an exception raise it."""

    def __init__(self, answers: dict[str, list[str] | Exception]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        answer = self.answers.get(host, [])
        if isinstance(answer, Exception):
            raise answer
        return answer


DNS: dict[str, list[str] | Exception] = {
    "hooks.example": ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"],
    "mixed.example": ["8.8.8.8", "10.0.0.7", "1.1.1.1"],
    "rebind.example": ["2606:4700:4700::1111", "::ffff:127.0.0.1"],
    "broken.example": RuntimeError("resolver crashed"),
    "garbage.example": ["not-an-address"],
}


def screen_with(
    answers: dict[str, list[str] | Exception] = DNS,
    *,
    enabled: bool = True,
    allowed_hosts: Iterable[str] = (),
) -> AddressScreen:
    """A screen whose resolver is a FakeResolver answering from ``answers``."""
    return AddressScreen(
        enabled=enabled, allowed_hosts=allowed_hosts, resolver=FakeResolver(answers)
    )


def calls_of(screen: AddressScreen) -> list[tuple[str, int]]:
    assert isinstance(screen.resolver, FakeResolver)
    return screen.resolver.calls


# (address, words the reason must contain)
REFUSED = [
    # IPv4
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "this network"),
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.254", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "metadata"),
    ("169.254.1.1", "link-local"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.1", "benchmarking"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.1", "documentation"),
    ("203.0.113.1", "documentation"),
    ("192.0.0.1", "IETF protocol assignment"),
    ("192.0.0.9", "IETF protocol assignment"),
    # IPv6 ranges with a reason of their own
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fe80::1", "link-local"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    # inside 2000::/3
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("2001::1", "Teredo"),
    ("2001:2::1", "benchmarking"),
    ("2001:10::1", "ORCHID"),
    ("2001:20::1", "ORCHIDv2"),
    ("2001:3::1", "IETF protocol assignment"),  # whichever Python decides
    # outside 2000::/3
    ("100::1", "outside global unicast"),
    ("::7f00:1", "outside global unicast"),
    ("64:ff9b:1::1", "outside global unicast"),
    ("4000::1", "outside global unicast"),
    ("5f00::1", "outside global unicast"),
]

# (address, embedded IPv4 address, words the reason must contain)
REFUSED_EMBEDDED = [
    ("::ffff:127.0.0.1", "127.0.0.1", "IPv4-mapped"),
    ("::ffff:10.0.0.1", "10.0.0.1", "IPv4-mapped"),
    ("::ffff:169.254.169.254", "169.254.169.254", "metadata"),
    ("64:ff9b::a00:1", "10.0.0.1", "NAT64"),
    ("64:ff9b::7f00:1", "127.0.0.1", "NAT64"),
    ("2002:7f00:1::", "127.0.0.1", "6to4"),
    ("2002:c0a8:101::", "192.168.1.1", "6to4"),
    ("2002:a9fe:a9fe::1", "169.254.169.254", "6to4"),
]

ACCEPTED = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "2606:4700:4700::1111",
    "2a00:1450:4001::200e",
    "::ffff:8.8.8.8",
    "64:ff9b::808:808",
    "2002:808:808::",
]


# --- address_refusal: the pure rule --------------------------------------------------


@pytest.mark.parametrize(("address", "words"), REFUSED)
def test_non_global_address_is_refused_with_its_reason(address: str, words: str) -> None:
    reason = address_refusal(address)
    assert reason is not None
    assert reason.startswith(str(ipaddress.ip_address(address)))
    assert words in reason


@pytest.mark.parametrize(("address", "embedded", "words"), REFUSED_EMBEDDED)
def test_ipv6_carrying_a_refused_ipv4_is_refused_naming_both(
    address: str, embedded: str, words: str
) -> None:
    reason = address_refusal(address)
    assert reason is not None
    assert str(ipaddress.ip_address(address)) in reason
    assert embedded in reason
    assert words in reason
    embedded_reason = address_refusal(embedded)
    assert embedded_reason is not None and embedded_reason in reason


@pytest.mark.parametrize("address", ACCEPTED)
def test_global_unicast_address_is_accepted(address: str) -> None:
    assert address_refusal(address) is None


def test_address_objects_are_judged_like_strings() -> None:
    assert address_refusal(ipaddress.IPv4Address("127.0.0.1")) == "127.0.0.1 is a loopback address"
    assert address_refusal(ipaddress.IPv6Address("2606:4700:4700::1111")) is None


def test_a_string_that_is_not_an_address_is_refused() -> None:
    assert address_refusal("localhost") == "'localhost' is not an IP address"


def test_loopback_reason_reads_as_a_sentence() -> None:
    assert address_refusal("127.0.0.1") == "127.0.0.1 is a loopback address"


# --- AddressScreen.screen: URLs ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "scheme", "host", "port", "address"),
    [
        ("http://8.8.8.8/hook", "http", "8.8.8.8", 80, "8.8.8.8"),
        ("https://8.8.8.8/hook", "https", "8.8.8.8", 443, "8.8.8.8"),
        ("http://8.8.8.8:8080/hook", "http", "8.8.8.8", 8080, "8.8.8.8"),
        ("https://1.1.1.1:8443", "https", "1.1.1.1", 8443, "1.1.1.1"),
        ("HTTPS://1.1.1.1/", "https", "1.1.1.1", 443, "1.1.1.1"),
        (
            "https://[2606:4700:4700::1111]/hook",
            "https",
            "2606:4700:4700::1111",
            443,
            "2606:4700:4700::1111",
        ),
        (
            "http://[2606:4700:4700:0:0:0:0:1111]:9000/",
            "http",
            "2606:4700:4700:0:0:0:0:1111",
            9000,
            "2606:4700:4700::1111",
        ),
    ],
)
async def test_global_ip_literal_is_accepted_and_pinned_to_itself(
    url: str, scheme: str, host: str, port: int, address: str
) -> None:
    screen = screen_with()
    assert await screen.screen(url) == ScreenedTarget(url, scheme, host, port, address)
    assert calls_of(screen) == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "https://10.1.2.3:8443/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:8080/",
        "http://[::ffff:127.0.0.1]/",
        "http://[fe80::1]/",
        "http://0.0.0.0:6379/",
    ],
)
async def test_refused_ip_literal_is_refused_for_good(url: str) -> None:
    screen = screen_with()
    with pytest.raises(WebhookRefused) as refused:
        await screen.screen(url)
    assert not refused.value.retryable
    assert calls_of(screen) == []


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://8.8.8.8/hook", "'ftp'"),
        ("file:///etc/passwd", "'file'"),
        ("javascript:alert(1)", "'javascript'"),
        ("hooks.example/hook", "no scheme"),
        ("//hooks.example/hook", "no scheme"),
        ("http:///hook", "no host"),
        ("https://", "no host"),
        ("http://hooks.example:99999/", "malformed"),
        ("http://hooks.example:http/", "malformed"),
        ("http://[::1/", "malformed"),
        ("http://hooks.example\\@127.0.0.1/", "backslash"),
        ("http://hooks.example /", "whitespace"),
        ("http://hooks.example\n.evil/", "control"),
    ],
)
async def test_url_that_is_not_plain_http_with_a_host_is_refused(url: str, words: str) -> None:
    screen = screen_with()
    with pytest.raises(WebhookRefused) as refused:
        await screen.screen(url)
    assert words in refused.value.reason
    assert not refused.value.retryable
    assert calls_of(screen) == []


async def test_bad_scheme_is_refused_even_with_screening_disabled() -> None:
    with pytest.raises(WebhookRefused, match="'ftp'"):
        await screen_with(enabled=False).screen("ftp://hooks.example/")


async def test_refusal_is_an_exception_whose_message_is_the_reason() -> None:
    with pytest.raises(WebhookRefused) as refused:
        await screen_with().screen("http://127.0.0.1/")
    assert str(refused.value) == refused.value.reason == "127.0.0.1 is a loopback address"


# --- AddressScreen.screen: names -----------------------------------------------------


async def test_name_with_only_global_addresses_is_pinned_to_the_first() -> None:
    screen = screen_with()
    target = await screen.screen("https://Hooks.Example/a2a/push")
    assert target == ScreenedTarget(
        "https://Hooks.Example/a2a/push", "https", "hooks.example", 443, "93.184.215.14"
    )
    assert calls_of(screen) == [("hooks.example", 443)]


async def test_resolver_is_asked_for_the_url_port() -> None:
    screen = screen_with()
    await screen.screen("http://hooks.example:8080/")
    assert calls_of(screen) == [("hooks.example", 8080)]


async def test_name_with_one_private_address_among_global_ones_is_refused() -> None:
    with pytest.raises(WebhookRefused) as refused:
        await screen_with().screen("http://mixed.example/hook")
    assert refused.value.reason == (
        "mixed.example resolves to a refused address: 10.0.0.7 is a private address"
    )
    assert not refused.value.retryable


async def test_name_resolving_to_a_mapped_loopback_address_is_refused() -> None:
    with pytest.raises(WebhookRefused) as refused:
        await screen_with().screen("http://rebind.example/hook")
    assert refused.value.reason.endswith("and 127.0.0.1 is a loopback address")


async def test_name_that_does_not_resolve_is_refused_as_retryable() -> None:
    with pytest.raises(WebhookRefused) as refused:
        await screen_with().screen("http://nowhere.example/hook")
    assert refused.value.reason == "nowhere.example does not resolve"
    assert refused.value.retryable


async def test_resolver_that_raises_fails_closed() -> None:
    with pytest.raises(WebhookRefused) as refused:
        await screen_with().screen("http://broken.example/hook")
    assert "broken.example could not be resolved" in refused.value.reason
    assert isinstance(refused.value.__cause__, RuntimeError)
    assert not refused.value.retryable


async def test_resolver_answer_that_is_not_an_address_is_refused() -> None:
    with pytest.raises(WebhookRefused, match="'not-an-address' is not an IP address"):
        await screen_with().screen("http://garbage.example/hook")


# --- Exemptions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allowed", "url", "host"),
    [
        ("receiver.internal", "http://receiver.internal:9000/hook", "receiver.internal"),
        ("Receiver.Internal", "http://RECEIVER.internal:9000/hook", "receiver.internal"),
        ("127.0.0.1", "http://127.0.0.1:9000/hook", "127.0.0.1"),
        ("::1", "http://[::1]:9000/hook", "::1"),
        ("[0::1]", "http://[::1]:9000/hook", "::1"),
    ],
)
async def test_allowed_host_skips_screening(allowed: str, url: str, host: str) -> None:
    screen = screen_with({"receiver.internal": ["10.0.0.5"]}, allowed_hosts=[allowed])
    target = await screen.screen(url)
    assert target == ScreenedTarget(url, "http", host, 9000, address=None)
    assert calls_of(screen) == []


async def test_allowed_hosts_match_the_whole_host_only() -> None:
    screen = screen_with(
        {"evil.receiver.internal": ["10.0.0.5"]}, allowed_hosts=["receiver.internal"]
    )
    with pytest.raises(WebhookRefused, match="private"):
        await screen.screen("http://evil.receiver.internal/hook")


async def test_disabled_screening_checks_no_addresses() -> None:
    screen = screen_with(enabled=False)
    for url, host, port in [
        ("http://127.0.0.1/hook", "127.0.0.1", 80),
        ("https://mixed.example/hook", "mixed.example", 443),
        ("http://[::1]:8080/", "::1", 8080),
    ]:
        target = await screen.screen(url)
        assert (target.host, target.port, target.address) == (host, port, None)
    assert calls_of(screen) == []


# --- The system resolver, on the real stack ------------------------------------------


async def test_system_resolver_returns_each_address_once() -> None:
    assert await system_resolver("127.0.0.1", 80) == ["127.0.0.1"]


async def test_system_resolver_gives_no_addresses_for_an_unknown_name() -> None:
    assert await system_resolver("nonexistent.invalid", 80) == []


async def test_numeric_shorthand_is_screened_by_what_it_resolves_to() -> None:
    # "127.1" is not an IP literal to ipaddress, but getaddrinfo reads it as 127.0.0.1.
    with pytest.raises(WebhookRefused) as refused:
        await AddressScreen().screen("http://127.1:6379/")
    assert (
        refused.value.reason
        == "127.1 resolves to a refused address: 127.0.0.1 is a loopback address"
    )


async def test_name_the_system_cannot_encode_fails_closed() -> None:
    with pytest.raises(WebhookRefused, match="could not be resolved") as refused:
        await AddressScreen().screen(f"http://{'a' * 64}.example/")
    assert not refused.value.retryable

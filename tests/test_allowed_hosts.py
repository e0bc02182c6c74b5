"""Card URLs never carry a Host the deployment did not name (issue 31).

Without ``server.public_url`` the cards' interface URLs echo the request's
Host: any client could have a card pointing elsewhere served, and a cache in
front would keep it. ``public_url`` fixes the URLs; ``allowed_hosts`` refuses
other hosts where the URLs come from the request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_trio import A2AApp, ServerSettings
from a2a_trio.server.hosts import host_allowed

from .agents import ScriptedExecutor
from .conftest import live_server, make_card

CARD = "/.well-known/agent-card.json"


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())


def interface_urls(card: dict[str, object]) -> list[str]:
    return [i["url"] for i in card["supportedInterfaces"]]  # type: ignore[attr-defined]


async def test_a_host_not_allowed_is_refused_and_an_allowed_one_named_in_the_card(
    tmp_path: Path,
) -> None:
    settings = ServerSettings(allowed_hosts=("agents.example.com",))
    async with live_server(tmp_path, mount, settings=settings) as server:
        elsewhere = await server.client.get(CARD, headers={"Host": "evil.example"})
        call = await server.client.post(
            "/jsonrpc",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
            headers={"Host": "evil.example"},
        )
        allowed = await server.client.get(CARD, headers={"Host": "Agents.Example.com:8443"})

    assert elsewhere.status_code == 400
    assert "evil.example" in elsewhere.json()["error"]["message"]
    assert call.status_code == 400
    assert allowed.status_code == 200
    assert all("agents.example.com:8443" in url.lower() for url in interface_urls(allowed.json()))


async def test_with_a_public_url_the_card_names_it_whatever_the_host(tmp_path: Path) -> None:
    settings = ServerSettings(public_url="https://agents.example.com")
    async with live_server(tmp_path, mount, settings=settings) as server:
        card = await server.client.get(CARD, headers={"Host": "evil.example"})

    assert card.status_code == 200
    urls = interface_urls(card.json())
    assert urls
    assert not any("evil.example" in url for url in urls)


@pytest.mark.parametrize(
    ("host", "allowed", "expected"),
    [
        ("agents.example.com", ["agents.example.com"], True),
        ("agents.example.com:8000", ["agents.example.com"], True),
        ("agents.example.com:8000", ["agents.example.com:9000"], False),
        ("eu.agents.example.com", [".example.com"], True),
        ("example.com", [".example.com"], True),
        ("badexample.com", [".example.com"], False),
        ("[::1]:8000", ["[::1]"], True),
        ("anything", ["*"], True),
        ("evil.example", ["agents.example.com"], False),
        (None, ["agents.example.com"], True),
    ],
)
def test_host_allowed(host: str | None, allowed: list[str], expected: bool) -> None:
    assert host_allowed(host, allowed) is expected

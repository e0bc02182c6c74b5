"""Which card the default path serves: the 1.0 card, or the one with the 0.3 keys too.

1.x clients name their version when they resolve a card (a2a-sdk 1.3's
ClientFactory and @a2a-js/sdk 1.3's resolver both send ``A2A-Version: 1.0``);
0.3 clients name none. The official 0.3 clients themselves are in
tests/test_v0_3_clients.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_trio import A2AApp
from a2a_trio.protocol import AgentCard, AgentInterface
from a2a_trio.protocol.signing import CardKeys, CardSigner, verify_card

from .agents import ScriptedExecutor
from .conftest import live_server, make_card
from .test_card_signing import private_key, private_pem, public_pem

CARD_PATH = "/.well-known/agent-card.json"
V0_3_KEYS = {"protocolVersion", "url", "preferredTransport", "additionalInterfaces"}


def serve(card: AgentCard | None = None, **options: Any) -> Any:
    def configure(app: A2AApp) -> None:
        app.mount("", card=card or make_card(), executor=ScriptedExecutor(), **options)

    return configure


async def fetch(url: str, **kw: Any) -> httpx.Response:
    """A card GET with no header but those given (the test server's client adds A2A-Version)."""
    async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
        return await client.get(CARD_PATH, **kw)


async def test_without_a_version_the_default_card_is_the_1_0_card(tmp_path: Path) -> None:
    # What the conformance kit sends: it checks the strict 1.0 schema (CARD-STRUCT-001).
    async with live_server(tmp_path, serve()) as server:
        card = await fetch(server.url)
    assert not V0_3_KEYS & set(card.json())
    assert card.headers["vary"] == "A2A-Version"


@pytest.mark.parametrize("signal", ["header", "query"])
async def test_a_1_x_client_gets_the_1_0_card_where_0_3_readers_are_expected(
    tmp_path: Path, signal: str
) -> None:
    async with live_server(tmp_path, serve(default_card_v0_3=True)) as server:
        if signal == "header":
            card = await fetch(server.url, headers={"A2A-Version": "1.0"})
        else:  # spec 3.6: a client may name the version as a request parameter instead
            card = await fetch(server.url, params={"A2A-Version": "1.0"})
    assert not V0_3_KEYS & set(card.json())


async def test_without_a_version_a_0_3_reader_gets_both_sets_of_keys_when_asked_for(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, serve(default_card_v0_3=True)) as server:
        strict = await server.client.get(CARD_PATH)
        both = await fetch(server.url)
    assert set(both.json()) >= V0_3_KEYS
    assert {key: both.json()[key] for key in strict.json()} == strict.json()
    # Each form has its own validator, so a revalidation never swaps one for the other.
    assert both.headers["etag"] != strict.headers["etag"]


async def test_a_request_naming_0_3_gets_both_sets_of_keys(tmp_path: Path) -> None:
    async with live_server(tmp_path, serve()) as server:
        card = await fetch(server.url, headers={"A2A-Version": "0.3"})
    assert card.json()["url"] == f"{server.url}/jsonrpc"


async def test_a_card_listing_a_0_3_interface_serves_0_3_readers_as_a2a_sdk_does(
    tmp_path: Path,
) -> None:
    interfaces = [
        AgentInterface(
            url="http://127.0.0.1:1/jsonrpc", protocol_binding="JSONRPC", protocol_version="1.0"
        ),
        AgentInterface(
            url="http://127.0.0.1:1/jsonrpc", protocol_binding="JSONRPC", protocol_version="0.3"
        ),
    ]
    card = make_card().model_copy(update={"supported_interfaces": interfaces})
    async with live_server(tmp_path, serve(card)) as server:
        both = (await fetch(server.url)).json()
    assert both["protocolVersion"] == "0.3.0" and both["url"] == "http://127.0.0.1:1/jsonrpc"


async def test_an_agent_without_0_3_serves_the_1_0_card_whatever_is_asked(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, serve(compat_v0_3=False, default_card_v0_3=True)) as server:
        card = await fetch(server.url, headers={"A2A-Version": "0.3"})
    assert not V0_3_KEYS & set(card.json())
    assert "vary" not in card.headers


async def test_both_forms_of_a_signed_default_card_verify(tmp_path: Path) -> None:
    key = private_key("ES256")
    signer = CardSigner(private_pem(key), algorithm="ES256", kid="card-key-1")
    keys = CardKeys.from_pem(public_pem(key))
    async with live_server(tmp_path, serve(default_card_v0_3=True), card_signer=signer) as server:
        strict = (await server.client.get(CARD_PATH)).json()
        both = (await fetch(server.url)).json()
    assert not V0_3_KEYS & set(strict) and set(both) >= V0_3_KEYS
    verify_card(strict, keys)
    verify_card(both, keys)  # the first signature covers the 0.3 keys too
    # The second covers the 1.0 form a 1.x SDK reads the card into.
    one_zero = {key: value for key, value in both.items() if key not in V0_3_KEYS}
    one_zero["signatures"] = both["signatures"][1:]
    verify_card(one_zero, keys)

"""Signed cards with empty values: served without them, so every verifier agrees.

a2a-sdk and @a2a-js/sdk (1.3) drop ``""``, ``[]`` and ``{}`` before they
canonicalise; spec 8.4.1 keeps a REQUIRED ``"capabilities": {}`` and a
scheme required with no scopes (A2A#2122, a2a-python#1174, a2a-js#627). The
signer serves the card without them unless told to keep them; the verifier
keeps the spec's rule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from a2a_trio import A2AApp, CardKeys, CardSigner, verify_card
from a2a_trio.echo import EchoExecutor
from a2a_trio.protocol import AgentCapabilities
from a2a_trio.server.auth import BearerAuthenticator

from .callers import BEARER, secured_card
from .conftest import live_server
from .test_card_signing import CARD_PATHS, node_sdk, private_key, private_pem, public_pem

__all__ = ["node_sdk"]  # the fixture, shared with test_card_signing

#: "capabilities": {} and a scheme required with no scopes.
CARD = secured_card({"bearer": BEARER}, [{"bearer": []}], capabilities=AgentCapabilities())


def mount(app: A2AApp) -> None:
    authenticators = {"bearer": BearerAuthenticator(tokens={"t": "alice"})}
    app.mount("", card=CARD, executor=EchoExecutor(), authenticators=authenticators)


def test_the_card_has_the_empty_values_the_sdks_leave_out() -> None:
    wire = CARD.to_wire()
    assert wire["capabilities"] == {}
    assert wire["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]


@pytest.mark.parametrize("path", CARD_PATHS)
async def test_a_card_with_empty_values_signed_by_a2a_trio_verifies_with_a2a_sdk(
    tmp_path: Path, path: str
) -> None:
    from a2a.client.card_resolver import parse_agent_card
    from a2a.utils.signing import create_signature_verifier

    key = private_key("ES256")
    signer = CardSigner(private_pem(key), algorithm="ES256", kid="k")
    async with live_server(tmp_path, mount, card_signer=signer) as server:
        document = (await server.client.get(path)).json()
    assert "capabilities" not in document and "securityRequirements" not in document
    verify_card(document, CardKeys.from_pem(public_pem(key)))  # the spec's rule
    verifier = create_signature_verifier(lambda kid, jku: key.public_key(), ["ES256"])
    verifier(parse_agent_card(document))  # raises InvalidSignaturesError when it does not verify


@pytest.mark.parametrize("path", CARD_PATHS)
async def test_a_card_with_empty_values_signed_by_a2a_trio_verifies_with_a2a_js(
    tmp_path: Path, path: str, node_sdk: Callable[..., dict[str, Any]]
) -> None:
    key = private_key("ES256")
    signer = CardSigner(private_pem(key), algorithm="ES256", kid="k")
    async with live_server(tmp_path, mount, card_signer=signer) as server:
        document = (await server.client.get(path)).json()
    answer = node_sdk(
        {"mode": "verify", "card": document, "alg": "ES256", "publicKey": public_pem(key)}
    )
    assert answer.get("error") is None and answer["verified"] is True


async def test_keep_empty_serves_them_and_the_spec_rule_still_verifies(tmp_path: Path) -> None:
    key = private_key("ES256")
    signer = CardSigner(private_pem(key), algorithm="ES256", kid="k", keep_empty=True)
    async with live_server(tmp_path, mount, card_signer=signer) as server:
        document = (await server.client.get(CARD_PATHS[0])).json()
    assert document["capabilities"] == {}
    assert document["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    verify_card(document, CardKeys.from_pem(public_pem(key)))


def test_the_signer_names_what_its_served_form_leaves_out() -> None:
    signer = CardSigner(private_pem(private_key("ES256")), algorithm="ES256", kid="k")
    assert signer.dropped(CARD.to_wire()) == ["capabilities", "securityRequirements"]

"""Signed Agent Cards (spec 8.4): what is signed, how it is served, who verifies it.

Interoperability is checked against the peers themselves: a2a-sdk's
``a2a.utils.signing`` in this process, and @a2a-js/sdk in node (installed once
into a git-ignored cache; skipped only when npm cannot reach the registry
outside CI). The card they exchange holds non-ASCII text, characters outside
the BMP (as text and as object keys that sort differently in UTF-16) and
floats, where canonicalisers have disagreed (a2a-tck issue 227).
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from hypercorn.config import Config

from a2a_trio import A2AApp, A2AClient, CardKeys, CardSignatureError, CardSigner, verify_card
from a2a_trio.config import ConfigError, Settings, build_app
from a2a_trio.echo import EchoExecutor
from a2a_trio.protocol import AgentCard
from a2a_trio.protocol.signing import signed_payload

from .conftest import live_server, served
from .interop_cache import node_script
from .test_cli import a2a_beside

NODE_SCRIPT = Path(__file__).parent / "interop" / "card_signing.mjs"
A2A_JS = "@a2a-js/sdk@1.3.0"
#: Git-ignored: the npm install is kept between runs.
ALGORITHMS = ["ES256", "RS256", "EdDSA"]

#: Non-ASCII text, non-BMP characters (U+1F600 as a key sorts before U+FF01 in
#: UTF-16 but after it by code point), floats that JSON writers spell
#: differently (1e-7, 1e21, 0.1, an integral 2.0) and an explicit false.
TRICKY_CARD: dict[str, Any] = {
    "name": "Café Agent ☕",
    "description": "Grins 😀 at 𝄞 music; naïve façade",
    "version": "1.0.0",
    "capabilities": {
        "streaming": True,
        "pushNotifications": False,
        "extensions": [
            {
                "uri": "urn:example:tuning",
                "params": {
                    "ratio": 0.1,
                    "tiny": 1e-7,
                    "big": 1e21,
                    "whole": 2.0,
                    "count": 3,
                    "😀": "grin",
                    "\uff01": "fullwidth",
                },
            }
        ],
    },
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "s", "name": "Skïll 😀", "description": "Über", "tags": ["ü"]}],
}


#: The card a peer SDK signs: complete, since it is not served from a mount.
PEER_CARD: dict[str, Any] = {
    **TRICKY_CARD,
    "supportedInterfaces": [
        {
            "url": "http://127.0.0.1:9/jsonrpc",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }
    ],
}


def private_key(algorithm: str) -> Any:
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ed25519.Ed25519PrivateKey.generate()


def private_pem(key: Any) -> bytes:
    return key.private_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def public_pem(key: Any) -> str:
    return str(
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


@pytest.fixture(params=ALGORITHMS)
def algorithm(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def key(algorithm: str) -> Any:
    return private_key(algorithm)


@pytest.fixture
def signer(key: Any, algorithm: Any) -> CardSigner:
    return CardSigner(private_pem(key), algorithm=algorithm, kid="card-key-1")


@asynccontextmanager
async def static_server(documents: dict[str, bytes]) -> AsyncIterator[str]:
    """Serve fixed JSON documents by path on 127.0.0.1 (a peer's card, a JWKS)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        body = documents.get(scope["path"])
        status = 200 if body is not None else 404
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body or b"{}"})

    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    async with served(app, config) as url:
        yield url


def mount_tricky(app: A2AApp) -> None:
    app.mount("", card=TRICKY_CARD, executor=EchoExecutor(), name="tricky")


def wire(card: dict[str, Any]) -> bytes:
    return json.dumps(card, ensure_ascii=False).encode()


# --- the payload ----------------------------------------------------------------------


def test_the_payload_reproduces_the_worked_example_of_spec_8_4_1() -> None:
    fragment = {
        "name": "Example Agent",
        "description": "",
        "capabilities": {"streaming": False, "pushNotifications": False, "extensions": []},
        "skills": [],
    }
    assert signed_payload(fragment) == (
        b'{"capabilities":{"pushNotifications":false,"streaming":false},'
        b'"description":"","name":"Example Agent","skills":[]}'
    )


def test_the_payload_is_rfc_8785_for_non_ascii_non_bmp_and_floats() -> None:
    params = TRICKY_CARD["capabilities"]["extensions"][0]["params"]
    payload = signed_payload(
        {"name": "Café 😀", "capabilities": {"extensions": [{"params": params}]}}
    )
    expected = (
        '{"capabilities":{"extensions":[{"params":{"big":1e+21,"count":3,"ratio":0.1,'
        '"tiny":1e-7,"whole":2,"😀":"grin","\uff01":"fullwidth"}}]},"name":"Café 😀"}'
    )
    assert payload == expected.encode()


def test_the_payload_leaves_out_signatures_and_plain_fields_at_their_default() -> None:
    card = copy.deepcopy(TRICKY_CARD)
    card["capabilities"]["extensions"][0]["required"] = False
    card["signatures"] = [{"protected": "e30", "signature": "AA"}]
    assert signed_payload(card) == signed_payload(TRICKY_CARD)


def test_a_card_with_an_integer_beyond_2_53_cannot_be_signed(signer: CardSigner) -> None:
    card = copy.deepcopy(TRICKY_CARD)
    card["capabilities"]["extensions"][0]["params"]["huge"] = 2**53 + 1
    with pytest.raises(CardSignatureError, match="no RFC 8785 canonical form"):
        signer.sign(card)


# --- serving --------------------------------------------------------------------------


async def test_the_served_card_carries_a_signature_that_verifies(
    tmp_path: Path, signer: CardSigner, key: Any
) -> None:
    async with live_server(tmp_path, mount_tricky, card_signer=signer) as server:
        document = (await server.client.get("/.well-known/agent-card.json")).json()
    # Over the card as served, and over its 1.0 form (see the 0.3 keys below).
    for entry in document["signatures"]:
        header = json.loads(_b64(entry["protected"]))
        assert header == {"alg": signer.algorithm, "kid": "card-key-1", "typ": "JOSE"}
    assert verify_card(document, CardKeys.from_pem(public_pem(key))).kid == "card-key-1"


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_the_signed_card_is_cached_until_the_card_changes(
    tmp_path: Path, signer: CardSigner, key: Any
) -> None:
    async with live_server(tmp_path, mount_tricky, card_signer=signer) as server:
        first = await server.client.get("/.well-known/agent-card.json")
        again = await server.client.get("/.well-known/agent-card.json")
        served = server.app.mounts["tricky"].card
        served.card = served.card.model_copy(update={"version": "2.0.0"})
        changed = await server.client.get("/.well-known/agent-card.json")
    # EdDSA and RS256 signatures are deterministic, ES256 ones are not: equal
    # bytes mean the signature was not made again.
    assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
    assert changed.json()["version"] == "2.0.0"
    assert changed.headers["etag"] != first.headers["etag"]
    verify_card(changed.json(), CardKeys.from_pem(public_pem(key)))


async def test_the_extended_card_is_signed_too(
    tmp_path: Path, signer: CardSigner, key: Any
) -> None:
    public = copy.deepcopy(TRICKY_CARD)
    public["capabilities"]["extendedAgentCard"] = True
    extended = {**public, "description": "For callers we know: ünïcode 😀"}

    def configure(app: A2AApp) -> None:
        app.mount("", card=public, extended_card=extended, executor=EchoExecutor(), name="x")

    async with live_server(tmp_path, configure, card_signer=signer) as server:
        keys = CardKeys.from_pem(public_pem(key))
        async with await A2AClient.connect(server.url, card_keys=keys) as client:
            card = await client.get_extended_card()
    assert card.description == "For callers we know: ünïcode 😀"
    assert card.signatures


def test_signing_is_configured_by_a_signing_section(tmp_path: Path) -> None:
    key = private_key("EdDSA")
    (tmp_path / "card.pem").write_bytes(private_pem(key))
    settings = Settings.model_validate(
        {
            "storage": {"path": str(tmp_path / "a.db")},
            "signing": {"algorithm": "EdDSA", "key_file": str(tmp_path / "card.pem"), "kid": "k"},
        }
    )
    card = build_app(settings).card_for("echo", "http://127.0.0.1:8000")
    verify_card(card.to_wire(), CardKeys.from_pem(public_pem(key)))


def test_a_signing_key_of_the_wrong_type_stops_start_up(tmp_path: Path) -> None:
    (tmp_path / "card.pem").write_bytes(private_pem(private_key("RS256")))
    settings = Settings.model_validate(
        {"signing": {"algorithm": "ES256", "key_file": str(tmp_path / "card.pem"), "kid": "k"}}
    )
    with pytest.raises(ConfigError, match=r"signing\.key_file: .*ES256 needs an EC key on P-256"):
        build_app(settings)


# --- a2a-sdk --------------------------------------------------------------------------


def sdk_card(document: dict[str, Any]) -> Any:
    from a2a.types import AgentCard as SdkCard
    from google.protobuf.json_format import ParseDict

    return ParseDict(document, SdkCard())


#: The 1.0 card, and its 0.3 form (signed twice, see test_the_0_3_card_...).
CARD_PATHS = ["/.well-known/agent-card.json", "/.well-known/agent.json"]


@pytest.mark.parametrize("path", CARD_PATHS)
async def test_a2a_sdk_verifies_the_card_a2a_trio_signs(
    tmp_path: Path, signer: CardSigner, key: Any, path: str
) -> None:
    from a2a.client.card_resolver import parse_agent_card
    from a2a.utils.signing import create_signature_verifier

    async with live_server(tmp_path, mount_tricky, card_signer=signer) as server:
        document = (await server.client.get(path)).json()
    verifier = create_signature_verifier(lambda kid, jku: key.public_key(), [signer.algorithm])
    # Read as its client reads a fetched card (0.3 keys are dropped there).
    verifier(parse_agent_card(document))  # raises InvalidSignaturesError when it does not verify


async def test_a2a_trio_card_verify_accepts_a_card_a2a_sdk_signs(
    tmp_path: Path, key: Any, algorithm: str
) -> None:
    from a2a.utils.signing import create_agent_card_signer
    from google.protobuf.json_format import MessageToDict

    card = sdk_card(PEER_CARD)
    create_agent_card_signer(key, {"alg": algorithm, "kid": "sdk-key", "typ": "JOSE", "jku": None})(
        card
    )
    (tmp_path / "sdk.pub").write_text(public_pem(key))
    async with static_server({"/agent.json": wire(MessageToDict(card))}) as url:
        result = await a2a_beside(
            "card", "--verify", "--key", "sdk.pub", f"{url}/agent.json", cwd=tmp_path
        )
    assert result.status == 0, result.err
    assert f"signature 1 ({algorithm}, kid 'sdk-key') verifies" in result.err


async def test_a_card_a2a_sdk_signs_over_its_own_form_fails_naming_what_is_not_covered(
    tmp_path: Path,
) -> None:
    """a2a-sdk drops a scope-less security requirement from what it signs (spec keeps it)."""
    from a2a.utils.signing import create_agent_card_signer
    from google.protobuf.json_format import MessageToDict

    key = private_key("ES256")
    document = copy.deepcopy(PEER_CARD)
    document["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
    document["securityRequirements"] = [{"schemes": {"bearer": {}}}]
    card = sdk_card(document)
    create_agent_card_signer(key, {"alg": "ES256", "kid": "sdk", "typ": "JOSE", "jku": None})(card)
    with pytest.raises(CardSignatureError) as failure:
        verify_card(MessageToDict(card), CardKeys.from_pem(public_pem(key)))
    assert "verifies only over the form a2a-sdk and @a2a-js/sdk sign" in str(failure.value)
    assert str(failure.value).endswith("so it does not cover: securityRequirements")


# --- @a2a-js/sdk ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def node_sdk() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Run tests/interop/card_signing.mjs against @a2a-js/sdk, installed once."""
    node, script = node_script(A2A_JS, NODE_SCRIPT)

    def run(request: dict[str, Any]) -> dict[str, Any]:
        done = subprocess.run(
            [node, str(script)],
            input=json.dumps(request, ensure_ascii=False),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        answer: dict[str, Any] = json.loads(done.stdout)
        return answer

    return run


@pytest.mark.parametrize("path", CARD_PATHS)
async def test_a2a_js_verifies_the_card_a2a_trio_signs(
    tmp_path: Path,
    signer: CardSigner,
    key: Any,
    node_sdk: Callable[..., dict[str, Any]],
    path: str,
) -> None:
    async with live_server(tmp_path, mount_tricky, card_signer=signer) as server:
        document = (await server.client.get(path)).json()
    answer = node_sdk(
        {"mode": "verify", "card": document, "alg": signer.algorithm, "publicKey": public_pem(key)}
    )
    assert answer.get("error") is None and answer["verified"] is True
    # It reads the card into its 1.0 model first: 0.3 keys are not in its form.
    one_zero_form = AgentCard.model_validate(document).to_wire()
    assert answer["canonical"].encode() == signed_payload(one_zero_form)


async def test_a2a_trio_card_verify_accepts_a_card_a2a_js_signs(
    tmp_path: Path, key: Any, algorithm: str, node_sdk: Callable[..., dict[str, Any]]
) -> None:
    answer = node_sdk(
        {
            "mode": "sign",
            "card": PEER_CARD,
            "alg": algorithm,
            "kid": "js-key",
            "privateKey": private_pem(key).decode(),
        }
    )
    assert answer.get("error") is None, answer
    (tmp_path / "js.pub").write_text(public_pem(key))
    async with static_server({"/agent.json": wire(answer["card"])}) as url:
        result = await a2a_beside(
            "card", "--verify", "--key", "js.pub", f"{url}/agent.json", cwd=tmp_path
        )
    assert result.status == 0, result.err
    assert f"signature 1 ({algorithm}, kid 'js-key') verifies" in result.err


# --- verifying any card, and why it fails ---------------------------------------------


@pytest.fixture
async def signed_tricky(tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, Any], Any]]:
    """A live a2a-trio agent signing with ES256 (kid card-key-1); its URL, card and key."""
    key = private_key("ES256")
    signer = CardSigner(private_pem(key), algorithm="ES256", kid="card-key-1")
    (tmp_path / "trusted.pub").write_text(public_pem(key))
    async with live_server(tmp_path, mount_tricky, card_signer=signer) as server:
        document = (await server.client.get("/.well-known/agent-card.json")).json()
        yield server.url, document, key


async def test_card_verify_with_a_key_set_picks_the_key_by_kid(
    tmp_path: Path, signed_tricky: tuple[str, dict[str, Any], Any]
) -> None:
    url, _, key = signed_tricky
    other = CardSigner(private_pem(private_key("ES256")), algorithm="ES256", kid="old-key")
    ours = CardSigner(private_pem(key), algorithm="ES256", kid="card-key-1")
    jwks = {"keys": other.jwks()["keys"] + ours.jwks()["keys"]}
    async with static_server({"/jwks.json": json.dumps(jwks).encode()}) as keys_url:
        result = await a2a_beside(
            "card", "--verify", "--jwks", f"{keys_url}/jwks.json", url, cwd=tmp_path
        )
    assert result.status == 0, result.err
    assert json.loads(result.out)["name"] == "Café Agent ☕"
    assert f"verifies with the key set at {keys_url}/jwks.json" in result.err


async def test_card_verify_without_keys_uses_the_jku_the_signature_names(tmp_path: Path) -> None:
    key = private_key("EdDSA")
    documents: dict[str, bytes] = {}
    async with static_server(documents) as url:
        signer = CardSigner(private_pem(key), algorithm="EdDSA", kid="k", jku=f"{url}/jwks.json")
        documents["/jwks.json"] = json.dumps(signer.jwks()).encode()
        documents["/agent.json"] = wire(signer.sign(TRICKY_CARD))
        result = await a2a_beside("card", "--verify", f"{url}/agent.json", cwd=tmp_path)
    assert result.status == 0, result.err
    assert f"verifies with the card's own jku {url}/jwks.json" in result.err


def tampered(document: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> bytes:
    changed = copy.deepcopy(document)
    change(changed)
    return wire(changed)


def _flip_signature(card: dict[str, Any]) -> None:
    signature = card["signatures"][0]["signature"]
    card["signatures"][0]["signature"] = ("B" if signature[0] == "A" else "A") + signature[1:]


def _rename_kid(card: dict[str, Any]) -> None:
    header = json.loads(_b64(card["signatures"][0]["protected"]))
    header["kid"] = "nobody"
    encoded = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    card["signatures"][0]["protected"] = encoded


TAMPERINGS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "changed field": (
        lambda card: card.update(description="Grins 😀 at 𝄞 music; naive facade"),
        "does not match the card: the card was changed after it was signed",
    ),
    "changed float": (
        lambda card: card["capabilities"]["extensions"][0]["params"].update(ratio=0.2),
        "does not match the card",
    ),
    "changed signature": (_flip_signature, "does not match the card"),
    "no signatures": (lambda card: card.pop("signatures"), "the card has no signatures"),
}


@pytest.mark.parametrize("tampering", TAMPERINGS, ids=list(TAMPERINGS))
async def test_a_tampered_card_fails_verification_naming_the_problem(
    tmp_path: Path, signed_tricky: tuple[str, dict[str, Any], Any], tampering: str
) -> None:
    _, document, _ = signed_tricky
    change, problem = TAMPERINGS[tampering]
    async with static_server({"/agent.json": tampered(document, change)}) as url:
        result = await a2a_beside(
            "card", "--verify", "--key", "trusted.pub", f"{url}/agent.json", cwd=tmp_path
        )
    assert result.status == 1
    assert f"the card at {url}/agent.json does not verify: " in result.err
    assert problem in result.err


async def test_a_signature_naming_a_kid_the_key_set_lacks_fails_naming_it(
    tmp_path: Path, signed_tricky: tuple[str, dict[str, Any], Any]
) -> None:
    _, document, key = signed_tricky
    jwks = CardSigner(private_pem(key), algorithm="ES256", kid="card-key-1").jwks()
    documents = {"/jwks.json": json.dumps(jwks).encode()}
    documents["/agent.json"] = tampered(document, _rename_kid)
    async with static_server(documents) as url:
        result = await a2a_beside(
            "card", "--verify", "--jwks", f"{url}/jwks.json", f"{url}/agent.json", cwd=tmp_path
        )
    assert result.status == 1
    assert "no trusted key has kid 'nobody' (the key set has kids: 'card-key-1')" in result.err


async def test_a_card_signed_by_another_key_fails_naming_the_kid(
    tmp_path: Path, signed_tricky: tuple[str, dict[str, Any], Any]
) -> None:
    url, _, _ = signed_tricky
    (tmp_path / "other.pub").write_text(public_pem(private_key("ES256")))
    result = await a2a_beside("card", "--verify", "--key", "other.pub", url, cwd=tmp_path)
    assert result.status == 1
    assert "signature 1: it (ES256, kid 'card-key-1') does not match the card" in result.err


async def test_a_key_of_another_type_fails_naming_both(
    tmp_path: Path, signed_tricky: tuple[str, dict[str, Any], Any]
) -> None:
    url, _, _ = signed_tricky
    (tmp_path / "rsa.pub").write_text(public_pem(private_key("RS256")))
    result = await a2a_beside("card", "--verify", "--key", "rsa.pub", url, cwd=tmp_path)
    assert result.status == 1
    assert "it is ES256 (kid 'card-key-1'), but the trusted key is an RSA key" in result.err


async def test_the_client_refuses_a_card_that_does_not_verify(
    signed_tricky: tuple[str, dict[str, Any], Any],
) -> None:
    url, _, _ = signed_tricky
    wrong = CardKeys.from_pem(public_pem(private_key("ES256")))
    with pytest.raises(CardSignatureError, match=r"the card at .* no signature verifies"):
        await A2AClient.connect(url, card_keys=wrong)


async def test_the_client_connects_when_the_card_verifies(
    signed_tricky: tuple[str, dict[str, Any], Any],
) -> None:
    url, _, key = signed_tricky
    async with await A2AClient.connect(url, card_keys=CardKeys.from_pem(public_pem(key))) as c:
        assert isinstance(c.card, AgentCard) and c.card.name == "Café Agent ☕"


# --- the 0.3 keys ---------------------------------------------------------------------


async def test_the_0_3_card_is_signed_over_its_0_3_keys_and_over_its_1_0_form(
    tmp_path: Path, signer: CardSigner, key: Any
) -> None:
    async with live_server(tmp_path, mount_tricky, card_signer=signer) as server:
        document = (await server.client.get("/.well-known/agent.json")).json()
        one_zero = (await server.client.get("/.well-known/agent-card.json")).json()
    assert len(document["signatures"]) == 2
    keys = CardKeys.from_pem(public_pem(key))
    verify_card({**one_zero, "signatures": document["signatures"][1:]}, keys)
    assert verify_card(document, keys).index == 0
    document["url"] = "https://elsewhere.example/jsonrpc"  # where a 0.3 client would go
    with pytest.raises(CardSignatureError, match="does not match the card"):
        verify_card(document, keys)


async def test_the_1_0_card_is_signed_once_and_holds_no_0_3_keys(
    tmp_path: Path, signer: CardSigner, key: Any
) -> None:
    async with live_server(tmp_path, mount_tricky, card_signer=signer) as server:
        document = (await server.client.get("/.well-known/agent-card.json")).json()
    assert "url" not in document and "protocolVersion" not in document
    assert len(document["signatures"]) == 1
    verify_card(document, CardKeys.from_pem(public_pem(key)))

"""The spec requirements the conformance kit has no test for, one test each.

Each test's name starts with its requirement id (the kit's ``tck/requirements``,
spec 1.0); docs/conformance.md lists every requirement with the kit's test or
ours. Where a requirement is met by a test elsewhere (beside the feature), that
test names the id in its docstring and the table points there.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import ssl
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import rfc8785
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypercorn.config import Config
from jwt.api_jws import PyJWS
from jwt.utils import base64url_decode

from a2a_trio import A2AApp, A2AClient, CardKeys, CardSignatureError, CardSigner, verify_card
from a2a_trio.protocol import AgentCapabilities, Operation, Task
from a2a_trio.protocol.grpc_wire import METHODS
from a2a_trio.protocol.operations import is_jsonrpc_method, match_route
from a2a_trio.protocol.proto import a2a_pb2
from a2a_trio.server.auth import BearerAuthenticator

from .agents import ScriptedExecutor
from .callers import BEARER, secured_card
from .conftest import LiveServer, live_server, make_card, served, user_message
from .test_card_signing import private_key, private_pem, public_pem
from .test_grpc_binding import Channel, send_request

TIMEOUT = 10.0
CAPABILITIES = AgentCapabilities(streaming=True, push_notifications=True)


def scripted(app: A2AApp) -> None:
    app.mount("", card=make_card(capabilities=CAPABILITIES), executor=ScriptedExecutor())


def secured(app: A2AApp) -> None:
    card = secured_card({"bearer": BEARER}, [{"bearer": []}], capabilities=CAPABILITIES)
    authenticators = {"bearer": BearerAuthenticator(tokens={"alice-token": "alice"})}
    app.mount("", card=card, executor=ScriptedExecutor(), authenticators=authenticators)


# --- Agent Card signatures (spec 8.4) --------------------------------------------------------


def signed(card: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    key = private_key("ES256")
    return CardSigner(private_pem(key), algorithm="ES256", kid="k1").sign(card), key


CARD = {**make_card(description="Café 😀").to_wire(), "iconUrl": "https://x.example/i.png"}


def detached(document: dict[str, Any], payload: bytes, key: Any) -> None:
    """Verify the card's first signature over ``payload`` (raises when it does not)."""
    entry = document["signatures"][0]
    token = f"{entry['protected']}.{PyJWS().encode(payload, key, 'ES256').split('.')[1]}"
    PyJWS().decode_complete(f"{token}.{entry['signature']}", key.public_key(), algorithms=["ES256"])


def test_card_sign_001_the_signed_content_is_the_jcs_canonical_card() -> None:
    document, key = signed(CARD)
    unsigned = {k: v for k, v in document.items() if k != "signatures"}
    detached(document, rfc8785.dumps(unsigned), key)  # exactly RFC 8785's bytes
    with pytest.raises(Exception, match="Signature verification failed"):
        detached(document, json.dumps(unsigned).encode(), key)  # not any other JSON text


def test_card_sign_002_the_signatures_field_is_not_signed() -> None:
    document, key = signed(CARD)
    with pytest.raises(Exception, match="Signature verification failed"):
        detached(document, rfc8785.dumps(document), key)
    # A signature added later (a registry's) leaves the first one valid.
    document["signatures"].append({"protected": "e30", "signature": "AA"})
    verify_card(document, CardKeys.from_pem(public_pem(key)))


def test_card_sign_003_the_protected_header_names_alg_and_kid() -> None:
    document, _ = signed(CARD)
    header = json.loads(base64url_decode(document["signatures"][0]["protected"]))
    assert (header["alg"], header["kid"]) == ("ES256", "k1")


def test_card_sign_004_a_revoked_key_is_not_used_to_verify() -> None:
    # Revoking a key is taking it out of the trusted set (the JWKS): its
    # signatures then verify no more; a key set that holds it verifies them.
    document, old = signed(CARD)
    current = private_key("ES256")
    keys = CardKeys.from_jwks(CardSigner(private_pem(current), algorithm="ES256", kid="k2").jwks())
    with pytest.raises(CardSignatureError, match="no trusted key has kid 'k1'"):
        verify_card(document, keys)
    verify_card(document, CardKeys.from_pem(public_pem(old)))


# --- TLS (spec 7.1, 10.1) -----------------------------------------------------------------


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@asynccontextmanager
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    """The scripted agent served over TLS (ALPN h2 and http/1.1); its https URL and CA."""
    cert, key = certificate(tmp_path)
    app = A2AApp(database=tmp_path / "a2a.db")
    scripted(app)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.certfile, config.keyfile = str(cert), str(key)
    config.accesslog = None
    async with served(app, config) as url:
        yield url.replace("127.0.0.1", "localhost"), cert


async def test_auth_tls_001_every_http_binding_is_served_over_https(tmp_path: Path) -> None:
    async with (
        tls_server(tmp_path) as (url, ca),
        httpx.AsyncClient(verify=ssl.create_default_context(cafile=ca)) as http,
    ):
        client = await A2AClient.connect(url, http=http, prefer=["HTTP+JSON"])
        task = await client.send_message("echo over tls")
        assert isinstance(task, Task)
        rpc = await A2AClient.connect(url, http=http)
        read = await rpc.get_task(task.id)
    assert url.startswith("https://")
    assert read.artifacts is not None and read.artifacts[0].parts[0].text == "over tls"


async def test_auth_tls_002_tls_1_3_is_negotiated(tmp_path: Path) -> None:
    async with tls_server(tmp_path) as (url, ca):
        port = int(url.rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=ca)
        stream = await trio.open_ssl_over_tcp_stream("localhost", port, ssl_context=context)
        await stream.do_handshake()
        version = stream.version()
        await stream.aclose()
    assert version == "TLSv1.3"


async def test_auth_server_001_the_client_refuses_a_server_certificate_it_cannot_verify(
    tmp_path: Path,
) -> None:
    async with tls_server(tmp_path) as (url, _):
        with pytest.raises(httpx.ConnectError) as refused:
            await A2AClient.connect(url)
    causes = []
    error: BaseException | None = refused.value
    while error is not None:
        causes.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(cause, ssl.SSLCertVerificationError) for cause in causes)


async def test_grpc_svc_003_grpc_is_served_over_http2_with_tls(tmp_path: Path) -> None:
    async with tls_server(tmp_path) as (url, ca):
        target = url.removeprefix("https://")

        def call() -> a2a_pb2.SendMessageResponse:
            credentials = grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
            with grpc.secure_channel(target, credentials) as channel:
                rpc = channel.unary_unary(
                    "/lf.a2a.v1.A2AService/SendMessage",
                    request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
                    response_deserializer=a2a_pb2.SendMessageResponse.FromString,
                )
                answer: a2a_pb2.SendMessageResponse = rpc(
                    send_request("echo grpc over tls"), timeout=TIMEOUT
                )
                return answer

        answer = await trio.to_thread.run_sync(call)
    assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


# --- authentication on every request, on every binding -----------------------------------


async def failed_get_on_each_binding(server: LiveServer, task_id: str) -> tuple[Any, Any, Any]:
    """A failed GetTask on each binding: JSON-RPC body, HTTP response, gRPC error."""
    jsonrpc = await server.jsonrpc("GetTask", {"id": task_id})
    rest = await server.rest("GET", f"/tasks/{task_id}")
    channel = Channel(server)
    try:
        failure = await channel.failure("GetTask", a2a_pb2.GetTaskRequest(id=task_id), "Task")
    finally:
        channel.close()
    return jsonrpc, rest, failure


async def test_auth_server_002_every_operation_without_credentials_is_refused(
    tmp_path: Path,
) -> None:
    refused = []
    async with live_server(tmp_path, secured) as server:
        for operation in Operation:
            answer = await server.jsonrpc(operation.value, {"id": "t", "taskId": "t"})
            refused.append((operation.value, answer.get("error", {}).get("code")))
    assert all(code == -32010 for _, code in refused), refused  # UnauthenticatedError


async def test_bind_equiv_004_each_binding_takes_the_card_s_scheme(tmp_path: Path) -> None:
    async with live_server(tmp_path, secured) as server:
        refused_rpc, refused_rest, refused_grpc = await failed_get_on_each_binding(server, "t")
        token = {"Authorization": "Bearer alice-token"}
        sent = await server.jsonrpc(
            "SendMessage", {"message": user_message("echo hi")}, headers=token
        )
        task_id = sent["result"]["task"]["id"]
        rest = await server.rest("GET", f"/tasks/{task_id}", headers=token)
        channel = Channel(server)
        try:
            task = await channel.call(
                "GetTask",
                a2a_pb2.GetTaskRequest(id=task_id),
                "Task",
                metadata=(("a2a-version", "1.0"), ("authorization", "Bearer alice-token")),
            )
        finally:
            channel.close()
    assert refused_rpc["error"]["code"] == -32010
    assert refused_rest.status_code == 401
    assert refused_grpc.code() == grpc.StatusCode.UNAUTHENTICATED
    assert rest.status_code == 200 and task.id == task_id


# --- one agent, three bindings ------------------------------------------------------------


#: Spec 11.3's HTTP+JSON routes, one per operation.
REST_ROUTES = [
    ("POST", "/message:send"),
    ("POST", "/message:stream"),
    ("GET", "/tasks/t"),
    ("GET", "/tasks"),
    ("POST", "/tasks/t:cancel"),
    ("POST", "/tasks/t:subscribe"),
    ("POST", "/tasks/t/pushNotificationConfigs"),
    ("GET", "/tasks/t/pushNotificationConfigs/c"),
    ("GET", "/tasks/t/pushNotificationConfigs"),
    ("DELETE", "/tasks/t/pushNotificationConfigs/c"),
    ("GET", "/extendedAgentCard"),
]


def test_bind_equiv_001_every_binding_serves_every_operation() -> None:
    operations = set(Operation)
    assert all(is_jsonrpc_method(operation.value) for operation in operations)
    assert {match_route(method, path)[0] for method, path in REST_ROUTES} == operations
    assert {method.operation for method in METHODS.values()} == operations


async def test_bind_equiv_002_each_binding_answers_the_same_task(tmp_path: Path) -> None:
    async with live_server(tmp_path, scripted) as server:
        sent = await server.jsonrpc("SendMessage", {"message": user_message("echo same")})
        task_id = sent["result"]["task"]["id"]
        jsonrpc = (await server.jsonrpc("GetTask", {"id": task_id}))["result"]
        rest = (await server.rest("GET", f"/tasks/{task_id}")).json()
        channel = Channel(server)
        try:
            answer = await channel.call("GetTask", a2a_pb2.GetTaskRequest(id=task_id), "Task")
        finally:
            channel.close()
    from google.protobuf.json_format import MessageToDict

    assert jsonrpc == rest == MessageToDict(answer)


async def test_bind_equiv_003_each_binding_maps_an_error_the_same_way(tmp_path: Path) -> None:
    async with live_server(tmp_path, scripted) as server:
        jsonrpc, rest, failure = await failed_get_on_each_binding(server, "none")
    from .test_grpc_binding import error_info

    reasons = {
        jsonrpc["error"]["data"][0]["reason"],
        rest.json()["error"]["details"][0]["reason"],
        error_info(failure).reason,
    }
    assert reasons == {"TASK_NOT_FOUND"}
    assert (jsonrpc["error"]["code"], rest.status_code, failure.code()) == (
        -32001,
        404,
        grpc.StatusCode.NOT_FOUND,
    )


# --- versions (spec 3.6) ------------------------------------------------------------------


async def test_ver_client_001_the_client_sends_a2a_version_with_each_request(
    tmp_path: Path,
) -> None:
    seen: list[str | None] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request.headers.get("A2A-Version"))

    async with (
        live_server(tmp_path, scripted) as server,
        httpx.AsyncClient(event_hooks={"request": [record]}) as http,
    ):
        for binding in ("JSONRPC", "HTTP+JSON"):
            client = await A2AClient.connect(server.url, http=http, prefer=[binding])
            task = await client.send_message("echo v")
            assert isinstance(task, Task)
            await client.get_task(task.id)
    assert len(seen) >= 6 and set(seen) == {"1.0"}


async def test_ver_client_002_patch_versions_do_not_count(tmp_path: Path) -> None:
    async with live_server(tmp_path, scripted) as server:
        card = (await server.client.get("/.well-known/agent-card.json")).json()
        patched = await server.jsonrpc(
            "SendMessage", {"message": user_message("echo p")}, headers={"A2A-Version": "1.0.7"}
        )
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0"}  # no patch
    assert patched["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_ver_server_001_a_request_is_served_in_the_version_it_names(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, scripted) as server:
        message = user_message("echo v")
        one_zero = await server.jsonrpc("SendMessage", {"message": message})
        legacy_message = {
            "kind": "message",
            "messageId": str(uuid.uuid4()),
            "role": "user",
            "parts": [{"kind": "text", "text": "echo v"}],
        }
        zero_three = await server.jsonrpc(
            "message/send", {"message": legacy_message}, headers={"A2A-Version": "0.3"}
        )
        unknown = await server.jsonrpc(
            "SendMessage", {"message": user_message("echo")}, headers={"A2A-Version": "2.0"}
        )
    assert one_zero["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert zero_three["result"]["kind"] == "task"  # 0.3's shapes
    assert zero_three["result"]["status"]["state"] == "completed"
    assert unknown["error"]["code"] == -32009


# --- in-task authorization (spec 7.6) -----------------------------------------------------


async def auth_required_task(server: LiveServer) -> dict[str, Any]:
    sent = await server.jsonrpc("SendMessage", {"message": user_message("auth")})
    task: dict[str, Any] = sent["result"]["task"]
    return task


async def test_auth_intask_001_authorization_is_asked_for_in_a_task(tmp_path: Path) -> None:
    async with live_server(tmp_path, scripted) as server:
        task = await auth_required_task(server)
        stored = (await server.jsonrpc("GetTask", {"id": task["id"]}))["result"]
    assert stored["id"] == task["id"]


async def test_auth_intask_002_the_task_is_auth_required(tmp_path: Path) -> None:
    async with live_server(tmp_path, scripted) as server:
        task = await auth_required_task(server)
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


async def test_auth_intask_003_the_status_message_explains_it(tmp_path: Path) -> None:
    async with live_server(tmp_path, scripted) as server:
        task = await auth_required_task(server)
    assert task["status"]["message"]["parts"] == [{"text": "Please sign in."}]


async def test_auth_intask_004_credentials_come_out_of_band_then_the_task_goes_on(
    tmp_path: Path,
) -> None:
    # The credential itself never travels in the task's messages by default:
    # the client obtains it out of band and says so with its next message.
    async with live_server(tmp_path, scripted) as server:
        task = await auth_required_task(server)
        follow_up = user_message("signed in", taskId=task["id"])
        done = await server.jsonrpc("SendMessage", {"message": follow_up})
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_auth_intask_005_a_subscription_stays_open_through_auth_required(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, scripted) as server:
        task = await auth_required_task(server)
        states: list[str] = []
        subscribed = trio.Event()
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SubscribeToTask",
            "params": {"id": task["id"]},
        }
        async with trio.open_nursery() as nursery:

            async def follow() -> None:
                async with server.client.stream("POST", "/jsonrpc", json=body) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data:"):
                            result = json.loads(line[5:])["result"]
                            update = result.get("statusUpdate") or result.get("task")
                            if update is not None:
                                states.append(update["status"]["state"])
                                subscribed.set()

            nursery.start_soon(follow)
            with trio.fail_after(TIMEOUT):
                await subscribed.wait()  # the stream is open, with the task's snapshot
                follow_up = user_message("signed in", taskId=task["id"])
                await server.jsonrpc("SendMessage", {"message": follow_up})
    assert states[0] == "TASK_STATE_AUTH_REQUIRED"
    assert states[-1] == "TASK_STATE_COMPLETED"


async def test_auth_intask_006_messages_reach_a_task_in_auth_required(tmp_path: Path) -> None:
    async with live_server(tmp_path, scripted) as server:
        task = await auth_required_task(server)
        # A client may negotiate or correct: here it asks again, and is asked again.
        again = user_message("auth", taskId=task["id"])
        answer = await server.jsonrpc("SendMessage", {"message": again})
    assert answer["result"]["task"]["id"] == task["id"]
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


# --- the table in docs/conformance.md -----------------------------------------------------


def test_the_conformance_table_covers_every_requirement() -> None:
    docs = Path(__file__).resolve().parent.parent / "docs" / "conformance.md"
    rows = [
        line.split(" | ")
        for line in docs.read_text().splitlines()
        if re.match(r"^\| [A-Z][A-Z_]*(-[A-Za-z0-9]+)+ \| (MUST|SHOULD|MAY) \| ", line)
    ]
    levels = {row[1] for row in rows}
    assert levels == {"MUST", "SHOULD", "MAY"} and len(rows) == 129
    for requirement, _, covered in rows:
        assert covered.startswith(("kit: `", "ours: `")), requirement
        if covered.startswith("ours:"):
            path, _, name = covered.split("`")[1].partition("::")
            source = (docs.parent.parent / path).read_text()
            assert f"def {name}(" in source, (requirement, name)
            test_id = requirement.removeprefix("| ")
            assert test_id.lower().replace("-", "_") in name or test_id in source, requirement

"""Each built-in authenticator behind a live server, on both bindings.

Good credentials are let in and own the task they create; missing ones are a
401 whose ``WWW-Authenticate`` names the scheme (JSON-RPC: error -32010 on the
401); malformed or wrong ones are a 401 too; valid ones short of a required
scope are a 403 (-32011). Card routes stay public. JWTs are signed in the test
with keys made by ``cryptography``; the JWKS is served over real HTTP by a
small server on 127.0.0.1.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from a2a_trio import (
    A2AApp,
    ApiKeyAuthenticator,
    Authenticator,
    BasicAuthenticator,
    BearerAuthenticator,
    JWTAuthenticator,
    MutualTLSAuthenticator,
    Principal,
)
from a2a_trio.protocol import (
    AgentCapabilities,
    APIKeySecurityScheme,
    ClientCredentialsOAuthFlow,
    HTTPAuthSecurityScheme,
    MutualTlsSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    OpenIdConnectSecurityScheme,
    SecurityScheme,
)

from .agents import ScriptedExecutor
from .callers import BEARER, secured_card
from .conftest import LiveServer, live_server, make_card, user_message
from .test_bindings import BINDINGS
from .webhooks import Reply, WebhookReceiver, webhook_receiver

ISSUER = "https://login.example.test/"
AUDIENCE = "https://agent.example.test"

# --- keys and tokens ----------------------------------------------------------------------


@dataclass(frozen=True)
class SigningKey:
    """A private key the test signs JWTs with, and its public halves."""

    kid: str
    algorithm: str
    private: Any

    def public_pem(self) -> str:
        public = self.private.public_key().public_bytes(
            Encoding.PEM, PublicFormat.SubjectPublicKeyInfo
        )
        return str(public.decode())

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.get_algorithm_by_name(self.algorithm)
        public: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return public | {"kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def token(self, *, kid: str | None = None, **overrides: Any) -> str:
        """A JWT for alice, valid for five minutes; ``None`` overrides drop a claim."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "alice",
            "iat": now,
            "exp": now + 300,
        }
        claims.update(overrides)
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode(
            claims, self.private, algorithm=self.algorithm, headers={"kid": kid or self.kid}
        )


@functools.cache
def rsa_key(kid: str = "rsa-1") -> SigningKey:
    return SigningKey(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


@functools.cache
def ec_key(kid: str = "ec-1") -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


def impostor(key: SigningKey) -> SigningKey:
    """Another key pair of the same kind, claiming ``key``'s kid."""
    other = rsa_key("impostor") if key.algorithm == "RS256" else ec_key("impostor")
    return SigningKey(key.kid, key.algorithm, other.private)


def other_kind(key: SigningKey) -> SigningKey:
    """A key pair of the other kind (RSA for EC, EC for RSA), claiming ``key``'s kid."""
    other = ec_key("impostor") if key.algorithm == "RS256" else rsa_key("impostor")
    return SigningKey(key.kid, other.algorithm, other.private)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hmac_with_public_key(key: SigningKey) -> str:
    """The classic algorithm confusion: HS256 keyed with the server's public key."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": key.kid}).encode())
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 300}
    payload = _b64url(json.dumps(claims).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = hmac.new(key.public_pem().encode(), signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def unsigned_token() -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 300}
    header = _b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    return f"{header}.{_b64url(json.dumps(claims).encode())}."


def basic(user_password: bytes) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(user_password).decode()}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- the authenticators under test ----------------------------------------------------------


@dataclass(frozen=True)
class Credentials:
    """What a request presents: headers (cookies included) and query parameters."""

    headers: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)


def in_headers(headers: Mapping[str, str]) -> Callable[[], Credentials]:
    return lambda: Credentials(headers=headers)


@dataclass(frozen=True)
class Case:
    """One authenticator: its card scheme, and credentials it must accept or refuse.

    Credentials are made when a test runs (JWTs expire). ``authenticator`` is
    given the URL of the test's JWKS server, which only the JWKS case uses.
    """

    scheme: SecurityScheme
    authenticator: Callable[[str], Authenticator]
    good: Callable[[], Credentials]
    bad: Mapping[str, Callable[[], Credentials]]
    #: What the WWW-Authenticate challenge must contain.
    challenge: str


def _verify_token(token: str) -> Principal | None:
    return Principal("alice", authenticated=True) if token == "t-verified" else None


async def _verify_token_async(token: str) -> Principal | None:
    return _verify_token(token)


OAUTH2 = SecurityScheme(
    oauth2_security_scheme=OAuth2SecurityScheme(
        flows=OAuthFlows(
            client_credentials=ClientCredentialsOAuthFlow(
                token_url=ISSUER + "token",
                scopes={"tasks:read": "Read tasks", "tasks:write": "Create tasks"},
            )
        )
    )
)
OPENID = SecurityScheme(
    open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
        open_id_connect_url=ISSUER + ".well-known/openid-configuration"
    )
)


def api_key_scheme(location: str, name: str) -> SecurityScheme:
    return SecurityScheme(
        api_key_security_scheme=APIKeySecurityScheme(location=location, name=name)
    )


def jwt_bad(key: Callable[[], SigningKey]) -> dict[str, Callable[[], Credentials]]:
    """Tokens every JWT authenticator must refuse (``key`` is the trusted one)."""
    return {
        "bearer without a token": in_headers({"Authorization": "Bearer"}),
        "not a JWT": in_headers(bearer("not-a-jwt")),
        "signed by another key": lambda: Credentials(bearer(impostor(key()).token())),
        "wrong issuer": lambda: Credentials(bearer(key().token(iss="https://evil.example/"))),
        "wrong audience": lambda: Credentials(bearer(key().token(aud="https://other.example"))),
        "no expiry": lambda: Credentials(bearer(key().token(exp=None))),
        "no subject": lambda: Credentials(bearer(key().token(sub=None))),
        "unsigned (alg none)": lambda: Credentials(bearer(unsigned_token())),
        "HS256 keyed with the public key": lambda: Credentials(bearer(hmac_with_public_key(key()))),
    }


CASES: dict[str, Case] = {
    "api-key-header": Case(
        api_key_scheme("header", "X-API-Key"),
        lambda _: ApiKeyAuthenticator(name="X-API-Key", keys={"k-alice": "alice"}),
        good=in_headers({"X-API-Key": "k-alice"}),
        bad={"unknown key": in_headers({"X-API-Key": "k-mallory"})},
        challenge='ApiKey header="X-API-Key"',
    ),
    "api-key-query": Case(
        api_key_scheme("query", "api_key"),
        lambda _: ApiKeyAuthenticator(name="api_key", location="query", keys={"k-alice": "alice"}),
        good=lambda: Credentials(params={"api_key": "k-alice"}),
        bad={
            "unknown key": lambda: Credentials(params={"api_key": "k-mallory"}),
            "key in a header instead": in_headers({"api_key": "k-alice"}),
        },
        challenge='ApiKey query="api_key"',
    ),
    "api-key-cookie": Case(
        api_key_scheme("cookie", "session"),
        lambda _: ApiKeyAuthenticator(name="session", location="cookie", keys={"k-alice": "alice"}),
        good=in_headers({"Cookie": "theme=dark; session=k-alice"}),
        bad={"unknown key": in_headers({"Cookie": "session=k-mallory"})},
        challenge='ApiKey cookie="session"',
    ),
    "bearer-tokens": Case(
        BEARER,
        lambda _: BearerAuthenticator(tokens={"t-alice": "alice"}),
        good=in_headers(bearer("t-alice")),
        bad={
            "bearer without a token": in_headers({"Authorization": "Bearer"}),
            "unknown token": in_headers(bearer("t-mallory")),
            "a prefix of the token": in_headers(bearer("t-alic")),
            "another scheme": in_headers({"Authorization": "Token t-alice"}),
        },
        challenge="Bearer",
    ),
    "bearer-verify": Case(
        BEARER,
        lambda _: BearerAuthenticator(verify=_verify_token),
        good=in_headers(bearer("t-verified")),
        bad={"refused by the callback": in_headers(bearer("t-mallory"))},
        challenge="Bearer",
    ),
    "bearer-verify-async": Case(
        BEARER,
        lambda _: BearerAuthenticator(verify=_verify_token_async),
        good=in_headers(bearer("t-verified")),
        bad={"refused by the callback": in_headers(bearer("t-mallory"))},
        challenge="Bearer",
    ),
    "basic": Case(
        SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Basic")),
        lambda _: BasicAuthenticator(users={"alice": "wonder:land"}),
        good=in_headers(basic(b"alice:wonder:land")),
        bad={
            "not base64": in_headers({"Authorization": "Basic !!not-base64!!"}),
            "no colon": in_headers(basic(b"alice")),
            "not UTF-8": in_headers(basic(b"\xff\xfe:\xfd")),
            "wrong password": in_headers(basic(b"alice:wonderland")),
            "unknown user": in_headers(basic(b"mallory:wonder:land")),
            "basic without credentials": in_headers({"Authorization": "Basic"}),
        },
        challenge="Basic",
    ),
    "jwt-rsa-key": Case(
        OAUTH2,
        lambda _: JWTAuthenticator(issuer=ISSUER, audience=AUDIENCE, keys=[rsa_key().public_pem()]),
        good=lambda: Credentials(bearer(rsa_key().token())),
        bad=jwt_bad(rsa_key),
        challenge="Bearer",
    ),
    "jwt-ec-key": Case(
        OAUTH2,
        lambda _: JWTAuthenticator(issuer=ISSUER, audience=AUDIENCE, keys=[ec_key().public_pem()]),
        good=lambda: Credentials(bearer(ec_key().token())),
        bad=jwt_bad(ec_key),
        challenge="Bearer",
    ),
    "jwt-jwks": Case(
        OPENID,
        lambda url: JWTAuthenticator(issuer=ISSUER, audience=AUDIENCE, jwks_url=url),
        good=lambda: Credentials(bearer(rsa_key().token())),
        bad=jwt_bad(rsa_key),
        challenge="Bearer",
    ),
}

BAD_CREDENTIALS = [
    pytest.param(name, label, id=f"{name}-{label}")
    for name, case in CASES.items()
    for label in case.bad
]


# --- servers ------------------------------------------------------------------------------


def serve_keys(jwks: WebhookReceiver, *keys: SigningKey) -> None:
    """From now on the JWKS endpoint publishes exactly ``keys``."""
    document = {"keys": [key.jwk() for key in keys]}
    jwks.default = Reply(200, {"content-type": "application/json"}, json.dumps(document).encode())


@pytest.fixture
async def jwks() -> AsyncIterator[WebhookReceiver]:
    """A JWKS endpoint on 127.0.0.1 publishing ``rsa_key()``; every fetch is recorded."""
    async with webhook_receiver() as receiver:
        serve_keys(receiver, rsa_key())
        yield receiver


def jwks_url(jwks: WebhookReceiver) -> str:
    return jwks.url_for("/.well-known/jwks.json")


@asynccontextmanager
async def guarded(
    tmp_path: Path,
    schemes: Mapping[str, SecurityScheme],
    authenticators: Mapping[str, Authenticator],
    requirements: list[dict[str, list[str]]],
    **mount: Any,
) -> AsyncIterator[LiveServer]:
    """A live server whose one agent (at the root) is protected as given."""

    def configure(app: A2AApp) -> None:
        app.mount(
            "",
            card=secured_card(
                schemes,
                requirements,
                capabilities=AgentCapabilities(streaming=True, extended_agent_card=True),
            ),
            executor=ScriptedExecutor(),
            extended_card=make_card(name="Extended Test Agent"),
            authenticators=authenticators,
            **mount,
        )

    async with live_server(tmp_path, configure) as server:
        yield server


@asynccontextmanager
async def serving(tmp_path: Path, case: Case, jwks: WebhookReceiver) -> AsyncIterator[LiveServer]:
    """``case``'s authenticator as scheme ``auth``, required for every protocol request."""
    async with guarded(
        tmp_path,
        {"auth": case.scheme},
        {"auth": case.authenticator(jwks_url(jwks))},
        [{"auth": []}],
    ) as server:
        yield server


async def call(
    server: LiveServer,
    binding: str,
    method: str,
    params: dict[str, Any],
    credentials: Credentials = Credentials(),
) -> httpx.Response:
    """One request of ``method`` carrying exactly ``credentials``."""
    body: dict[str, Any] | None = params
    if binding == "jsonrpc":
        verb, path = "POST", "/jsonrpc"
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    elif method == "SendMessage":
        verb, path = "POST", "/rest/message:send"
    elif method == "GetTask":
        verb, path, body = "GET", f"/rest/tasks/{params['id']}", None
    elif method == "GetExtendedAgentCard":
        verb, path, body = "GET", "/rest/extendedAgentCard", None
    else:
        raise AssertionError(method)
    return await server.client.request(
        verb, path, json=body, headers=dict(credentials.headers), params=dict(credentials.params)
    )


async def send(
    server: LiveServer, binding: str, credentials: Credentials = Credentials()
) -> httpx.Response:
    return await call(
        server, binding, "SendMessage", {"message": user_message("echo hi")}, credentials
    )


def result_of(response: httpx.Response, binding: str) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    if binding == "jsonrpc":
        assert "error" not in body, body
        result: dict[str, Any] = body["result"]
        return result
    return body


def error_of(response: httpx.Response, binding: str, status: int) -> dict[str, Any]:
    """The error of a refused request, checked to be carried as each binding carries it."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    error: dict[str, Any] = body["error"]
    if binding == "jsonrpc":
        assert (body["jsonrpc"], body["id"]) == ("2.0", 1)
        assert error["code"] == {401: -32010, 403: -32011}[status]
    else:
        assert error["code"] == status
        assert error["status"] == {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}[status]
    return error


def assert_challenged(response: httpx.Response, binding: str, challenge: str) -> dict[str, Any]:
    error = error_of(response, binding, 401)
    assert challenge in response.headers.get("www-authenticate", ""), response.headers
    return error


# --- every authenticator ----------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("name", list(CASES))
async def test_good_credentials_are_let_in_and_own_the_task(
    tmp_path: Path, jwks: WebhookReceiver, name: str, binding: str
) -> None:
    case = CASES[name]
    async with serving(tmp_path, case, jwks) as server:
        credentials = case.good()
        task = result_of(await send(server, binding, credentials), binding)["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        stored = await server.app.store.get_task("default", task["id"], owner=None)
        assert stored is not None
        assert stored.owner == "alice"
        fetched = await call(server, binding, "GetTask", {"id": task["id"]}, credentials)
        assert result_of(fetched, binding)["id"] == task["id"]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("name", list(CASES))
async def test_missing_credentials_are_a_401_naming_the_scheme(
    tmp_path: Path, jwks: WebhookReceiver, name: str, binding: str
) -> None:
    case = CASES[name]
    async with serving(tmp_path, case, jwks) as server:
        assert_challenged(await send(server, binding), binding, case.challenge)
        assert (await server.app.store.list_tasks("default", "", page_size=10)).total_size == 0


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(("name", "label"), BAD_CREDENTIALS)
async def test_bad_credentials_are_a_401(
    tmp_path: Path, jwks: WebhookReceiver, name: str, label: str, binding: str
) -> None:
    case = CASES[name]
    async with serving(tmp_path, case, jwks) as server:
        response = await send(server, binding, case.bad[label]())
        assert_challenged(response, binding, case.challenge)


# --- JWT specifics ------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_expired_jwt_is_a_401_that_says_so(
    tmp_path: Path, jwks: WebhookReceiver, binding: str
) -> None:
    async with serving(tmp_path, CASES["jwt-rsa-key"], jwks) as server:
        expired = rsa_key().token(exp=int(time.time()) - 3600)
        response = await send(server, binding, Credentials(bearer(expired)))
        error = assert_challenged(response, binding, "Bearer")
        assert "expired" in error["message"]


@asynccontextmanager
async def scoped(tmp_path: Path) -> AsyncIterator[LiveServer]:
    """OAuth 2.0 JWTs, with a requirement for the scope ``tasks:write``."""
    authenticator = JWTAuthenticator(issuer=ISSUER, audience=AUDIENCE, keys=[ec_key().public_pem()])
    async with guarded(
        tmp_path, {"oauth": OAUTH2}, {"oauth": authenticator}, [{"oauth": ["tasks:write"]}]
    ) as server:
        yield server


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_valid_jwt_without_the_required_scope_is_a_403(
    tmp_path: Path, binding: str
) -> None:
    async with scoped(tmp_path) as server:
        reader = Credentials(bearer(ec_key().token(scope="tasks:read")))
        error = error_of(await send(server, binding, reader), binding, 403)
        assert "tasks:write" in error["message"]
        assert (await server.app.store.list_tasks("default", "alice", page_size=10)).total_size == 0


@pytest.mark.parametrize(
    "claims",
    [{"scope": "tasks:read tasks:write"}, {"scp": ["tasks:write"]}],
    ids=["scope-string", "scp-list"],
)
@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_jwt_with_the_required_scope_is_let_in(
    tmp_path: Path, binding: str, claims: dict[str, Any]
) -> None:
    async with scoped(tmp_path) as server:
        writer = Credentials(bearer(ec_key().token(**claims)))
        task = result_of(await send(server, binding, writer), binding)["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_jwks_rotation_fetches_the_new_key_once_and_drops_the_old(
    tmp_path: Path, jwks: WebhookReceiver
) -> None:
    old, new = rsa_key("rotated-out"), rsa_key("rotated-in")
    serve_keys(jwks, old)
    async with serving(tmp_path, CASES["jwt-jwks"], jwks) as server:
        for _ in range(3):
            result_of(await send(server, "rest", Credentials(bearer(old.token()))), "rest")
        assert len(jwks.requests) == 1  # fetched once, then cached
        serve_keys(jwks, new)
        for _ in range(2):
            result_of(await send(server, "rest", Credentials(bearer(new.token()))), "rest")
        assert len(jwks.requests) == 2  # the unknown kid refetched the keys once
        refused = await send(server, "rest", Credentials(bearer(old.token())))
        assert_challenged(refused, "rest", "Bearer")
        assert all(request.method == "GET" for request in jwks.requests)


async def test_an_unknown_kid_costs_one_refetch_not_one_per_request(
    tmp_path: Path, jwks: WebhookReceiver
) -> None:
    async with serving(tmp_path, CASES["jwt-jwks"], jwks) as server:
        result_of(await send(server, "rest", Credentials(bearer(rsa_key().token()))), "rest")
        forged = Credentials(bearer(impostor(rsa_key()).token(kid="nobody-knows")))
        for _ in range(5):
            assert_challenged(await send(server, "rest", forged), "rest", "Bearer")
        assert len(jwks.requests) == 2  # the first fetch, and one refetch for the kid


@pytest.mark.parametrize("reply", [Reply(503), Reply(200, body=b"not json")], ids=["503", "junk"])
async def test_a_jwks_that_cannot_be_read_refuses_tokens_with_a_401(
    tmp_path: Path, jwks: WebhookReceiver, reply: Reply
) -> None:
    jwks.default = reply
    async with serving(tmp_path, CASES["jwt-jwks"], jwks) as server:
        refused = await send(server, "jsonrpc", Credentials(bearer(rsa_key().token())))
        assert_challenged(refused, "jsonrpc", "Bearer")
        serve_keys(jwks, rsa_key())  # the endpoint recovers: so does authentication
        result_of(await send(server, "jsonrpc", Credentials(bearer(rsa_key().token()))), "jsonrpc")


@pytest.mark.parametrize("name", ["jwt-rsa-key", "jwt-ec-key", "jwt-jwks"])
@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_jwt_of_another_key_type_under_a_trusted_kid_is_a_401(
    tmp_path: Path, jwks: WebhookReceiver, name: str, binding: str
) -> None:
    trusted = ec_key() if name == "jwt-ec-key" else rsa_key()
    async with serving(tmp_path, CASES[name], jwks) as server:
        forged = Credentials(bearer(other_kind(trusted).token()))
        assert_challenged(await send(server, binding, forged), binding, "Bearer")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_jwks_of_mixed_key_types_accepts_a_valid_token_without_kid(
    tmp_path: Path, jwks: WebhookReceiver, binding: str
) -> None:
    serve_keys(jwks, rsa_key(), ec_key())
    async with serving(tmp_path, CASES["jwt-jwks"], jwks) as server:
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 300}
        token = jwt.encode(claims, ec_key().private, algorithm="ES256")  # no kid header
        result_of(await send(server, binding, Credentials(bearer(token))), binding)


# --- requirements, guard, cards ---------------------------------------------------------------

API_KEY = api_key_scheme("header", "X-API-Key")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_requirement_of_two_schemes_needs_both(tmp_path: Path, binding: str) -> None:
    authenticators: dict[str, Authenticator] = {
        "key": ApiKeyAuthenticator(name="X-API-Key", keys={"k-service": "service"}),
        "bearer": BearerAuthenticator(tokens={"t-alice": "alice"}),
    }
    schemes = {"key": API_KEY, "bearer": BEARER}
    async with guarded(tmp_path, schemes, authenticators, [{"key": [], "bearer": []}]) as server:
        for alone in ({"X-API-Key": "k-service"}, bearer("t-alice")):
            assert_challenged(await send(server, binding, Credentials(alone)), binding, "Bearer")
        both = Credentials({"X-API-Key": "k-service", **bearer("t-alice")})
        result_of(await send(server, binding, both), binding)


@pytest.mark.parametrize(("guard", "owner"), [("bearer", "alice"), ("key", "service")])
async def test_the_guard_scheme_names_the_owner(tmp_path: Path, guard: str, owner: str) -> None:
    authenticators: dict[str, Authenticator] = {
        "key": ApiKeyAuthenticator(name="X-API-Key", keys={"k-service": "service"}),
        "bearer": BearerAuthenticator(tokens={"t-alice": "alice"}),
    }
    schemes = {"key": API_KEY, "bearer": BEARER}
    async with guarded(
        tmp_path, schemes, authenticators, [{"key": [], "bearer": []}], guard=guard
    ) as server:
        both = Credentials({"X-API-Key": "k-service", **bearer("t-alice")})
        task = result_of(await send(server, "rest", both), "rest")["task"]
        stored = await server.app.store.get_task("default", task["id"], owner=None)
        assert stored is not None and stored.owner == owner


@pytest.mark.parametrize("binding", BINDINGS)
async def test_one_satisfied_requirement_admits_the_caller_whatever_other_schemes_say(
    tmp_path: Path, binding: str
) -> None:
    authenticators: dict[str, Authenticator] = {
        "service": BearerAuthenticator(tokens={"t-service": "service"}),
        "oauth": JWTAuthenticator(issuer=ISSUER, audience=AUDIENCE, keys=[ec_key().public_pem()]),
    }
    schemes = {"service": BEARER, "oauth": OAUTH2}
    async with guarded(
        tmp_path, schemes, authenticators, [{"service": []}, {"oauth": []}]
    ) as server:
        user = Credentials(bearer(ec_key().token()))
        result_of(await send(server, binding, user), binding)
        service = Credentials(bearer("t-service"))
        result_of(await send(server, binding, service), binding)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_bad_credentials_are_a_401_even_where_anonymous_callers_are_let_in(
    tmp_path: Path, binding: str
) -> None:
    authenticators = {"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})}
    async with guarded(tmp_path, {"bearer": BEARER}, authenticators, []) as server:
        result_of(await send(server, binding), binding)
        assert_challenged(
            await send(server, binding, Credentials(bearer("t-x"))), binding, "Bearer"
        )


async def test_cards_stay_public_while_protocol_routes_need_credentials(tmp_path: Path) -> None:
    def configure(app: A2AApp) -> None:
        app.mount(
            "/secure",
            card=secured_card({"bearer": BEARER}, [{"bearer": []}]),
            executor=ScriptedExecutor(),
            well_known=True,
            authenticators={"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})},
        )

    async with live_server(tmp_path, configure) as server:
        async with httpx.AsyncClient(base_url=server.url, trust_env=False) as bare:
            for path in ("/.well-known/agent-card.json", "/secure/.well-known/agent-card.json"):
                response = await bare.get(path)
                assert response.status_code == 200, path
                card = response.json()
                assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == (
                    "Bearer"
                )
        envelope = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        response = await server.client.post("/secure/jsonrpc", json=envelope)
        assert_challenged(response, "jsonrpc", "Bearer")
        response = await server.client.get("/secure/rest/tasks")
        assert_challenged(response, "rest", "Bearer")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_extended_card_of_a_secured_card_needs_credentials(
    tmp_path: Path, binding: str
) -> None:
    authenticators = {"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})}
    async with guarded(tmp_path, {"bearer": BEARER}, authenticators, [{"bearer": []}]) as server:
        refused = await call(server, binding, "GetExtendedAgentCard", {})
        assert_challenged(refused, binding, "Bearer")
        card = await call(
            server, binding, "GetExtendedAgentCard", {}, Credentials(bearer("t-alice"))
        )
        assert result_of(card, binding)["name"] == "Extended Test Agent"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_the_extended_card_refuses_anonymous_callers_with_a_challenge(
    tmp_path: Path, binding: str
) -> None:
    # The card declares a scheme but no requirement: anonymous callers reach
    # the protocol routes, the extended card still wants them identified.
    authenticators = {"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})}
    async with guarded(tmp_path, {"bearer": BEARER}, authenticators, []) as server:
        card = await call(
            server, binding, "GetExtendedAgentCard", {}, Credentials(bearer("t-alice"))
        )
        assert result_of(card, binding)["name"] == "Extended Test Agent"
        refused = await call(server, binding, "GetExtendedAgentCard", {})
        assert_challenged(refused, binding, "Bearer")


# --- mounting -----------------------------------------------------------------------------


def test_a_declared_scheme_without_an_authenticator_stops_the_mount(tmp_path: Path) -> None:
    app = A2AApp(database=tmp_path / "a2a.db")
    card = secured_card({"bearer": BEARER, "key": API_KEY}, [{"bearer": []}])
    with pytest.raises(ValueError, match="without an authenticator: key"):
        app.mount(
            "",
            card=card,
            executor=ScriptedExecutor(),
            authenticators={"bearer": BearerAuthenticator(tokens={"t": "alice"})},
        )
    assert app.mounts == {}


MTLS = SecurityScheme(mtls_security_scheme=MutualTlsSecurityScheme())


@pytest.mark.parametrize(
    "authenticators",
    [{}, {"mtls": BearerAuthenticator(tokens={"t": "alice"})}],
    ids=["none", "bearer-instead"],
)
def test_an_mtls_scheme_needs_a_mutual_tls_authenticator(
    tmp_path: Path, authenticators: dict[str, Authenticator]
) -> None:
    app = A2AApp(database=tmp_path / "a2a.db")
    card = secured_card({"mtls": MTLS}, [{"mtls": []}])
    with pytest.raises(ValueError, match="mtls"):
        app.mount("", card=card, executor=ScriptedExecutor(), authenticators=authenticators)
    assert app.mounts == {}


def test_an_mtls_scheme_mounts_with_a_mutual_tls_authenticator(tmp_path: Path) -> None:
    app = A2AApp(database=tmp_path / "a2a.db")
    card = secured_card({"mtls": MTLS}, [{"mtls": []}])
    verify = MutualTLSAuthenticator(lambda certificate: Principal("alice", authenticated=True))
    app.mount("", card=card, executor=ScriptedExecutor(), authenticators={"mtls": verify})
    assert list(app.mounts) == ["default"]

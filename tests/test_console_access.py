"""Who may open the console: its token only; off in production mode without one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio
from trio_websocket import ConnectionRejected

from a2a_trio import A2AApp, BearerAuthenticator, Principal
from a2a_trio.config import ConfigError, Settings, build_app
from a2a_trio.console import ConsoleSettings, attach_console, console_of
from a2a_trio.protocol import HTTPAuthSecurityScheme, SecurityScheme
from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .callers import secured_card
from .conftest import live_server, user_message
from .console_helpers import TOKEN, console_server, feed
from .webhooks import Reply, webhook_receiver

OPERATOR = {"Authorization": f"Bearer {TOKEN}"}


async def test_the_endpoints_answer_the_token_and_refuse_anything_else(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        ok = await server.client.get("/_a2a/api/tasks", headers=OPERATOR)
        assert ok.status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            refused = await server.client.get("/_a2a/api/tasks", headers=headers)
            assert refused.status_code == 401
            assert refused.headers["WWW-Authenticate"].startswith("Bearer")
            assert refused.json()["error"]["status"] == "UNAUTHENTICATED"


async def test_protocol_credentials_never_open_the_console(tmp_path: Path) -> None:
    scheme = SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
    card = secured_card({"bearer": scheme}, [{"bearer": []}])

    def setup(app: A2AApp) -> None:
        app.mount(
            "",
            card=card,
            executor=ScriptedExecutor(),
            authenticators={"bearer": BearerAuthenticator(tokens={"caller-token": "alice"})},
        )
        attach_console(app, ConsoleSettings(token=TOKEN))

    async with live_server(tmp_path, setup) as server:
        caller = {"Authorization": "Bearer caller-token"}
        sent = await server.jsonrpc(
            "SendMessage", {"message": user_message("echo hi")}, headers=caller
        )
        assert "result" in sent, sent
        refused = await server.client.get("/_a2a/api/tasks", headers=caller)
        assert refused.status_code == 401
        listed = await server.client.get("/_a2a/api/tasks", headers=OPERATOR)
        assert [t["owner"] for t in listed.json()["tasks"]] == ["alice"]
        # ...and the console's token is no protocol credential.
        denied = await server.jsonrpc(
            "SendMessage", {"message": user_message("echo hi")}, headers=OPERATOR
        )
        assert "error" in denied


async def test_production_mode_without_a_token_serves_no_console(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "a2a_trio.console")
    settings = ConsoleSettings()
    async with console_server(tmp_path, settings=settings, mode="production") as (server, c, _):
        assert c.token is None
        for path in ("/_a2a/console", "/_a2a/api/tasks", "/_a2a/api/counters"):
            assert (await server.client.get(path)).status_code == 404
        with pytest.raises(ConnectionRejected) as rejected:
            async with feed(server, token="anything"):
                pass
        assert rejected.value.status_code == 404
        assert (await server.client.get("/metrics")).status_code == 200
    assert any("console off" in record.getMessage() for record in caplog.records)


async def test_development_mode_without_a_token_logs_the_console_url_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "a2a_trio.console")
    settings = ConsoleSettings()
    async with console_server(tmp_path, settings=settings) as (server, console, _):
        assert console.generated and console.token
        headers = {"Authorization": f"Bearer {console.token}"}
        assert (await server.client.get("/_a2a/api/tasks", headers=headers)).status_code == 200
    logged = [r.getMessage() for r in caplog.records if console.token in r.getMessage()]
    assert len(logged) == 1
    assert f"/_a2a/console#token={console.token}" in logged[0]


async def test_a_sqlite_file_keeps_its_made_up_console_token_from_start_to_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "a2a_trio.console")
    tokens = []
    for _ in range(2):  # a restart: a new app on the same file
        async with console_server(tmp_path, settings=ConsoleSettings()) as (server, console, _):
            assert console.token is not None
            headers = {"Authorization": f"Bearer {console.token}"}
            assert (await server.client.get("/_a2a/api/tasks", headers=headers)).status_code == 200
            tokens.append(console.token)
    assert tokens[0] == tokens[1]
    kept = tmp_path / "a2a.db.console-token"
    assert kept.read_text().strip() == tokens[0]
    assert kept.stat().st_mode & 0o777 == 0o600
    said = [r.getMessage() for r in caplog.records if tokens[0] in r.getMessage()]
    assert len(said) == 2
    assert all(
        f"a token kept beside {tmp_path / 'a2a.db'}, the same at every start" in line
        for line in said
    )


async def test_a_database_in_memory_makes_up_a_console_token_for_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "a2a_trio.console")
    settings = ConsoleSettings()
    async with console_server(tmp_path, settings=settings, database=":memory:") as (_, console, _):
        assert console.token is not None
    said = [r.getMessage() for r in caplog.records if console.token in r.getMessage()]
    assert len(said) == 1 and "a token made up for this run" in said[0]
    assert kept_tokens(tmp_path) == []


def kept_tokens(folder: Path) -> list[Path]:
    return list(folder.glob("*console-token"))


def test_the_configuration_follows_its_mode(tmp_path: Path) -> None:
    database = str(tmp_path / "a.db")
    production = build_app(
        Settings.model_validate(
            {"mode": "production", "storage": {"url": database, "secret_key": "k" * 44}}
        )
    )
    console = console_of(production)
    assert console is not None and not console.on
    configured = build_app(
        Settings.model_validate(
            {
                "mode": "production",
                "storage": {"url": database, "secret_key": "k" * 44},
                "console": {"token": "set", "path": "/ops"},
            }
        )
    )
    console = console_of(configured)
    assert console is not None and console.on and console.path == "/ops"


async def test_nothing_the_console_shows_holds_a_credential_or_webhook_secret(
    tmp_path: Path,
) -> None:
    secrets = ("webhook-token-5b1e", "webhook-credential-8d2c")
    push = PushSettings(allowed_hosts=("127.0.0.1",), max_attempts=1, backoff=0)
    async with (
        webhook_receiver(default=Reply(500)) as hook,
        console_server(tmp_path, push_settings=push) as (server, _, _),
        feed(server) as ws,
    ):
        config = {
            "url": hook.url_for("/hook?key=url-secret-77"),
            "token": secrets[0],
            "authentication": {"scheme": "Bearer", "credentials": secrets[1]},
        }
        reply = await server.jsonrpc(
            "SendMessage",
            {
                "message": user_message("echo hi"),
                "configuration": {"taskPushNotificationConfig": config},
            },
        )
        task_id = reply["result"]["task"]["id"]
        await hook.wait_for(1)
        seen: list[str] = []
        while not any('"webhook.dead_letter"' in text for text in seen):
            seen.append(str(await ws.get_message()))
        with trio.fail_after(5):
            while not await server.app.store.delivery_page(state="failed"):  # noqa: ASYNC110
                await trio.sleep(0.05)
        for path in (
            f"/_a2a/api/tasks/scripted/{task_id}",
            "/_a2a/api/deliveries",
            "/_a2a/api/tasks",
            "/_a2a/api/agents",
        ):
            seen.append((await server.client.get(path, headers=OPERATOR)).text)
    everything = "\n".join(seen)
    for secret in (*secrets, "url-secret-77", TOKEN):
        assert secret not in everything


def _verify(token: str) -> Principal | None:
    scopes = {"ops-token": frozenset({"a2a:operator"}), "caller-token": frozenset({"read"})}
    if token not in scopes:
        return None
    return Principal(identifier=token.split("-")[0], scopes=scopes[token], authenticated=True)


async def test_a_scheme_and_scope_named_in_settings_open_it_for_operators_only(
    tmp_path: Path,
) -> None:
    scheme = SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
    authenticators = {"bearer": BearerAuthenticator(verify=_verify)}

    def setup(app: A2AApp) -> None:
        app.mount(
            "",
            card=secured_card({"bearer": scheme}, [{"bearer": []}]),
            executor=ScriptedExecutor(),
            authenticators=authenticators,
        )
        settings = ConsoleSettings(scheme="bearer", scope="a2a:operator")
        attach_console(app, settings, mode="production", authenticators=authenticators)

    async with live_server(tmp_path, setup) as server:
        caller = {"Authorization": "Bearer caller-token"}
        operator = {"Authorization": "Bearer ops-token"}
        await server.jsonrpc("SendMessage", {"message": user_message("echo hi")}, headers=caller)
        assert (await server.client.get("/_a2a/api/tasks", headers=caller)).status_code == 401
        listed = await server.client.get("/_a2a/api/tasks", headers=operator)
        assert [t["owner"] for t in listed.json()["tasks"]] == ["caller"]
        async with feed(server, token="ops-token") as ws:
            await server.jsonrpc(
                "SendMessage", {"message": user_message("echo again")}, headers=caller
            )
            assert '"owner":"caller"' in await ws.get_message()
        with pytest.raises(ConnectionRejected):
            async with feed(server, token="caller-token"):
                pass


def test_a_console_scheme_must_exist_and_come_with_a_scope(tmp_path: Path) -> None:
    base = {"storage": {"url": str(tmp_path / "a.db")}}
    with pytest.raises(ConfigError, match=r"console\.scheme: 'nope' is not one of"):
        build_app(Settings.model_validate({**base, "console": {"scheme": "nope", "scope": "x"}}))
    with pytest.raises(ConfigError, match=r"console\.scope: required with console\.scheme"):
        build_app(
            Settings.model_validate(
                {
                    **base,
                    "security_schemes": {"b": {"type": "bearer", "tokens": {"t": "u"}}},
                    "console": {"scheme": "b"},
                }
            )
        )

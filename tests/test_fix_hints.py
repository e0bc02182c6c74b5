"""Errors that say the fix: each refusal names the key, file or command that changes it."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from a2a_trio.config import ConfigError, load_settings
from a2a_trio.push import PushSettings
from a2a_trio.store.postgres import DatabaseUnavailable, PoolSettings
from a2a_trio.store.postgres.database import connect
from a2a_trio.store.url import PostgresLocation

from .postgres import postgres, postgres_url
from .test_cli import a2a, a2a_here, clean_env
from .test_push_delivery import push_server, rpc_error, send

__all__ = ["postgres"]  # the fixture, used by name


# --- a PostgreSQL database that does not exist -------------------------------------------


def test_a_missing_postgresql_database_says_how_to_create_it(postgres: PostgresLocation) -> None:
    missing = dataclasses.replace(
        postgres, dbname=f"a2a_trio_missing_{uuid.uuid4().hex[:8]}", key="storage.url"
    )
    with pytest.raises(DatabaseUnavailable) as refused:
        connect(missing, PoolSettings())
    user = f" -U {missing.user}" if missing.user else ""
    assert str(refused.value).endswith(
        f'database "{missing.dbname}" does not exist; create it with: createdb -h '
        f"{missing.host} -p {missing.port}{user} {missing.dbname} (or name another database "
        "in storage.url)"
    )


def test_serve_on_a_missing_postgresql_database_exits_1_with_the_createdb_command(
    tmp_path: Path, postgres: PostgresLocation
) -> None:
    missing = dataclasses.replace(postgres, dbname=f"a2a_trio_missing_{uuid.uuid4().hex[:8]}")
    result = a2a(
        "serve",
        "--bind",
        "127.0.0.1:0",
        cwd=tmp_path,
        env=clean_env(A2A_TRIO_DATABASE=postgres_url(missing)),
    )
    assert result.status == 1
    assert "Traceback" not in result.err
    assert f"create it with: createdb -h {missing.host}" in result.err
    assert "(or name another database in A2A_TRIO_DATABASE)" in result.err


# --- a webhook to an internal address ----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host"), [("http://127.0.0.1:9/hook", "127.0.0.1"), ("http://localhost/h", "localhost")]
)
async def test_a_webhook_to_loopback_is_refused_naming_push_allowed_hosts(
    tmp_path: Path, url: str, host: str
) -> None:
    async with push_server(tmp_path, PushSettings()) as server:
        task = await send(server, "echo hello")
        error = await rpc_error(
            server, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url}
        )
    assert "is a loopback address" in error["message"] or "the loopback" in error["message"]
    assert error["message"].endswith(
        "(a receiver meant to be reached there is let through by the server's "
        f'push.allowed_hosts = ["{host}"])'
    )


async def test_a_webhook_refused_for_its_scheme_names_no_setting(tmp_path: Path) -> None:
    async with push_server(tmp_path, PushSettings()) as server:
        task = await send(server, "echo hello")
        error = await rpc_error(
            server,
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "url": "ftp://127.0.0.1/hook"},
        )
    assert "scheme must be http or https" in error["message"]
    assert "allowed_hosts" not in error["message"]  # no setting lets ftp through


# --- a misspelled configuration key ------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ('[storage]\nurll = "x.db"\n', "storage.urll: unknown key; did you mean storage.url?"),
        ("[servr]\nfreeze_gc = false\n", "servr: unknown key; did you mean server?"),
        (
            '[[agents]]\nexecuter = "a:B"\ncard = "a:c"\n',
            "agents.0.executer: unknown key; did you mean agents.0.executor?",
        ),
        (
            '[security_schemes.k]\ntype = "api_key"\nnmae = "X-Key"\n',
            "security_schemes.k.nmae: unknown key; did you mean security_schemes.k.name?",
        ),
        (
            "[storage]\nzzz = 1\n",
            "storage.zzz: unknown key; the keys here are url, path, secret_key,",
        ),
    ],
)
def test_a_misspelled_key_is_named_with_the_key_it_is_closest_to(
    tmp_path: Path, toml: str, said: str
) -> None:
    (tmp_path / "a2a.toml").write_text(toml)
    with pytest.raises(ConfigError) as refused:
        load_settings(tmp_path / "a2a.toml")
    assert said in str(refused.value)


def test_a_misspelled_key_exits_2_with_the_suggestion_and_no_usage_text(tmp_path: Path) -> None:
    (tmp_path / "a2a.toml").write_text('[storage]\nurll = "x.db"\n')
    result = a2a("serve", cwd=tmp_path)
    assert result.status == 2
    assert result.err == "error: a2a.toml: storage.urll: unknown key; did you mean storage.url?\n"


# --- an agent's module that fails to import ---------------------------------------------

BROKEN_AGENT = """\
[[agents]]
name = "hello"
executor = "a2a_agents.hello:HelloExecutor"
card = "a2a_agents.hello:card"
"""


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def card(:\n", "SyntaxError: invalid syntax ("),
        ("card = respond\n", "NameError: name 'respond' is not defined ("),
        ("raise RuntimeError('no key')\n", "RuntimeError: no key ("),
    ],
)
@pytest.mark.parametrize("command", ["serve", "card", "worker"])
def test_an_agent_module_that_fails_to_import_exits_2_saying_what_and_where(
    tmp_path: Path, source: str, said: str, command: str
) -> None:
    (tmp_path / "a2a_agents").mkdir()
    (tmp_path / "a2a_agents" / "__init__.py").write_text("")
    (tmp_path / "a2a_agents" / "hello.py").write_text(source)
    (tmp_path / "a2a.toml").write_text(BROKEN_AGENT)
    # card only reads and prints: in this process. serve and worker in a child
    # process each: were they to start despite the broken module, they would not end.
    result = a2a_here(command, cwd=tmp_path) if command == "card" else a2a(command, cwd=tmp_path)
    assert result.status == 2, result.err
    assert "Traceback" not in result.err and "Usage:" not in result.err
    assert result.err.startswith("error: ")
    assert "importing a2a_agents.hello failed: " + said in result.err
    assert f"{tmp_path / 'a2a_agents' / 'hello.py'}, line 1)" in result.err


def test_watch_without_a_token_says_where_to_find_one(tmp_path: Path) -> None:
    (tmp_path / "a2a.toml").write_text('[console]\ntoken = "the-operators-token"\n')
    from .servers import ServerProcess, serve_command

    with ServerProcess.configured_app_served(tmp_path, command=serve_command) as server:
        result = a2a("watch", server.url, "--retries", "0", cwd=tmp_path)
    assert result.status == 1
    assert "the console token was refused (HTTP 401)" in result.err
    assert "no token was given: pass it with --token or $A2A_TRIO_CONSOLE_TOKEN" in result.err

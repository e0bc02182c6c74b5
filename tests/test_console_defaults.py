"""An app built in code gets the console and ``/metrics`` by the defaults of one built
from a2a.toml: one place (``ConsoleSettings``) decides them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from a2a_trio import A2AApp
from a2a_trio.config import Settings, build_app
from a2a_trio.console import ConsoleSettings, console_of
from a2a_trio.echo import EchoExecutor, echo_card

from .conftest import live_server, user_message


def mount_echo(app: A2AApp) -> None:
    app.mount("", card=echo_card(), executor=EchoExecutor(), name="echo")


async def test_an_app_built_in_code_serves_the_console_and_metrics(tmp_path: Path) -> None:
    async with live_server(tmp_path, mount_echo) as server:
        await server.jsonrpc("SendMessage", {"message": user_message("counted")})
        metrics = (await server.client.get("/metrics")).text
        console = console_of(server.app)
        assert console is not None and console.token is not None
        tasks = await server.client.get(
            "/_a2a/api/tasks", headers={"Authorization": f"Bearer {console.token}"}
        )
    assert 'a2a_requests_total{agent="echo",binding="jsonrpc",operation="SendMessage"' in metrics
    assert len(tasks.json()["tasks"]) == 1


async def test_its_console_has_the_settings_of_an_empty_console_section(tmp_path: Path) -> None:
    settings = Settings()
    settings.storage.url = str(tmp_path / "configured.db")
    configured = console_of(build_app(settings))
    async with live_server(tmp_path, mount_echo) as server:
        in_code = console_of(server.app)
    assert configured is not None and in_code is not None
    assert in_code.settings == configured.settings == ConsoleSettings()
    assert dataclasses.asdict(ConsoleSettings()) == Settings().console.model_dump()


async def test_console_false_serves_neither(tmp_path: Path) -> None:
    async with live_server(tmp_path, mount_echo, console=False) as server:
        assert (await server.client.get("/metrics")).status_code == 404
        assert (await server.client.get("/_a2a/api/tasks")).status_code == 404
        assert console_of(server.app) is None

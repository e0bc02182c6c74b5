"""The command line answers quickly: it imports what a command needs, when it runs.

The times themselves are measured by hand (the figures are in docs/cli.md);
these tests check what makes them: ``--version`` and ``--help`` import no
server, client or protocol module, and ``send`` none of the server's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import httpx
import pytest

from a2a_trio.cli import COMMANDS, main

from .conftest import VERSION_HEADERS, user_message
from .servers import ServerProcess, free_port
from .test_cli import clean_env

#: The server's stack and the parts of the client a JSON-RPC send never needs.
SERVER_ONLY = ("quart", "hypercorn", "sqlite_utils", "psycopg", "prometheus_client", "watchfiles")
SEND_NEVER = (
    *SERVER_ONLY,
    "a2a_trio._grpc_channel",
    "google.protobuf",
    "jwt",
    "cryptography",
    "a2a_trio.server",
)
HEAVY = (*SEND_NEVER, "trio", "httpx", "pydantic", "a2a_trio.protocol", "a2a_trio.client")


def imported(*args: str, cwd: Path) -> set[str]:
    """The modules ``a2a-trio ARGS`` imports (``python -X importtime``)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "a2a_trio.cli", *args],
        cwd=cwd,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return import_lines(done.stderr)


def import_lines(text: str) -> set[str]:
    """The modules named by ``python -X importtime``'s lines in ``text``."""
    lines = [line for line in text.splitlines() if line.startswith("import time:")]
    return {line.rsplit("|", 1)[1].strip() for line in lines}


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_server_client_or_protocol_module(
    tmp_path: Path, args: list[str]
) -> None:
    assert loaded(imported(*args, cwd=tmp_path), HEAVY) == []


def test_send_imports_nothing_of_the_server_nor_of_grpc_and_signatures(tmp_path: Path) -> None:
    modules = imported("send", f"http://127.0.0.1:{free_port()}", "hi", cwd=tmp_path)
    assert "a2a_trio.client" in modules
    assert loaded(modules, SEND_NEVER) == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_summary_is_the_commands_own(name: str) -> None:
    command = main.get_command(click.Context(main), name)
    assert command is not None
    assert command.get_short_help_str(limit=1000) == COMMANDS[name].summary


def test_serve_on_sqlite_never_imports_psycopg(tmp_path: Path) -> None:
    # psycopg (0.3 s of CPU to import) is for postgresql:// URLs only: not at
    # start, nor while a message is answered and the server stops.
    def command(port: int) -> list[str]:
        serve = ["-m", "a2a_trio.cli", "serve", "--bind", f"127.0.0.1:{port}"]
        return [sys.executable, "-X", "importtime", *serve]

    with ServerProcess.configured_app_served(tmp_path, command=command) as server:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": user_message("hi")},
        }
        answer = httpx.post(
            server.url + "/jsonrpc", json=body, headers=VERSION_HEADERS, trust_env=False
        )
        assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    modules = import_lines(server.output())
    assert "a2a_trio.store.sqlite" in modules
    assert loaded(modules, ("psycopg",)) == []

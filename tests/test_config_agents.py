"""Agents described by a2a.toml, served by ``hypercorn --worker-class trio a2a_trio:app``.

The server is a real subprocess whose working directory holds the
configuration file; ``examples`` imports because PYTHONPATH names the
repository. Settings that cannot work stop start-up with a message naming the
key, both from ``build_app`` and from the server process itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet

from a2a_trio.config import ConfigError, build_app, load_settings

from .conftest import VERSION_HEADERS, user_message
from .servers import CARD_PATH, ServerProcess

#: The greeter comes first, so it would own the root card by default; the echo
#: agent's explicit ``well_known = true`` takes it over.
TWO_AGENTS = """\
[storage]
path = "agents.db"

[[agents]]
name = "greeter"
prefix = "/greeter"
executor = "examples.multiturn_agent:GreeterExecutor"
card = "examples.multiturn_agent:card"

[[agents]]
name = "echo"
prefix = "/echo"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"
well_known = true
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("two-agents")
    (directory / "a2a.toml").write_text(TWO_AGENTS)
    with ServerProcess.configured_app_served(directory) as process:
        yield process


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers=VERSION_HEADERS, timeout=10.0, trust_env=False
    ) as http:
        yield http


def jsonrpc(client: httpx.Client, prefix: str, method: str, params: dict[str, Any]) -> Any:
    envelope = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(f"{prefix}/jsonrpc", json=envelope)
    assert response.status_code == 200, response.text
    return response.json()


def send(client: httpx.Client, prefix: str, text: str, **fields: Any) -> dict[str, Any]:
    body = jsonrpc(client, prefix, "SendMessage", {"message": user_message(text, **fields)})
    assert "result" in body, body
    task: dict[str, Any] = body["result"]["task"]
    return task


# --- two agents from one file ------------------------------------------------------------------


def test_the_root_card_belongs_to_the_agent_that_claims_it(
    server: ServerProcess, client: httpx.Client
) -> None:
    card = client.get(CARD_PATH).json()
    assert card["name"] == "Echo Agent"
    assert card["supportedInterfaces"][0]["url"] == f"{server.url}/echo/jsonrpc"


@pytest.mark.parametrize(("prefix", "name"), [("/echo", "Echo Agent"), ("/greeter", "Greeter")])
def test_each_prefix_serves_its_own_card(
    server: ServerProcess, client: httpx.Client, prefix: str, name: str
) -> None:
    card = client.get(f"{prefix}{CARD_PATH}").json()
    assert card["name"] == name
    urls = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert urls["JSONRPC"] == f"{server.url}{prefix}/jsonrpc"


def test_the_echo_agent_answers_on_its_prefix(client: httpx.Client) -> None:
    task = send(client, "/echo", "hello from the file")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello from the file"}]


def test_the_greeter_holds_its_two_turn_conversation_on_its_prefix(client: httpx.Client) -> None:
    asked = send(client, "/greeter", "hi")
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    response = client.post(
        "/greeter/rest/message:send",
        json={"message": user_message("Ada", taskId=asked["id"])},
    )
    assert response.status_code == 200, response.text
    done = response.json()["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"] == [{"text": "Nice to meet you, Ada!"}]


@pytest.mark.parametrize(("home", "other"), [("/echo", "/greeter"), ("/greeter", "/echo")])
def test_tasks_of_one_agent_are_not_found_on_the_other(
    client: httpx.Client, home: str, other: str
) -> None:
    task = send(client, home, "mine")
    assert jsonrpc(client, home, "GetTask", {"id": task["id"]})["result"]["id"] == task["id"]
    assert jsonrpc(client, other, "GetTask", {"id": task["id"]})["error"]["code"] == -32001
    listing = jsonrpc(client, other, "ListTasks", {"pageSize": 100})["result"]
    assert task["id"] not in {t["id"] for t in listing["tasks"]}
    response = client.get(f"{other}/rest/tasks/{task['id']}")
    assert response.status_code == 404


def test_the_database_is_the_file_the_configuration_names(
    server: ServerProcess, client: httpx.Client
) -> None:
    send(client, "/echo", "stored")
    assert (server.log_path.parent / "agents.db").is_file()
    assert not (server.log_path.parent / "a2a.db").exists()


def test_an_explicit_root_card_claim_wins_over_the_first_agents_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a2a.toml").write_text(TWO_AGENTS)
    app = build_app(load_settings(tmp_path / "a2a.toml"))
    assert app.mounts["echo"].well_known
    assert not app.mounts["greeter"].well_known


# --- settings that stop start-up ------------------------------------------------------------------

BAD_SETTINGS = [
    pytest.param(
        TWO_AGENTS + 'colour = "blue"\n', r"agents\.1\.colour", id="unknown key in an agent"
    ),
    pytest.param(
        TWO_AGENTS.replace("[storage]", 'mood = "sunny"\n\n[storage]'),
        r"\bmood\b",
        id="unknown key",
    ),
    pytest.param(
        TWO_AGENTS + '\n[runtime]\nqueue_size = "many"\n', r"runtime\.queue_size", id="wrong type"
    ),
    pytest.param(
        TWO_AGENTS.replace('card = "examples.multiturn_agent:card"', "card = 7"),
        r"agents\.0\.card",
        id="wrong type of card",
    ),
    pytest.param(
        TWO_AGENTS.replace(
            'card = "examples.multiturn_agent:card"',
            'card = "examples.multiturn_agent:card"\nwell_known = true',
        ),
        r"agents\[1\].*well_known",
        id="two root cards",
    ),
    pytest.param(
        'guard = "oauth"\n'
        + TWO_AGENTS
        + '\n[security_schemes.bearer]\ntype = "bearer"\ntokens = { "t" = "alice" }\n',
        r"guard: 'oauth'",
        id="guard names an unknown scheme",
    ),
    pytest.param(
        TWO_AGENTS + '\n[security_schemes.client_cert]\ntype = "mtls"\n',
        r"security_schemes\.client_cert: .*verify",
        id="mtls without verify",
    ),
    pytest.param(
        TWO_AGENTS + '\n[security_schemes.key]\ntype = "api_key"\nkeys = { "k" = "alice" }\n',
        r"security_schemes\.key\.name",
        id="api key without a name",
    ),
    pytest.param(
        TWO_AGENTS
        + '\n[security_schemes.bearer]\ntype = "bearer"\nverify = "nowhere.at_all:check"\n',
        r"security_schemes\.bearer\.verify",
        id="verify that does not import",
    ),
    pytest.param(
        'mode = "production"\n' + TWO_AGENTS, r"storage\.secret_key", id="production without key"
    ),
]


@pytest.mark.parametrize(("text", "key"), BAD_SETTINGS)
def test_unusable_settings_stop_start_up_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, key: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a2a.toml").write_text(text)
    with pytest.raises(ConfigError, match=key):
        build_app(load_settings(tmp_path / "a2a.toml"))


def test_production_starts_with_a_secret_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The counterpart of "production without key": the key is what was missing.
    monkeypatch.chdir(tmp_path)
    key = Fernet.generate_key().decode()
    (tmp_path / "a2a.toml").write_text(
        'mode = "production"\n'
        + TWO_AGENTS.replace("[storage]", f'[storage]\nsecret_key = "{key}"')
    )
    app = build_app(load_settings(tmp_path / "a2a.toml"))
    assert set(app.mounts) == {"greeter", "echo"}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        pytest.param(TWO_AGENTS + 'colour = "blue"\n', "agents.1.colour", id="unknown key"),
        pytest.param('mode = "production"\n' + TWO_AGENTS, "storage.secret_key", id="production"),
    ],
)
def test_the_server_process_stops_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    (tmp_path / "a2a.toml").write_text(text)
    process = ServerProcess.launch_configured_app(tmp_path, tmp_path / "server.log")
    process.wait_for_exit()
    output = process.output()
    assert "ConfigError" in output
    assert key in output
    assert not (tmp_path / "agents.db").exists()

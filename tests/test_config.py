"""a2a_trio:app is built from a2a.toml when there is one, else it is the echo agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_trio.config import ConfigError, build_app, load_settings
from a2a_trio.store import SqliteStore
from a2a_trio.store.url import SqliteLocation

TWO_AGENTS = """
[storage]
path = "two.db"

[[agents]]
name = "echo"
prefix = "/echo"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"

[[agents]]
name = "greeter"
prefix = "/greeter"
executor = "examples.multiturn_agent:GreeterExecutor"
card = "examples.multiturn_agent:card"
well_known = false
"""


def test_without_a_file_the_echo_agent_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("A2A_TRIO_CONFIG", raising=False)
    app = build_app()
    assert list(app.mounts) == ["echo"]
    assert app.mounts["echo"].well_known


def test_a2a_toml_in_the_working_directory_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a2a.toml").write_text(TWO_AGENTS)
    app = build_app()
    assert {name: m.prefix for name, m in app.mounts.items()} == {
        "echo": "/echo",
        "greeter": "/greeter",
    }
    assert app.mounts["echo"].well_known and not app.mounts["greeter"].well_known
    assert isinstance(app.store, SqliteStore)
    assert app.store.path == "two.db"


def test_the_database_environment_variable_overrides_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf.toml").write_text(TWO_AGENTS)
    monkeypatch.setenv("A2A_TRIO_CONFIG", str(tmp_path / "conf.toml"))
    monkeypatch.setenv("A2A_TRIO_DATABASE", str(tmp_path / "elsewhere.db"))
    storage = load_settings().storage
    assert storage.url == str(tmp_path / "elsewhere.db")
    assert storage.location() == SqliteLocation(tmp_path / "elsewhere.db")


def test_the_database_environment_variable_overrides_a_url_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "conf.toml"
    path.write_text('[storage]\nurl = "sqlite:///configured.db"\n')
    monkeypatch.setenv("A2A_TRIO_DATABASE", "sqlite:///from-the-environment.db")
    location = load_settings(path).storage.location()
    assert location == SqliteLocation(Path("from-the-environment.db"))


def test_the_default_database_is_a2a_db_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("A2A_TRIO_DATABASE", raising=False)
    path = tmp_path / "empty.toml"
    path.write_text("")
    storage = load_settings(path).storage
    assert storage.url == "sqlite:///a2a.db"
    assert storage.location() == SqliteLocation(Path("a2a.db"))


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ('url = "sqlite:///tasks.db"', "tasks.db"),
        ('url = "sqlite:////srv/a2a/tasks.db"', "/srv/a2a/tasks.db"),
        ('url = "tasks.db"', "tasks.db"),
        ('path = "older.db"', "older.db"),
        ('path = "older.db"\nurl = "sqlite:///newer.db"', "newer.db"),
    ],
    ids=["url", "absolute-url", "url-as-path", "path", "url-over-path"],
)
def test_the_storage_url_or_its_older_spelling_path_names_the_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str, expected: str
) -> None:
    monkeypatch.delenv("A2A_TRIO_DATABASE", raising=False)
    path = tmp_path / "conf.toml"
    path.write_text(f"[storage]\n{storage}\n")
    assert load_settings(path).storage.location() == SqliteLocation(Path(expected))


@pytest.mark.parametrize(
    ("storage", "key"),
    [
        ('url = "mysql://db.internal/a2a"', "storage.url"),
        ('url = "postgresql:///a2a"', "storage.url"),
        ('path = "sqlite://nowhere"', "storage.path"),
    ],
)
def test_a_storage_url_that_cannot_be_used_stops_start_up_naming_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str, key: str
) -> None:
    monkeypatch.delenv("A2A_TRIO_DATABASE", raising=False)
    path = tmp_path / "bad.toml"
    path.write_text(f"[storage]\n{storage}\n")
    with pytest.raises(ConfigError, match=f"^{key}: "):
        load_settings(path)


def test_a_database_environment_variable_that_cannot_be_used_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "conf.toml"
    path.write_text("")
    monkeypatch.setenv("A2A_TRIO_DATABASE", "postgresql://app:s3cret@db.internal:port/a2a")
    with pytest.raises(ConfigError, match=r"^A2A_TRIO_DATABASE: ") as refused:
        load_settings(path)
    assert "s3cret" not in str(refused.value)


def test_an_unknown_key_stops_start_up_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[storage]\npath = "x.db"\ncolour = "blue"\n')
    with pytest.raises(ConfigError, match=r"storage\.colour"):
        load_settings(path)


def test_a_wrong_type_stops_start_up_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[server]\nmax_body_bytes = "lots"\n')
    with pytest.raises(ConfigError, match=r"server\.max_body_bytes"):
        load_settings(path)


def test_two_agents_claiming_the_root_card_stop_start_up(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        TWO_AGENTS.replace("well_known = false", "well_known = true").replace(
            'card = "a2a_trio.echo:echo_card"',
            'card = "a2a_trio.echo:echo_card"\nwell_known = true',
        )
    )
    with pytest.raises(ConfigError, match=r"agents\[1\].*only one agent may own the root card"):
        build_app(load_settings(path))


def test_a_missing_named_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "absent.toml")

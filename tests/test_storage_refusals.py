"""A storage setting a careless operator got wrong stops the start in one line naming the key.

A file in a directory that does not exist, a NUL pasted into a path or a
URL: ``a2a-trio serve`` exits 1 with one line saying which setting and what
is wrong, as it does for a PostgreSQL database out of reach, never with a
traceback, and never with a NUL cutting a PostgreSQL name short.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from a2a_trio.store.url import DatabaseURLError, parse_database_url

from .servers import free_port
from .test_lifecycle import AGENT, CLI, only_line, run

#: No warning about a development key: the one line is the refusal.
SECRET = f'[storage]\nsecret_key = "{Fernet.generate_key().decode()}"\n'


def serve(directory: Path, config: str, status: int) -> str:
    """``a2a-trio serve`` with ``config``, which must refuse to start with ``status``: its line.

    2 for a setting refused as it is read (as an unknown scheme is), 1 for a
    database that cannot be opened (as one out of reach).
    """
    done = run(directory, *CLI, "serve", "--bind", f"127.0.0.1:{free_port()}", config=config)
    assert done.returncode == status, done.stdout
    line = only_line(done)
    assert "Traceback" not in done.stdout and "serving" not in line, done.stdout
    return line


@pytest.mark.parametrize("where", ["storage.url", "agents[0].storage"])
def test_a_sqlite_file_in_a_missing_directory_is_refused_in_one_line(
    tmp_path: Path, where: str
) -> None:
    missing = tmp_path / "no" / "such" / "a2a.db"
    if where == "storage.url":
        config = SECRET + f'url = "{missing}"\n' + AGENT
    else:
        config = SECRET + AGENT + f'storage = "sqlite:///{missing}"\n'
    line = serve(tmp_path, config, 1)
    assert f"{where}: cannot open the SQLite database {missing}: " in line, line
    assert f"the directory {missing.parent} does not exist" in line, line


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("storage.url", "a2a\\u0000.db"),
        ("agents[0].storage", "sqlite:///a2a%00.db"),
        ("agents[0].storage", "postgresql://postgres@127.0.0.1/hprobe%00other"),
    ],
)
def test_a_storage_setting_holding_a_nul_is_refused_in_one_line(
    tmp_path: Path, where: str, value: str
) -> None:
    if where == "storage.url":
        config = SECRET + f'url = "{value}"\n' + AGENT
    else:
        config = SECRET + AGENT + f'storage = "{value}"\n'
    line = serve(tmp_path, config, 2)
    assert f"{where}: holds U+0000 (NUL)" in line, line


def test_a_nul_is_refused_wherever_the_url_holds_it() -> None:
    for value in (
        "a\x00.db",
        "sqlite:///a%00.db",
        "postgresql://u:p%00w@h/db",
        "postgres://h/d%00b",
    ):
        with pytest.raises(DatabaseURLError, match=r"^A2A_TRIO_DATABASE: holds U\+0000"):
            parse_database_url(value, key="A2A_TRIO_DATABASE")
    # A plain path is not a URL: "%00" there is three characters of a file name.
    assert parse_database_url("a%00.db").path == Path("a%00.db")  # type: ignore[union-attr]

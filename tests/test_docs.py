"""The snippets in README.md and docs/ run, so they never rot; the quick start's
test command is what CI runs."""

from __future__ import annotations

import logging
import os
import re
import runpy
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from a2a_trio.config import Settings, build_app

from .servers import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(language: str) -> list[tuple[str, int, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text()
        for match in re.finditer(rf"```{language}\n(.*?)```", text, re.S):
            line = text[: match.start()].count("\n") + 1
            found.append((document.name, line, match.group(1)))
    return found


@pytest.mark.parametrize("source", blocks("python"), ids=lambda block: f"{block[0]}:{block[1]}")
def test_python_snippet_runs_twice_in_a_row(
    source: tuple[str, int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader runs an example again in the same directory: it works the second time too."""
    monkeypatch.chdir(tmp_path)
    code = compile(source[2], f"{source[0]}:{source[1]}", "exec")
    for _ in range(2):
        exec(code, {"__name__": "snippet"})


@pytest.mark.parametrize("source", blocks("toml"), ids=lambda block: f"{block[0]}:{block[1]}")
def test_toml_snippet_is_a_valid_configuration(
    source: tuple[str, int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings.model_validate(tomllib.loads(source[2]))
    settings.storage.path = str(tmp_path / "docs.db")
    app = build_app(settings)
    assert app.mounts


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_agent_streams_to_the_cli(tmp_path: Path) -> None:
    """The agent of "Writing an agent", served as the README says, answers send --stream."""
    section = readme_section("Writing an agent")
    source = re.search(r"```python\n(.*?)```", section, re.S)
    assert source is not None
    (tmp_path / "yourmodule.py").write_text(source.group(1))
    command = re.search(r"```console\n(a2a-trio serve yourmodule:app.*)\n```", section)
    assert command is not None
    server = ServerProcess.launch(
        tmp_path / "server.log",
        app="yourmodule:app",
        env=dict(os.environ),
        cwd=tmp_path,
        command=lambda port: [
            *(sys.executable, "-m", "a2a_trio.cli"),
            *command.group(1).split()[1:],
            *("--bind", f"127.0.0.1:{port}"),
        ],
    )
    try:
        server.wait_until_ready()
        sent = subprocess.run(
            [sys.executable, "-m", "a2a_trio.cli", "send", server.url + "/echo", "hi", "--stream"],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.stop()
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout == "HI\n"
    log = server.output()
    assert re.search(r'"POST /echo/jsonrpc 1\.1" 200 ', log), log  # the access log
    assert "/_a2a/console#token=" in log  # the console


def quick_start_command(comment: str) -> str:
    """The command under ``# comment`` in the README's quick start."""
    return readme_section("Quick start").split(f"# {comment}\n", 1)[1].splitlines()[0]


def test_ci_runs_the_readmes_test_command() -> None:
    command = quick_start_command("run the test suite")
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_nox_does_not_say_that_uv_is_missing(caplog: pytest.LogCaptureFixture) -> None:
    """nox probes for uv before every session; ours use venv, so its absence goes unsaid."""
    import nox.virtualenv

    runpy.run_path(str(ROOT / "noxfile.py"))
    with caplog.at_level(logging.INFO, logger="nox"):
        nox.virtualenv.uv_version("a2a-trio-test-no-such-uv")
    assert "uv binary not found" not in caplog.text

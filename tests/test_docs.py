"""The snippets in README.md and docs/ run, so they never rot."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from a2a_trio.config import Settings, build_app

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
def test_python_snippet_runs(
    source: tuple[str, int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(source[2], f"{source[0]}:{source[1]}", "exec"), {"__name__": "snippet"})


@pytest.mark.parametrize("source", blocks("toml"), ids=lambda block: f"{block[0]}:{block[1]}")
def test_toml_snippet_is_a_valid_configuration(
    source: tuple[str, int, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings.model_validate(tomllib.loads(source[2]))
    settings.storage.path = str(tmp_path / "docs.db")
    app = build_app(settings)
    assert app.mounts

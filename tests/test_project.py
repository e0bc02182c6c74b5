"""The project's own bookkeeping: one version, one hypercorn pin, files a release needs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import a2a_trio
from a2a_trio.server.hypercorn_release import MENDED_VERSIONS

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_package_reports_the_version_pyproject_gives() -> None:
    assert a2a_trio.__version__ == PYPROJECT["project"]["version"]


def test_pyproject_pins_exactly_the_hypercorn_releases_the_mends_cover() -> None:
    pins = [
        requirement
        for requirement in PYPROJECT["project"]["dependencies"]
        if requirement.startswith("hypercorn")
    ]
    assert pins == [f"hypercorn=={release}" for release in MENDED_VERSIONS]


def test_the_changelog_has_an_unreleased_section_and_every_release() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "\n## [Unreleased]\n" in changelog
    assert f"\n## [{PYPROJECT['project']['version']}] - " in changelog


def test_the_license_is_the_one_pyproject_names() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"  # an SPDX expression
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    license_text = " ".join((REPO / "LICENSE").read_text().split())
    assert license_text.startswith("Apache License Version 2.0, January 2004")

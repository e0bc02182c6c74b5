"""Peer SDKs the interop tests run, installed once into the git-ignored ``.interop-cache/``.

Outside CI a peer that cannot be installed skips its tests; under
``CI=true`` that is a failure, so CI never passes by skipping them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

CACHE = Path(__file__).resolve().parent.parent / ".interop-cache"
INSTALL_TIMEOUT = 300


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason``, or fail it under CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"a peer SDK is required under CI: {reason}")
    pytest.skip(reason)


@contextmanager
def installing(name: str) -> Iterator[None]:
    """Hold the cache's lock for ``name`` for the block, across processes.

    pytest-xdist's workers share the cache: the first to need a peer installs it
    while the others wait, then find it installed.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def node_script(package: str, script: Path) -> tuple[str, Path]:
    """node, and ``script`` copied beside a node_modules holding npm ``package`` (once).

    The copy sits next to node_modules so that the script's imports resolve.
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        unavailable("node and npm are not installed")
    directory = CACHE / package.removeprefix("@").replace("/", "-").replace("@", "-")
    name = package.rsplit("@", 1)[0]
    with installing(directory.name):
        if not (directory / "node_modules" / name / "package.json").exists():
            directory.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                [npm, "install", "--prefix", str(directory), "--no-audit", "--no-fund", package],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
            )
            if done.returncode != 0:
                unavailable(f"npm install {package} failed: {done.stderr[-500:]}")
        # Another worker may be running the copy: replace it whole, never rewrite it.
        copy = directory / script.name
        staged = directory / f"{script.name}.{os.getpid()}"
        shutil.copyfile(script, staged)
        staged.replace(copy)
    return node, copy

"""Start, watch and stop the servers under test, each as a child process of its own.

A server runs as ``python -m bench.trio_server`` or ``python -m bench.reference_server``
in a new session (so its whole process group can be killed), optionally
pinned to one core with ``taskset``. ``taskset`` execs the command, so the
child's PID is the server's PID and its ``/proc/PID/status`` is the server's
memory. Whatever happens, :func:`running_server` kills the group on exit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from .common import CARD_PATH, REPO, rss_kib

__all__ = [
    "SERVERS",
    "ServerKind",
    "ServerProcess",
    "ServerStartError",
    "free_port",
    "running_server",
]

STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class ServerStartError(RuntimeError):
    """The server exited or did not answer its card in time; the message holds its log."""


@dataclass(frozen=True, slots=True)
class ServerKind:
    """One server under test: how to start it and what it is."""

    name: str
    module: str
    #: True: the reference's in-memory stores (no database file is used).
    memory: bool = False
    description: str = ""
    #: True: canned answers, no tasks behind them: only the wrk cases apply.
    wrk_only: bool = False

    def command(self, port: int, database: Path) -> list[str]:
        store = "--memory" if self.memory else str(database)
        return [sys.executable, "-m", self.module, str(port), store]


SERVERS: dict[str, ServerKind] = {
    kind.name: kind
    for kind in (
        ServerKind(
            "a2a-trio",
            "bench.trio_server",
            description="a2a-trio A2AApp on hypercorn.trio, SQLite store",
        ),
        ServerKind(
            "reference",
            "bench.reference_server",
            description="a2a-sdk DefaultRequestHandler on uvicorn (uvloop, httptools), "
            "DatabaseTaskStore on SQLite (aiosqlite)",
        ),
        ServerKind(
            "reference-memory",
            "bench.reference_server",
            memory=True,
            description="the same with InMemoryTaskStore (nothing persisted)",
        ),
        ServerKind(
            "hypercorn-floor",
            "bench.floor_server",
            description="hypercorn's trio worker, configured as for a2a-trio, answering "
            "canned responses from a bare ASGI app: no A2A work, nothing stored "
            "(the HTTP layer's ceiling, for scale; wrk cases only)",
            wrk_only=True,
        ),
    )
}


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServerProcess:
    """A started server: its process, port and log."""

    kind: ServerKind
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines the server printed (its stdout and stderr go to the log)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_until_ready(self) -> None:
        """Return once the card answers 200; raise ServerStartError if it never does."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        with httpx.Client(trust_env=False, timeout=1.0) as client:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise ServerStartError(
                        f"{self.kind.name} exited with {self.process.returncode} before "
                        f"answering:\n{self.log_tail()}"
                    )
                try:
                    if client.get(self.url + CARD_PATH).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise ServerStartError(
            f"{self.kind.name} did not answer within {STARTUP_TIMEOUT:.0f} s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL if it lingers; always leaves nothing running."""
        try:
            if self.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(STOP_TIMEOUT)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)  # the process or anything it left behind
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_TIMEOUT)
        finally:
            self._log.close()


def start_server(
    kind: ServerKind, database: Path, log_path: Path, core: int | None
) -> ServerProcess:
    """Start ``kind`` on a free port (pinned to ``core`` if given) and wait for its card."""
    port = free_port()
    command = kind.command(port, database)
    if core is not None:
        command = ["taskset", "-c", str(core), *command]
    log = log_path.open("ab")
    process = subprocess.Popen(
        command,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = ServerProcess(kind, port, process, log_path, log)
    try:
        server.wait_until_ready()
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running_server(
    kind: ServerKind, workdir: Path, tag: str, core: int | None
) -> Iterator[ServerProcess]:
    """A freshly started server on a fresh database ``workdir/<name>-<tag>.db``."""
    database = workdir / f"{kind.name}-{tag}.db"
    log_path = workdir / f"{kind.name}-{tag}.log"
    server = start_server(kind, database, log_path, core)
    try:
        yield server
    finally:
        server.stop()

"""Start, watch and stop the servers under test, each as a child process of its own.

A server runs as ``python -m bench.trio_server`` or ``python -m bench.reference_server``
in a new session (so its whole process group can be killed), optionally
pinned to one core with ``taskset``. ``taskset`` execs the command, so the
child's PID is the server's PID and its ``/proc/PID/status`` is the server's
memory. Whatever happens, :func:`running_server` kills the group on exit.

Every start is on a fresh store: a new SQLite file in the run's temporary
directory or, for the ``*-pg`` servers, a new database on the local PostgreSQL
(:class:`~bench.postgres.LocalPostgres`), created before the process starts and
dropped once it has stopped. A PostgreSQL server gets the database's URL as its
argument and, for a2a-trio's own configuration, as ``A2A_TRIO_DATABASE``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import httpx

from .common import CARD_PATH, REPO, cpu_times, rss_kib
from .postgres import LocalPostgres

__all__ = [
    "SERVERS",
    "ServerKind",
    "ServerProcess",
    "ServerStartError",
    "free_port",
    "running_server",
    "start_server",
]

STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
#: a2a-trio reads its store's URL from here (``a2a_trio:app``, the CLI).
DATABASE_ENV = "A2A_TRIO_DATABASE"

StoreKind = Literal["sqlite", "postgres", "memory", "none"]


class ServerStartError(RuntimeError):
    """The server exited or did not answer its card in time; the message holds its log."""


@dataclass(frozen=True, slots=True)
class ServerKind:
    """One server under test: how to start it and what it is."""

    name: str
    module: str
    #: Where it keeps tasks: a SQLite file, a PostgreSQL database, the reference's
    #: in-memory stores, or nowhere (the floor's canned answers).
    store: StoreKind = "sqlite"
    description: str = ""
    #: True: canned answers, no tasks behind them: only the load cases (wrk, gRPC) apply.
    load_only: bool = False
    #: A directory holding another ``a2a_trio`` package (a checkout of an
    #: earlier commit, say) that the server imports instead of this one's, with
    #: this bench's server script: the "before" of a before/after run.
    code: str | None = None

    def command(self, port: int, database: str) -> list[str]:
        store = "--memory" if self.store == "memory" else database
        if self.code is None:
            return [sys.executable, "-m", self.module, str(port), store]
        # a2a_trio imported from ``code`` first; ``bench`` then from this checkout.
        start = (
            f"import runpy, sys; sys.path.insert(0, {self.code!r}); import a2a_trio;"
            f" sys.path.remove({self.code!r});"
            f" runpy.run_module({self.module!r}, run_name='__main__', alter_sys=True)"
        )
        return [sys.executable, "-c", start, str(port), store]


SERVERS: dict[str, ServerKind] = {
    kind.name: kind
    for kind in (
        ServerKind(
            "a2a-trio",
            "bench.trio_server",
            description="a2a-trio A2AApp on hypercorn.trio, SQLite store",
        ),
        ServerKind(
            "a2a-trio-bridged",
            "bench.bridged_server",
            description="a2a-trio as a2a-trio, the same agent written for asyncio: "
            "every execution through the asyncio bridge",
        ),
        ServerKind(
            "reference",
            "bench.reference_server",
            description="a2a-sdk DefaultRequestHandler on uvicorn (uvloop, httptools), "
            "DatabaseTaskStore on SQLite (aiosqlite)",
        ),
        ServerKind(
            "a2a-trio-pg",
            "bench.trio_server",
            store="postgres",
            description="a2a-trio A2AApp on hypercorn.trio, PostgreSQL store "
            "(a fresh database; PostgreSQL pinned to the load generator's core)",
        ),
        ServerKind(
            "reference-pg",
            "bench.reference_server",
            store="postgres",
            description="a2a-sdk DefaultRequestHandler on uvicorn (uvloop, httptools), "
            "DatabaseTaskStore and DatabasePushNotificationConfigStore on PostgreSQL "
            "(SQLAlchemy postgresql+asyncpg, a pool keeping up to 64 connections)",
        ),
        ServerKind(
            "reference-memory",
            "bench.reference_server",
            store="memory",
            description="the same with InMemoryTaskStore (nothing persisted)",
        ),
        ServerKind(
            "hypercorn-floor",
            "bench.floor_server",
            description="hypercorn's trio worker, configured as for a2a-trio, answering "
            "canned responses from a bare ASGI app: no A2A work, nothing stored "
            "(the HTTP layer's ceiling, for scale; wrk and gRPC cases only)",
            store="none",
            load_only=True,
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
    #: Run once the process is gone (drops its PostgreSQL database).
    cleanup: Callable[[], None] | None = None

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
            cleanup, self.cleanup = self.cleanup, None
            if cleanup is not None:
                try:
                    cleanup()
                except Exception as error:  # a database left behind is no reason to stop
                    print(f"cleanup after {self.kind.name} failed: {error}", file=sys.stderr)


def spawn(
    command: list[str], env: dict[str, str], log_path: Path, core: int | None
) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    """Start ``command`` in a session of its own (on ``core`` if given), logging to a file."""
    if core is not None:
        command = ["taskset", "-c", str(core), *command]
    log = log_path.open("ab")
    try:
        process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except BaseException:
        log.close()
        raise
    return process, log


def start_server(
    kind: ServerKind,
    workdir: Path,
    tag: str,
    core: int | None,
    postgres: LocalPostgres | None = None,
) -> ServerProcess:
    """Start ``kind`` on a fresh store and a free port (pinned to ``core`` if given).

    The store is ``workdir/<name>-<tag>.db`` or, for a PostgreSQL server, a new
    database on ``postgres`` that is dropped when the server stops (or fails to
    start). Returns once the card answers.
    """
    port = free_port()
    log_path = workdir / f"{kind.name}-{tag}.log"
    env = dict(os.environ)
    cleanup: Callable[[], None] | None = None
    if kind.store == "postgres":
        if postgres is None:
            raise ServerStartError(f"{kind.name} needs PostgreSQL (see --pg-url)")
        name = postgres.create_database()
        database = postgres.url_for(name)
        env[DATABASE_ENV] = database
        cleanup = functools.partial(postgres.drop_database, name)
    else:
        database = str(workdir / f"{kind.name}-{tag}.db")
    try:
        process, log = spawn(kind.command(port, database), env, log_path, core)
    except BaseException:
        if cleanup is not None:
            cleanup()
        raise
    server = ServerProcess(kind, port, process, log_path, log, cleanup)
    try:
        server.wait_until_ready()
        if kind.store == "postgres":
            assert postgres is not None
            # Both servers create their tables before serving: none means the
            # server is not on this database, and its figures would not be PostgreSQL's.
            if postgres.table_count(name) == 0:
                raise ServerStartError(
                    f"{kind.name} answers, but created no table in its database {name}"
                )
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running_server(
    kind: ServerKind,
    workdir: Path,
    tag: str,
    core: int | None,
    postgres: LocalPostgres | None = None,
) -> Iterator[ServerProcess]:
    """A freshly started server on a fresh store (see :func:`start_server`)."""
    server = start_server(kind, workdir, tag, core, postgres)
    try:
        yield server
    finally:
        server.stop()


def on_baseline(kind: ServerKind, baseline: Path) -> ServerKind:
    """``kind`` as ``NAME@base``, importing the ``a2a_trio`` package found in ``baseline``."""
    if not (baseline / "a2a_trio" / "__init__.py").is_file():
        raise SystemExit(f"--baseline {baseline}: no a2a_trio package there")
    return dataclasses.replace(
        kind,
        name=f"{kind.name}@base",
        code=str(baseline.resolve()),
        description=f"{kind.description}; a2a_trio from {baseline}",
    )


def with_cpu(server: ServerProcess, load: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``load()``'s result with the server process's CPU during it, per verified response.

    ``load`` returns a wrk-style result (``good_rps``, ``duration_s``); the system
    part of the CPU (the kernel's, for the server's calls) is also given apart.
    """
    user_before, system_before = cpu_times(server.pid)
    run = load()
    user_after, system_after = cpu_times(server.pid)
    cpu = user_after - user_before + system_after - system_before
    run["cpu_s"] = cpu
    good = run["good_rps"] * run["duration_s"]
    run["cpu_us_per_good"] = cpu / good * 1e6 if good else float("nan")
    system = system_after - system_before
    run["system_us_per_good"] = system / good * 1e6 if good else float("nan")
    return run

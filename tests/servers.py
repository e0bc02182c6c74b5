"""A server in a child process: hypercorn serving an app module, killed as a group."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

REPO = Path(__file__).resolve().parent.parent
CARD_PATH = "/.well-known/agent-card.json"
STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def listens_on(group: int, port: int) -> bool:
    """Whether a process of session ``group`` holds the socket listening on 127.0.0.1:``port``.

    A port free when chosen may be bound by another test's server first; its
    card would answer for this one. Linux only, as the suite is.
    """
    wanted = f"0100007F:{port:04X}"
    listening = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == wanted and fields[3] == "0A":  # 0A: LISTEN
            listening.add(f"socket:[{fields[9]}]")
    for entry, _ in session_processes(group):
        try:
            if any(os.readlink(fd) in listening for fd in (entry / "fd").iterdir()):
                return True
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return False


def session_processes(group: int) -> Iterator[tuple[Path, list[str]]]:
    """Each process of session ``group``: its ``/proc`` entry, and the fields of its
    ``stat`` after the command's name (pgrp is ``[2]``, utime and stime ``[11]``, ``[12]``)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == group:
            yield entry, fields


def hypercorn_command(
    app: str, port: int, options: tuple[str, ...] = (), *, python: str = sys.executable
) -> list[str]:
    """hypercorn's CLI serving ``app`` with the trio worker on 127.0.0.1:``port``.

    ``python`` is the interpreter that runs it (another virtualenv's, say).
    Idle connections are kept 75 s unless ``options`` say otherwise, as
    docs/deployment.md runs it: under hypercorn's default of 5 s, which is
    also httpx's, a loaded server closed a connection its client was
    sending a POST on at that instant (test_no_task_ever_runs_twice_at_once
    lost one of its 2,000 messages that way, "Server disconnected").
    """
    keep_alive = () if "--keep-alive" in options else ("--keep-alive", "75")
    return [
        python,
        "-m",
        "hypercorn",
        *keep_alive,
        *options,
        "--worker-class",
        "trio",
        "-b",
        f"127.0.0.1:{port}",
        app,
    ]


def serve_command(port: int) -> list[str]:
    """``a2a-trio serve`` on 127.0.0.1:``port`` (configured by ``A2A_TRIO_CONFIG``)."""
    return [sys.executable, "-m", "a2a_trio.cli", "serve", "--bind", f"127.0.0.1:{port}"]


@dataclass
class ServerProcess:
    """An app module served by hypercorn in a child process of its own session.

    hypercorn serves from a worker process it spawns, so signals go to the
    whole process group: a SIGKILL really is a crash of the server.
    """

    log_path: Path
    port: int
    process: subprocess.Popen[bytes]
    _log: IO[bytes]

    @classmethod
    def start(
        cls,
        database: Path | str,
        log_path: Path,
        *,
        app: str = "tests.scripted_app:app",
        env: dict[str, str] | None = None,
        command: Callable[[int], list[str]] | None = None,
    ) -> ServerProcess:
        """Start the server on ``database`` (a path or a URL); return once its card answers."""
        server = cls.launch(
            log_path,
            app=app,
            env={**os.environ, "A2A_TRIO_DATABASE": str(database), **(env or {})},
            command=command,
        )
        try:
            server.wait_until_ready()
        except BaseException:
            server.stop()
            raise
        return server

    @classmethod
    def launch(
        cls,
        log_path: Path,
        *,
        app: str,
        env: dict[str, str],
        cwd: Path = REPO,
        options: tuple[str, ...] = (),
        command: Callable[[int], list[str]] | None = None,
    ) -> ServerProcess:
        """Start hypercorn serving ``app`` with exactly ``env``; do not wait for it.

        ``options`` are more hypercorn options (``--workers 2``, say);
        ``command`` gives another server's command line for a port instead.
        """
        port = free_port()
        log = log_path.open("ab")
        process = subprocess.Popen(
            command(port) if command is not None else hypercorn_command(app, port, options),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return cls(log_path, port, process, log)

    @classmethod
    def launch_configured_app(
        cls,
        directory: Path,
        log_path: Path,
        *,
        options: tuple[str, ...] = (),
        command: Callable[[int], list[str]] | None = None,
    ) -> ServerProcess:
        """``hypercorn --worker-class trio a2a_trio:app`` in ``directory``, as an operator runs it.

        It serves ``directory/a2a.toml``, or the echo agent on ``directory/a2a.db``;
        ``command`` serves it another way (:func:`serve_command`, say).
        """
        env = {
            name: value
            for name, value in os.environ.items()
            if name not in ("A2A_TRIO_CONFIG", "A2A_TRIO_DATABASE")
        }
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        return cls.launch(
            log_path, app="a2a_trio:app", env=env, cwd=directory, options=options, command=command
        )

    @classmethod
    @contextlib.contextmanager
    def configured_app_served(
        cls,
        directory: Path,
        *,
        options: tuple[str, ...] = (),
        command: Callable[[int], list[str]] | None = None,
    ) -> Iterator[ServerProcess]:
        """:meth:`launch_configured_app`, ready to answer; stopped when the block ends."""
        process = cls.launch_configured_app(
            directory, directory / "server.log", options=options, command=command
        )
        try:
            process.wait_until_ready()
            yield process
        finally:
            process.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def assert_still_serving(self) -> None:
        """The process is alive and its card answers 200 (a fault took nothing down)."""
        assert self.process.poll() is None, self.output()
        async with httpx.AsyncClient(trust_env=False) as client:
            assert (await client.get(self.url + CARD_PATH)).status_code == 200

    def output(self) -> str:
        """What the server printed so far (the child writes the log file directly)."""
        return self.log_path.read_text(errors="replace")

    def wait_until_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(
                    f"the server exited with {self.process.returncode} before answering:\n"
                    + self.output()
                )
            if not listens_on(self.process.pid, self.port):  # not yet, or not this server
                time.sleep(0.05)
                continue
            try:
                response = httpx.get(self.url + CARD_PATH, timeout=1.0, trust_env=False)
            except httpx.TransportError:
                time.sleep(0.05)
                continue
            if response.status_code == 200:
                return
            time.sleep(0.05)
        pytest.fail(f"the server did not answer within {STARTUP_TIMEOUT} s:\n" + self.output())

    def wait_for_exit(self) -> int:
        """The exit status of a server expected to stop by itself (bad settings, say)."""
        try:
            return self.process.wait(STARTUP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server did not stop within {STARTUP_TIMEOUT} s:\n{self.output()}")
        finally:
            self.stop()

    def kill(self) -> int:
        """SIGKILL to every process of the server at once: no chance to clean up.

        Returns the exit status of the process we started.
        """
        os.killpg(self.process.pid, signal.SIGKILL)
        status = self.process.wait(STOP_TIMEOUT)
        self._log.close()
        return status

    def stop(self) -> None:
        """Terminate (graceful shutdown), killing the process if it does not end in time."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT)
        self._log.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # whatever outlived the shutdown

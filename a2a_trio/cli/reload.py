"""``a2a-trio serve --reload``: serve in a child process, restarted when a source changes.

watchfiles (Rust's notify: inotify, FSEvents, ...) watches the working
directory, the application's folder and the configuration's folder for
changes to ``.py`` and ``.toml`` files. At each change the server gets SIGINT
(its graceful shutdown; SIGKILL if it has not stopped within
``STOP_TIMEOUT`` seconds) and, once it let go of its port and database, a
new one starts. A server that cannot start (a syntax error, say) is started
again at the next change.

Most of a server's start is importing a2a-trio's stack (hypercorn, quart, the
stores), which no edit of the application changes. So the next server is
always started ahead, as a *standby* that has imported that stack and waits
on its standard input; a change lets it import the application, fresh, and
serve. An edit of a2a-trio's own files starts the next one cold.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import FrameType

import click

__all__ = ["STOP_TIMEOUT", "serve_reloading", "standby"]

#: Seconds the old server gets to stop before it is killed.
STOP_TIMEOUT = 5.0
#: Milliseconds without a further change before a restart (an editor's save
#: is often several writes).
SETTLE = 50
#: What a standby imports before it is needed: everything ``serve`` imports
#: but the application.
_STACK = (
    "a2a_trio.cli.commands",
    "a2a_trio.cli.running",
    "a2a_trio.cli.apps",
    "a2a_trio.console",
    "a2a_trio.server.serving",
    "hypercorn.config",
    "hypercorn.trio",
)
_PACKAGE = Path(__file__).resolve().parent.parent


def standby() -> None:
    """A server's process, started ahead: import the stack, wait for the word, serve.

    ``sys.argv[1:]`` are the ``a2a-trio`` arguments it serves with. The end of
    its standard input without the word (the reloader is done) ends it.
    """
    import importlib

    for module in _STACK:
        importlib.import_module(module)
    if sys.stdin.readline().strip() != "serve":
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from . import main

    main(sys.argv[1:], prog_name="a2a-trio")


class _Server:
    """One server process: a standby until :meth:`serve`, then the server."""

    def __init__(self, arguments: list[str]) -> None:
        # A Ctrl+C for the reloader is not for a standby: ignored from its first line.
        entry = (
            "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "from a2a_trio.cli.reload import standby; standby()"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", entry, *arguments], stdin=subprocess.PIPE
        )

    def serve(self) -> bool:
        """Let the standby serve; False when it is gone (it could not import the stack)."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(b"serve\n")
            self.process.stdin.close()
        except BrokenPipeError:
            return False
        return self.process.poll() is None

    def stop(self) -> None:
        """SIGINT, then SIGKILL after :data:`STOP_TIMEOUT`; a standby is let go by its input."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            click.echo(
                f"reload: the server did not stop within {STOP_TIMEOUT:g} s; killed", err=True
            )
            self.process.kill()
            self.process.wait()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the reloader as Ctrl+C does: servers first


def serve_reloading(
    application: str | None, bind: str, config_path: Path | None, log_format: str = "text"
) -> None:
    """Serve as ``a2a-trio serve`` would, restarting on every change; returns on Ctrl+C."""
    import watchfiles

    from .apps import source_folder

    arguments = ["serve", "--bind", bind, "--log-format", log_format]
    folders = {Path.cwd()}
    if application is not None:
        arguments.append(application)
        folders.add(source_folder(application))
    if config_path is not None:
        arguments += ["--config", str(config_path)]
        folders.add(config_path.resolve().parent)
    # A folder inside another one is watched with it.
    watched = sorted(f for f in folders if not any(o in f.parents for o in folders))
    click.echo(
        f"reload: watching {', '.join(map(str, watched))} for changes to .py and .toml files",
        err=True,
    )
    signal.signal(signal.SIGTERM, _interrupt)
    server = _started(_Server(arguments), arguments)
    ahead = _Server(arguments)
    try:
        for changes in watchfiles.watch(
            *watched,
            watch_filter=watchfiles.PythonFilter(extra_extensions=(".toml",)),
            step=SETTLE,
            raise_interrupt=False,
        ):
            paths = sorted({path for _, path in changes})
            shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
            click.echo(f"reload: {shown} changed; restarting", err=True)
            server.stop()
            if _touches_a2a_trio(paths):  # the standby holds the old code
                ahead.stop()
                ahead = _Server(arguments)
            server, ahead = _started(ahead, arguments), _Server(arguments)
    finally:
        ahead.stop()
        server.stop()


def _started(server: _Server, arguments: list[str]) -> _Server:
    """``server`` serving; a cold one if it could not."""
    if server.serve():
        return server
    server.stop()
    cold = _Server(arguments)
    cold.serve()
    return cold


def _touches_a2a_trio(paths: Iterable[str]) -> bool:
    return any(_PACKAGE in Path(path).resolve().parents for path in paths)

"""``a2a-trio serve --reload``: serve in a child process, restarted when a source changes.

watchfiles (Rust's notify: inotify, FSEvents, ...) watches the working
directory, the application's folder and the configuration's folder for
changes to ``.py`` and ``.toml`` files, and restarts the server: SIGINT (the
server's graceful shutdown), SIGKILL if it has not stopped within
``STOP_TIMEOUT`` seconds, then a new server once the old one let go of its
database. A server that cannot start (a syntax error, say) is started again
at the next change.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from .apps import source_folder

__all__ = ["STOP_TIMEOUT", "serve_reloading"]

#: Seconds the old server gets to stop before it is killed.
STOP_TIMEOUT = 5
#: Milliseconds without a further change before a restart (an editor's save
#: is often several writes).
SETTLE = 50


def serve_reloading(application: str | None, bind: str, config_path: Path | None) -> None:
    """Serve as ``a2a-trio serve`` would, restarting on every change; returns on Ctrl+C."""
    import watchfiles

    command = [sys.executable, "-m", "a2a_trio.cli", "serve", "--bind", bind]
    folders = {Path.cwd()}
    if application is not None:
        command.append(application)
        folders.add(source_folder(application))
    if config_path is not None:
        command += ["--config", str(config_path)]
        folders.add(config_path.resolve().parent)
    # A folder inside another one is watched with it.
    watched = sorted(f for f in folders if not any(o in f.parents for o in folders))
    click.echo(
        f"reload: watching {', '.join(map(str, watched))} for changes to .py and .toml files",
        err=True,
    )

    def restarting(changes: set[tuple[watchfiles.Change, str]]) -> None:
        paths = sorted({path for _, path in changes})
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        click.echo(f"reload: {shown} changed; restarting", err=True)

    watchfiles.run_process(
        *watched,
        target=shlex.join(command),
        target_type="command",
        callback=restarting,
        watch_filter=watchfiles.PythonFilter(extra_extensions=(".toml",)),
        step=SETTLE,
        sigint_timeout=STOP_TIMEOUT,
    )

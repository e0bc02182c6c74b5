"""What ``a2a-trio serve`` and ``a2a-trio worker`` say while they start and stop.

The first SIGTERM or SIGINT is answered at once with what the shutdown
waits for, then with its progress every couple of seconds; a second one
stops now. A start that cannot succeed is one line on standard error.
"""

from __future__ import annotations

import errno
import logging
import socket

import click
import trio
from hypercorn.config import Config

from ..server import A2AApp

__all__ = ["check_bind", "first_signal", "progress", "refuse", "second_signal"]

log = logging.getLogger("a2a_trio.cli")

#: Seconds between two progress lines of a shutdown.
PROGRESS_EVERY = 2.0


def running(app: A2AApp) -> int:
    return sum(mount.host.executions_running for mount in app.mounts.values())


def _executions(count: int) -> str:
    return f"{count} running execution{'' if count == 1 else 's'}"


def first_signal(app: A2AApp) -> None:
    grace = app.host_settings.shutdown_grace
    log.warning(
        "shutting down: waiting up to %g s for %s (signal again to stop now)",
        grace,
        _executions(running(app)),
    )


def second_signal(app: A2AApp) -> None:
    log.warning("stopping now: %s cancelled (their tasks end FAILED)", _executions(running(app)))


async def progress(app: A2AApp) -> None:
    """A line every PROGRESS_EVERY seconds while executions run, until cancelled."""
    left = app.host_settings.shutdown_grace
    while True:
        await trio.sleep(PROGRESS_EVERY)
        left = max(0.0, left - PROGRESS_EVERY)
        count = running(app)
        if count:
            log.info("still waiting for %s (%g s left)", _executions(count), left)


def refuse(message: str) -> None:
    """One line on standard error, exit status 1."""
    click.echo(f"error: {' '.join(message.split())}", err=True)
    raise SystemExit(1)


def check_bind(bind: str, option: str) -> None:
    """Refuse at once a ``host:port`` another process listens on (before opening anything)."""
    config = Config()
    config.bind = [bind]
    try:
        sockets = config.create_sockets()
    except OSError as error:
        in_use = error.errno == errno.EADDRINUSE
        cause = "address already in use" if in_use else (error.strerror or str(error))
        refuse(
            f"cannot listen on {bind}: {cause} (another server runs there? choose another {option})"
        )
    except (ValueError, socket.gaierror) as error:
        refuse(f"cannot listen on {bind}: {error} (give {option} as HOST:PORT)")
    for sock in [*sockets.secure_sockets, *sockets.insecure_sockets]:
        sock.close()

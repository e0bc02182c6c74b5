"""A start that cannot succeed (database unreachable or served elsewhere): one line, exit non-zero.

Under ``hypercorn --worker-class trio a2a_trio:app`` a failed start of the
app used to print quart's and hypercorn's tracebacks (135 lines for an
unreachable database) and end with exit status 0, which systemd and
Kubernetes read as a clean stop. The status is hypercorn's (0.17 and 0.18,
the newest): its supervisor (``hypercorn.run.run``) reads a failed worker's
exit status, then reads it again from a list the worker was already
removed from, and returns 0 (``_join_exited`` twice). Nothing of the app
runs in the supervisor, which imports no application, so it cannot be
mended from here; the worker makes the supervisor end itself instead:
SIGTERM first (its handler tells any other worker to shut down), then, once
that has been handled, SIGUSR1, whose default action ends it with a
non-zero status. The supervisor exits "killed by SIGUSR1" (138 in a shell).
The worker ignores SIGTERM meanwhile: once another worker has stopped, the
supervisor terminate()s the rest, and would otherwise end this one before
its SIGUSR1, then return 0 (1 start in 3 or 6 did).

:func:`refuse_start` does that when the process is a worker of hypercorn's
supervisor, after writing the cause (and its fix) on one line; elsewhere
(``a2a-trio serve``, a program serving the app itself) it only says whether
the error is such a refusal, and the caller raises it as before.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import time

from ..store import DatabaseInUseError

__all__ = ["is_refusal", "one_line", "refuse_start"]

log = logging.getLogger("a2a_trio.server")

#: How long the supervisor gets to handle SIGTERM before SIGUSR1 ends it: long
#: enough for its handler (it waits in select(), woken at once), shorter than
#: another worker's graceful stop (it looks at the shutdown event every 0.1 s),
#: after which the supervisor would exit 0 before SIGUSR1 reached it.
_HANDLING_TIME = 0.05


def is_refusal(error: BaseException) -> bool:
    """Whether ``error`` is one no retry of the start would get past (see the module)."""
    if isinstance(error, DatabaseInUseError):
        return True
    errors = sys.modules.get("a2a_trio.store.postgres.errors")  # loaded if PostgreSQL was tried
    return errors is not None and isinstance(error, errors.DatabaseUnavailable)


def one_line(error: BaseException) -> str:
    """The error's message on one line (libpq's span two, with a tab)."""
    return " ".join(str(error).split())


def _hypercorn_supervisor() -> int | None:
    """The pid of hypercorn's supervisor when this process is one of its workers."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None or "hypercorn" not in (sys.argv[0] if sys.argv else ""):
        return None
    return parent.pid


def refuse_start(error: BaseException) -> bool:
    """End the process (and hypercorn's supervisor) with one line if ``error`` is a refusal.

    Returns False when it is not one, or when the process is not a worker of
    hypercorn's supervisor: the caller raises ``error`` then.
    """
    if not is_refusal(error):
        return False
    supervisor = _hypercorn_supervisor()
    if supervisor is None:
        return False
    sys.stderr.write(f"a2a-trio: cannot start: {one_line(error)}\n")
    sys.stderr.flush()
    # The supervisor's shutdown ends with terminate() of every worker: this
    # one must live to send SIGUSR1, or the supervisor returns 0. (Off the
    # main thread signal() raises ValueError, and the race stays.)
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.kill(supervisor, signal.SIGTERM)
        time.sleep(_HANDLING_TIME)  # the supervisor's handler runs between its bytecodes
        os.kill(supervisor, signal.SIGUSR1)
    except OSError:  # gone already
        pass
    logging.shutdown()
    os._exit(1)

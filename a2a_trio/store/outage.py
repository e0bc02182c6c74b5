"""A database out of reach: one log line when it goes, one when it is back, not one per retry.

A server whose database goes away (a restart, a failover, a network cut)
keeps trying from many places at once: requests, the recorder, the push
worker, the cluster's heartbeat and wake-ups, the queue workers. Each of
those raises a :class:`StoreUnreachable` and tries again; the store's
:class:`ReachabilityLog` logs the change of state once, and
:class:`RetriesFilter` drops what the places that retry say of each failed
attempt (a line, or a traceback, carrying the error): on the handler that
``a2a-trio serve`` configures, and on the loggers of those places
(:func:`quiet_retries`, which every :class:`~a2a_trio.A2AApp` calls), so that
an app served by bare hypercorn, or embedded, logs an outage as quietly.
"""

from __future__ import annotations

import logging
import time

__all__ = [
    "RETRYING_LOGGERS",
    "ReachabilityLog",
    "RetriesFilter",
    "StoreUnreachable",
    "quiet_retries",
    "unreachable",
]

log = logging.getLogger("a2a_trio.store")


class StoreUnreachable(Exception):
    """The database could not be reached (no connection, or it broke): worth a retry."""


def unreachable(error: BaseException) -> bool:
    """Whether ``error`` is a :class:`StoreUnreachable`, or a group of nothing else."""
    if isinstance(error, BaseExceptionGroup):  # raised in a nursery
        return all(unreachable(inner) for inner in error.exceptions)
    return isinstance(error, StoreUnreachable)


class ReachabilityLog:
    """Logs the database's reachability when it changes (see the module docstring)."""

    def __init__(self, display: str) -> None:
        self._display = display
        self._down_since: float | None = None

    @property
    def reachable(self) -> bool:
        return self._down_since is None

    def failed(self, error: BaseException) -> None:
        """A connection could not be opened, or broke."""
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.error(
                "database %s unreachable, retrying (one line when it is back): %s",
                self._display,
                " ".join(str(error).split()),
            )

    def succeeded(self) -> None:
        """A round trip went through."""
        if self._down_since is not None:
            down = time.monotonic() - self._down_since
            self._down_since = None
            log.warning("database %s reachable again after %.1f s", self._display, down)


class RetriesFilter(logging.Filter):
    """Drops records that carry a :class:`StoreUnreachable` (as exception or argument).

    Each is one attempt of something that will try again; the
    :class:`ReachabilityLog` has said once that the database is away.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and unreachable(record.exc_info[1]):
            return False
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(arg, StoreUnreachable) for arg in args)


#: The loggers of the places that retry while the database is away. A filter of a
#: logger sees only the records made by that logger, not by its children: each
#: is named (every logger of a2a-trio is one of these names).
RETRYING_LOGGERS = (
    "a2a_trio",
    "a2a_trio.auth",
    "a2a_trio.cli",
    "a2a_trio.cluster",
    "a2a_trio.console",
    "a2a_trio.push",
    "a2a_trio.retention",
    "a2a_trio.runtime",
    "a2a_trio.server",
    "a2a_trio.store",
    "a2a_trio.store.postgres.database",
    "a2a_trio.telemetry",
    "a2a_trio.worker",
)


def quiet_retries() -> None:
    """Put a :class:`RetriesFilter` on each of :data:`RETRYING_LOGGERS` (once).

    Under ``a2a-trio serve`` the handler's filter does the same; a process
    whose logging is hypercorn's, or its own, would otherwise log a traceback
    for every task and every retry while the database is away.
    """
    for name in RETRYING_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(each, RetriesFilter) for each in logger.filters):
            logger.addFilter(RetriesFilter())

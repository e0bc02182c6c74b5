"""How ``a2a-trio serve`` and ``a2a-trio worker`` log: time, level and logger on every line.

:func:`configure_logging` gives the root logger one handler on standard
error, in text for people or in JSON (one object a line) for log shippers;
a2a-trio's and hypercorn's loggers at INFO, everything else at WARNING;
the retries of a database out of reach are left out (see
:mod:`a2a_trio.store.outage`).
:func:`hypercorn_loggers` hands hypercorn the same loggers, so its access
and error lines read like the rest.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import IO, Any, Literal

from .store.outage import RetriesFilter

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging", "hypercorn_loggers"]

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")


def _utc(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + (
        f".{int(record.msecs):03d}Z"
    )


class TextFormatter(logging.Formatter):
    """``2026-11-26T19:45:50.123Z INFO a2a_trio.worker: message`` (UTC)."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_utc(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message`` (and ``exception``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _utc(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(log_format: LogFormat = "text", stream: IO[str] | None = None) -> None:
    """Log every record of this process through one handler in ``log_format``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    # A database away: one line when it goes and one when it is back, not one per retry.
    handler.addFilter(RetriesFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    for name in ("a2a_trio", "hypercorn"):
        logging.getLogger(name).setLevel(logging.INFO)


def hypercorn_loggers() -> tuple[logging.Logger, logging.Logger]:
    """hypercorn's (access, error) loggers, propagating to the handler configured here."""
    access = logging.getLogger("hypercorn.access")
    error = logging.getLogger("hypercorn.error")
    for logger in (access, error):
        logger.handlers[:] = []
        logger.propagate = True
    return access, error

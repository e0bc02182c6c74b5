"""How ``a2a-trio serve`` and ``a2a-trio worker`` log: time, level and logger on every line.

:func:`configure_logging` gives the root logger one handler on standard
error, in text for people or in JSON (one object a line) for log shippers;
a2a-trio's and hypercorn's loggers at INFO, everything else at WARNING;
the retries of a database out of reach are left out (see
:mod:`a2a_trio.store.outage`).
:func:`hypercorn_loggers` hands hypercorn the same loggers, so its access
and error lines read like the rest.

Both formats escape what a reader of the line must not take literally:
control characters (a newline that would forge a second line, a terminal's
escape sequences), bidi overrides and other invisible format characters,
lone surrogates. A storage path, a task id or a request path from a client
then reads as it is (``ev\\u202eil.db``), not with its letters turned around.
Text escapes them as Python does (``\\x1b``, ``\\u202e``); JSON with its own
``\\uXXXX``, so a log shipper reads back the exact string.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import IO, Any, Literal

from .store.outage import RetriesFilter

__all__ = ["LOG_FORMATS", "JsonFormatter", "configure_logging", "hypercorn_loggers"]

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")


def _utc(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + (
        f".{int(record.msecs):03d}Z"
    )


_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(char: str) -> str:
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _json_escaped(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON spells a character beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _readable(text: str, *, keep: str = "", escape: Callable[[str], str] = _escaped) -> str:
    """``text`` with every character :meth:`str.isprintable` refuses escaped, but ``keep``.

    That is control (Cc) and format (Cf: bidi overrides, zero widths)
    characters, surrogates, line and paragraph separators, spaces other than
    U+0020, unassigned and private code points.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else escape(c) for c in text)


class TextFormatter(logging.Formatter):
    """``2026-11-26T19:45:50.123Z INFO a2a_trio.worker: message`` (UTC), escaped (see above)."""

    def format(self, record: logging.LogRecord) -> str:
        line = _readable(f"{_utc(record)} {record.levelname} {record.name}: {record.getMessage()}")
        if record.exc_info:
            # A traceback keeps its lines; what its exception said is escaped all the same.
            line += "\n" + _readable(self.formatException(record.exc_info), keep="\n")
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message`` (and ``exception``).

    Escaped as the text is (see above), in JSON's ``\\uXXXX``.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _utc(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # json.dumps escapes C0 controls only; the rest is escaped here, and
        # the dumped text has such characters nowhere but inside its strings.
        return _readable(json.dumps(entry, ensure_ascii=False), escape=_json_escaped)


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

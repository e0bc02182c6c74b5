"""Log lines show an operator's or a client's odd string as it is, never raw.

A storage path from the configuration and a request path from a client may
hold a bidi override (U+202E turns the rest of a line around on screen), a
terminal escape sequence, a newline that would forge a line of its own, a
lone surrogate: ``a2a-trio serve`` writes them escaped, in text and in JSON.
"""

from __future__ import annotations

import io
import json
import logging
import signal
from pathlib import Path

import httpx
import pytest

from a2a_trio.logs import JsonFormatter, TextFormatter

from .test_cli import Served, serving

__all__ = ["serving"]  # the fixture, used by name

#: A file name an operator pasted from somewhere: a bidi override, an escape sequence, a bell.
ODD_NAME = "ev\u202eil\x1b[31mred\x07.db"
#: What a client asks for: the same characters, and a line of its own after a newline.
ODD_PATH = "/%E2%80%AEgnp.exe%1B%5B2J%0A2026-11-27T05:00:00.000Z%20INFO%20forged"
#: What must not reach a log line unescaped.
RAW = ("\u202e", "\x1b", "\x07", "\nforged", "\n2026-11-27T05:00:00.000Z INFO forged")

CONFIG = """\
[[agents]]
name = "echo"
executor = "a2a_trio.echo:EchoExecutor"
card = "a2a_trio.echo:echo_card"
storage = {storage}
"""


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_storage_path_and_a_request_path_are_logged_escaped(
    tmp_path: Path, serving: list[Served], log_format: str
) -> None:
    storage = tmp_path / ODD_NAME
    (tmp_path / "a2a.toml").write_text(CONFIG.format(storage=json.dumps(str(storage))))
    server = Served.start(tmp_path, "--config", "a2a.toml", "--log-format", log_format)
    serving.append(server)
    assert httpx.get(server.url + ODD_PATH).status_code == 404
    _, _, err = server.stop(signal.SIGTERM)
    for raw in RAW:
        assert raw not in err, err
    if log_format == "text":
        assert f"key at {tmp_path}/ev\\u202eil\\x1b[31mred\\x07.db.key;" in err, err
        assert "GET /\\u202egnp.exe\\x1b[2J\\n2026-11-27T05:00:00.000Z INFO forged 1.1" in err, err
    else:
        messages = [json.loads(line)["message"] for line in err.splitlines()]
        assert any(f"key at {storage}.key;" in message for message in messages), err
        assert any("GET /\u202egnp.exe\x1b[2J\n2026-11-27" in message for message in messages)


def logged(formatter: logging.Formatter, *args: object, failure: Exception | None = None) -> str:
    """What a handler with ``formatter`` writes for ``warning(*args)``, raised in ``failure``."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    # A logger of its own, not under a2a_trio: what an earlier test of this
    # process configured (levels, the root's handlers) changes nothing here,
    # and pytest's capture never holds the lone surrogate (xdist could not
    # send a report carrying it).
    logger = logging.getLogger("test_log_escapes")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.disabled = False
    logger.addHandler(handler)
    try:
        if failure is None:
            logger.warning(*args)
        else:
            try:
                raise failure
            except Exception:
                logger.exception(*args)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_json_line_holds_the_exact_string_even_a_lone_surrogate() -> None:
    said = "task \ud800 \u2028 \x85 \U000e0001 \x00 done"
    line = logged(JsonFormatter(), "%s", said)
    assert line.isascii() and line.count("\n") == 1, line
    assert json.loads(line)["message"] == said


def test_a_traceback_keeps_its_lines_and_escapes_what_its_exception_said() -> None:
    text = logged(TextFormatter(), "store failed", failure=OSError(f"cannot open {ODD_NAME}"))
    assert "Traceback (most recent call last):\n" in text
    assert "OSError: cannot open ev\\u202eil\\x1b[31mred\\x07.db\n" in text, text

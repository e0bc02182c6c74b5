"""The load-generator cases: wrk with ``bench/lua/a2a.lua``, one thread, pinned to a core.

Each :class:`WrkCase` names a mode of the Lua script and a connection count.
:func:`run_wrk` runs wrk once and returns the ``BENCH_RESULT`` line the
script's ``done()`` prints, as a dict. Throughput counts verified responses
only (``good_rps``): a response that is not 200 with the expected completed
task (or a complete four-event stream) is ``bad``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Literal

from .common import LUA_DIR

__all__ = ["WRK_CASES", "WrkCase", "WrkError", "run_wrk", "wrk_version"]

LUA_SCRIPT = LUA_DIR / "a2a.lua"
RESULT_PREFIX = "BENCH_RESULT "
#: wrk's per-request timeout; a slower answer counts as a timeout error.
REQUEST_TIMEOUT_S = 10

Mode = Literal["card", "jsonrpc", "rest", "stream"]


class WrkError(RuntimeError):
    """wrk failed or printed no result line."""


@dataclass(frozen=True, slots=True)
class WrkCase:
    """One wrk workload."""

    name: str
    mode: Mode
    connections: int
    title: str
    unit: str = "req/s"


WRK_CASES: tuple[WrkCase, ...] = (
    WrkCase("card-c16", "card", 16, "GET agent card, 16 connections"),
    WrkCase("send-jsonrpc-c1", "jsonrpc", 1, "SendMessage (JSON-RPC), 1 connection"),
    WrkCase("send-jsonrpc-c16", "jsonrpc", 16, "SendMessage (JSON-RPC), 16 connections"),
    WrkCase("send-jsonrpc-c64", "jsonrpc", 64, "SendMessage (JSON-RPC), 64 connections"),
    WrkCase("send-rest-c1", "rest", 1, "SendMessage (HTTP+JSON), 1 connection"),
    WrkCase("send-rest-c16", "rest", 16, "SendMessage (HTTP+JSON), 16 connections"),
    WrkCase("send-rest-c64", "rest", 64, "SendMessage (HTTP+JSON), 64 connections"),
    WrkCase(
        "stream-jsonrpc-c16",
        "stream",
        16,
        "SendStreamingMessage (JSON-RPC SSE, 4 events), 16 connections",
        unit="streams/s",
    ),
)


def wrk_version() -> str:
    """wrk's banner line (``wrk 4.1.0 [epoll] ...``), or why it is unavailable."""
    path = shutil.which("wrk")
    if path is None:
        return "not installed"
    completed = subprocess.run([path, "-v"], capture_output=True, text=True, check=False)
    lines = (completed.stdout + completed.stderr).strip().splitlines()
    return lines[0].split(" Copyright")[0] if lines else "unknown"


def run_wrk(
    case: WrkCase, base_url: str, duration_s: int, nonce: str, core: int | None
) -> dict[str, Any]:
    """Run ``case`` against ``base_url`` for ``duration_s`` seconds; return the parsed result."""
    command = [
        "wrk",
        "-t1",
        f"-c{case.connections}",
        f"-d{duration_s}s",
        "--timeout",
        f"{REQUEST_TIMEOUT_S}s",
        "-s",
        str(LUA_SCRIPT),
        base_url,
        "--",
        case.mode,
        nonce,
    ]
    if core is not None:
        command = ["taskset", "-c", str(core), *command]
    try:
        completed = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=duration_s + REQUEST_TIMEOUT_S + 30,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise WrkError(f"wrk did not finish: {error}") from None
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result: dict[str, Any] = json.loads(line.removeprefix(RESULT_PREFIX))
            return result
    raise WrkError(
        f"wrk exited with {completed.returncode} and no result line: "
        f"{(completed.stderr or completed.stdout).strip()[-500:]}"
    )

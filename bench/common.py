"""What the harness, both servers and the Lua scripts agree on.

The bench agent's card content, the routes every server serves, the request
headers, the texts that select the executor's behaviour, and small process
helpers (file-descriptor limit, resident memory). Nothing here imports
a2a-trio or the a2a-sdk, so each server script pulls in only its own stack.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

#: The repository root: servers are started with it as their working directory.
REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
LUA_DIR = BENCH_DIR / "lua"
RESULTS_DIR = BENCH_DIR / "results"

# --- the card (same content on every server) ------------------------------------------

CARD_NAME = "Bench Agent"
CARD_DESCRIPTION = "Echoes every message as a completed task; 'hold ...' keeps a task working."
CARD_VERSION = "1.0.0"
SKILL_ID = "echo"
SKILL_NAME = "Echo"
SKILL_DESCRIPTION = "Returns the text it was sent as an artifact."
SKILL_TAGS = ("echo", "bench")
MEDIA_TYPES = ("text/plain",)

# --- routes and headers -----------------------------------------------------------------

CARD_PATH = "/.well-known/agent-card.json"
JSONRPC_PATH = "/jsonrpc"
REST_PREFIX = "/rest"
REST_SEND_PATH = f"{REST_PREFIX}/message:send"
REST_STREAM_PATH = f"{REST_PREFIX}/message:stream"
PROTOCOL_VERSION = "1.0"
VERSION_HEADER = "A2A-Version"

# --- executor behaviour -----------------------------------------------------------------

#: A message whose text starts with this keeps its task WORKING until cancelled.
HOLD_PREFIX = "hold"
#: A message whose text starts with this pauses its task INPUT_REQUIRED with a
#: question (:data:`ASK_QUESTION`), a new task and each follow-up alike: a
#: conversation of the ``conversation`` case adds two messages a turn.
ASK_PREFIX = "ask"
ASK_QUESTION = "What else?"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
#: ``tick N INTERVAL_MS DELAY_MS`` (the cluster bench's servers): N timestamped status updates.
TICK_PREFIX = "tick"
#: The text every load request sends; the echo artifact repeats it.
ECHO_TEXT = "hello"

COMPLETED = "TASK_STATE_COMPLETED"
WORKING = "TASK_STATE_WORKING"
SUBMITTED = "TASK_STATE_SUBMITTED"


def tick_text(number: int, stamp: float) -> str:
    """A tick's status message: its number and ``time.time()`` when it was enqueued."""
    return f"{TICK_PREFIX} {number} {stamp:.6f}"


def parse_tick(text: str) -> tuple[int, float] | None:
    """(number, stamp) of a :func:`tick_text`, or None for any other text."""
    words = text.split()
    if len(words) != 3 or words[0] != TICK_PREFIX:
        return None
    return int(words[1]), float(words[2])


def raise_nofile_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; return the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (``/proc/PID/stat``)."""
    return sum(cpu_times(pid))


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU time of process ``pid`` so far, apart (``/proc/PID/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB (``VmRSS`` of ``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


#: The console token of the a2a-trio bench server (its live feed, for the ``feed`` case).
FEED_TOKEN = "bench-feed-token"

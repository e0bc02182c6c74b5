"""The ``a2a-trio`` command line.

Exit codes: 0 success; 1 the command ran and found a failure (a MUST
requirement failed, a card is invalid, a task ended FAILED or REJECTED); 2 the
command could not run (bad arguments, a configuration or an agent's module
that cannot be loaded, a missing directory).

Each command lives in the module the table below names and is imported only
when it runs (or its ``--help`` is asked for), so that ``--version``, ``--help``
and the client verbs do not wait for the server's imports.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import NamedTuple

import click

from .. import __version__

__all__ = ["main"]


class _Entry(NamedTuple):
    module: str
    attribute: str
    #: What ``a2a-trio --help`` lists (the command's docstring's first sentence;
    #: tests/test_cli_speed.py keeps the two the same).
    summary: str


COMMANDS = {
    "cancel": _Entry("remote", "cancel", "Cancel task TASK_ID."),
    "card": _Entry("commands", "card", "Print an agent's card exactly as served, and validate it."),
    "deliveries": _Entry(
        "commands",
        "deliveries",
        "List webhook deliveries (all, or of TASK); `deliveries retry ID` re-queues one.",
    ),
    "discover": _Entry(
        "remote",
        "discover",
        "Fetch the card of the agent at URL, print it and validate it (exit 1 if invalid).",
    ),
    "get": _Entry("remote", "get", "Show task TASK_ID."),
    "list": _Entry("remote", "list_tasks", "List your tasks at URL, most recent first."),
    "make-executor": _Entry(
        "commands",
        "make_executor",
        "Write a skeleton NAMEExecutor (an echo agent that runs as is).",
    ),
    "prune": _Entry(
        "commands",
        "prune",
        "Delete finished tasks older than DAYS, with their events, configs and deliveries.",
    ),
    "send": _Entry(
        "remote",
        "send",
        "Send TEXT to the agent at URL; prints the answer (or its text as it comes with --stream).",
    ),
    "serve": _Entry(
        "running",
        "serve",
        "Serve your app (MODULE:APP) or the configured agents, everything on (Ctrl+C stops).",
    ),
    "subscribe": _Entry(
        "remote", "subscribe", "Follow task TASK_ID until it ends, printing each event."
    ),
    "tck": _Entry(
        "tck_command",
        "tck",
        "Run the official A2A conformance kit against the conformance agent.",
    ),
    "watch": _Entry(
        "watch", "watch", "Print a server's live feed, one line per event, as it happens."
    ),
    "worker": _Entry(
        "running",
        "worker",
        "Run the queued agents' executions (no HTTP) until SIGTERM or Ctrl+C.",
    ),
}


class _LazyGroup(click.Group):
    """A group whose commands are imported when one is chosen, not before."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(f"{__name__}.{entry.module}")
        command: click.Command = getattr(module, entry.attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The summaries of the table: listing the commands imports none of them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name].summary) for name in sorted(COMMANDS)])


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
# The version from the package, not from its installed metadata (reading that
# costs a tenth of a second).
@click.version_option(__version__, prog_name="a2a-trio")
def main() -> None:
    """Host and talk to A2A 1.0 agents."""
    # Like `python -m`, let configuration import path names the application's own
    # modules (./a2a_agents/ made by make-executor, say) from the working directory.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())

"""``a2a-trio watch``: a subprocess tailing a live server's feed, line by line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from a2a_trio.cli.watch import feed_url, format_event
from a2a_trio.console import Console, ConsoleSettings

from .conftest import LiveServer, user_message
from .console_helpers import TOKEN, console_server

CLI = [sys.executable, "-m", "a2a_trio.cli"]
TIMEOUT = 30.0


class Lines:
    """The lines a process writes to stdout, read as they come."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._pending = b""

    async def next(self) -> str:
        while b"\n" not in self._pending:
            chunk = await self._stream.receive_some()
            assert chunk, "watch ended"
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode()

    async def until(self, text: str) -> list[str]:
        lines = [await self.next()]
        while text not in lines[-1]:
            lines.append(await self.next())
        return lines


@asynccontextmanager
async def watching(server: LiveServer, console: Console, *args: str) -> AsyncIterator[Lines]:
    env = {k: v for k, v in os.environ.items() if k != "A2A_TRIO_CONSOLE_TOKEN"}
    env["A2A_TRIO_CONSOLE_TOKEN"] = TOKEN
    process = await trio.lowlevel.open_process(
        [*CLI, "watch", server.url, "--no-color", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        while not console.hub.subscribers:  # noqa: ASYNC110 (another process connects)
            await trio.sleep(0.02)
        yield Lines(process.stdout)
    finally:
        with trio.CancelScope(shield=True):
            process.kill()
            await process.wait()
            await process.stdout.aclose()


async def test_watch_prints_a_tasks_events_as_they_happen(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, console, executor):
        with trio.fail_after(TIMEOUT):
            async with watching(server, console, "--kind", "task,execution") as lines:
                reply = await server.jsonrpc(
                    "SendMessage",
                    {"message": user_message("hold"), "configuration": {"returnImmediately": True}},
                )
                task_id = reply["result"]["task"]["id"]
                # While the agent is held, WORKING is printed already.
                before = await lines.until("WORKING")
                assert not executor.gate.release.is_set()
                executor.gate.release.set()
                after = await lines.until("execution.ended")
    printed = before + after
    kinds = [line.split()[2] for line in printed]
    assert kinds == [
        "execution.started",
        "task.created",
        "task.status",
        "task.artifact",
        "task.status",
        "execution.ended",
    ]
    assert all(f"scripted/{task_id}" in line for line in printed)
    assert "SUBMITTED" in printed[1] and "'hold'" in printed[1]
    assert printed[2].split()[4] == "WORKING"
    assert printed[4].split()[4] == "COMPLETED"


async def test_watch_reconnects_and_resumes_without_losing_or_repeating(tmp_path: Path) -> None:
    # A buffer of one event: every round of several drops the client, which resumes.
    settings = ConsoleSettings(token=TOKEN, buffer=1)
    async with console_server(tmp_path, settings=settings) as (server, console, _):
        with trio.fail_after(TIMEOUT):
            async with watching(server, console) as lines:
                for number in range(3):
                    await server.jsonrpc("SendMessage", {"message": user_message(f"echo {number}")})
                last = console.hub.seq
                printed = await lines.until(f" {last} ")
            assert console.hub.dropped >= 1
    seqs = [int(line.split()[1]) for line in printed]
    assert seqs == list(range(1, last + 1))


async def test_watch_stops_on_a_refused_token(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        result = await trio.run_process(
            [*CLI, "watch", server.url, "--token", "wrong"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 1
    assert b"the console token was refused (HTTP 401)" in result.stderr


def test_the_feed_url_comes_from_the_server_url() -> None:
    assert feed_url("http://h:1") == "ws://h:1/_a2a/feed"
    assert feed_url("https://h/base/", "/ops", agent="a", after=3) == (
        "wss://h/base/ops/feed?agent=a&after=3"
    )
    assert feed_url("ws://h:1/_a2a/feed", task="t") == "ws://h:1/_a2a/feed?task=t"


def test_a_state_is_coloured_only_when_asked() -> None:
    event = {"kind": "task.status", "seq": 7, "agent": "a", "task": "t",
             "state": "TASK_STATE_FAILED", "time": "2026-01-01T10:00:00.123Z"}  # fmt: skip
    plain = format_event(event, colour=False)
    assert plain == "10:00:00.123      7 task.status         a/t FAILED"
    assert "\x1b[" in format_event(event, colour=True)

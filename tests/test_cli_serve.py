"""``a2a-trio serve MODULE:APP``: your own app, served with everything on; ``--reload``.

The app of examples/echo_agent.py (an A2AApp built in code, no a2a.toml) is
served as the README says, and shows each request in the access log, in the
console's feed and in ``/metrics``; ``--reload`` picks up an edited file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

from .servers import REPO, STARTUP_TIMEOUT, free_port
from .test_cli import CLI, Served, a2a, clean_env, message_task, post_message, serving

__all__ = ["serving"]  # the fixture, used by name

ECHO_EXAMPLE = REPO / "examples" / "echo_agent.py"
CONSOLE_URL = re.compile(r"console \(development mode[^)]*\): (\S+)/_a2a/console#token=(\S+)")


def test_serve_module_app_shows_requests_in_the_access_log_console_and_metrics(
    tmp_path: Path, serving: list[Served]
) -> None:
    server = Served.start(tmp_path, f"{ECHO_EXAMPLE}:app")
    serving.append(server)
    answered = a2a("send", server.url + "/echo", "hello", "--stream", cwd=tmp_path)
    assert (answered.status, answered.out) == (0, "HELLO\n"), answered.err
    metrics = httpx.get(server.url + "/metrics").text
    assert re.search(
        r'a2a_requests_total\{agent="echo",binding="jsonrpc",'
        r'operation="SendStreamingMessage",outcome="ok"\} 1\.0',
        metrics,
    ), metrics
    assert httpx.get(server.url + "/_a2a/health/ready").status_code == 200
    _, _, err = server.stop(signal.SIGTERM)  # the log, access lines too, is on standard error
    assert f" INFO a2a_trio.cli: serving echo on {server.url}\n" in err, err
    assert re.search(r'INFO hypercorn.access: .*"POST /echo/jsonrpc 1\.1" 200 ', err), err
    console = CONSOLE_URL.search(err)
    assert console is not None, err
    assert console.group(1) == server.url  # the whole address, not a placeholder
    # The example's database is where it says, in the working directory.
    assert (tmp_path / "echo_agent.db").exists()


def test_the_console_of_a_module_app_lists_its_tasks(tmp_path: Path, serving: list[Served]) -> None:
    server = Served.start(tmp_path, f"{ECHO_EXAMPLE}:app")
    serving.append(server)
    # Logged at start, before the card answered: the console's address and token.
    logged = printed(server.err)
    console = CONSOLE_URL.search(logged)
    assert console is not None, logged
    task_id = post_message(server.url + "/echo", "find me")
    listed = httpx.get(
        server.url + "/_a2a/api/tasks", headers={"Authorization": f"Bearer {console.group(2)}"}
    )
    assert [task["id"] for task in listed.json()["tasks"]] == [task_id]


def test_serve_any_asgi_app_as_hypercorn_would(tmp_path: Path, serving: list[Served]) -> None:
    (tmp_path / "plain.py").write_text(
        "async def app(scope, receive, send):\n"
        "    if scope['type'] == 'lifespan':\n"
        "        while (await receive())['type'] != 'lifespan.shutdown':\n"
        "            await send({'type': 'lifespan.startup.complete'})\n"
        "        await send({'type': 'lifespan.shutdown.complete'})\n"
        "        return\n"
        "    await send({'type': 'http.response.start', 'status': 200, 'headers': []})\n"
        "    await send({'type': 'http.response.body', 'body': b'plain'})\n"
    )
    port = free_port()
    process = subprocess.Popen(
        [*CLI, "serve", "plain:app", "--bind", f"127.0.0.1:{port}"],
        cwd=tmp_path,
        env=clean_env(PYTHONUNBUFFERED="1"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        body = _until_answered(f"http://127.0.0.1:{port}/", process)
        assert body == "plain"
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=STARTUP_TIMEOUT)
    assert process.returncode == 0
    assert f" INFO a2a_trio.cli: serving plain:app on http://127.0.0.1:{port}\n" in err, err
    assert re.search(r'INFO hypercorn.access: .*"GET / 1\.1" 200 ', err), err


def _until_answered(url: str, process: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        try:
            return httpx.get(url, timeout=1.0).text
        except httpx.TransportError:
            time.sleep(0.05)
    pytest.fail(f"{url} did not answer in time")


AGENT_SOURCE = """
from a2a_trio import A2AApp, AgentExecutor, EventQueue, RequestContext, TaskUpdater
from a2a_trio.echo import echo_card


class Versioned(AgentExecutor):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.submit()
        await updater.start_work()
        await updater.add_artifact("VERSION")
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        pass


app = A2AApp(database="agent.db")
app.mount("", card=echo_card(), executor=Versioned())
"""


@pytest.fixture
def reloading(tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    source = tmp_path / "agent.py"
    source.write_text(AGENT_SOURCE.replace("VERSION", "first"))
    server = Served.start(tmp_path, "agent:app", "--reload")
    try:
        yield server, source
    finally:
        server.stop(signal.SIGTERM)


def _answer(url: str) -> str | None:
    """The text the agent at ``url`` answers now; None when nothing answers."""
    try:
        task = message_task(url, "which version?", timeout=2.0)
        text: str = task["artifacts"][0]["parts"][0]["text"]
    except (httpx.TransportError, KeyError, ValueError):
        return None
    return text


def test_reload_serves_an_edited_module(reloading: tuple[Served, Path]) -> None:
    server, source = reloading
    assert _answer(server.url) == "first"
    source.write_text(AGENT_SOURCE.replace("VERSION", "second"))
    edited = time.monotonic()
    deadline = edited + STARTUP_TIMEOUT
    while (answer := _answer(server.url)) != "second":
        assert time.monotonic() < deadline, f"still {answer!r} after the edit"
        time.sleep(0.02)
    # How long the edit took to be served (docs/cli.md quotes it; bench/ is for targets).
    print(f"the edit was served {time.monotonic() - edited:.2f} s after it was saved")
    _, _, err = server.stop(signal.SIGTERM)
    assert re.search(r"reload: \S*agent\.py changed; restarting", err), err


def test_reload_outlives_a_syntax_error_and_serves_the_fix(
    reloading: tuple[Served, Path],
) -> None:
    server, source = reloading
    source.write_text("def broken(:\n")
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while "importing agent failed: SyntaxError: " not in printed(server.err):
        assert time.monotonic() < deadline, printed(server.err)
        time.sleep(0.02)
    assert _answer(server.url) is None  # nothing serves the broken module
    source.write_text(AGENT_SOURCE.replace("VERSION", "fixed"))
    while _answer(server.url) != "fixed":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def printed(output: IO[str]) -> str:
    """What a running server wrote to ``output`` so far (pread: the server writes
    through the same file offset, which a seek would move)."""
    return os.pread(output.fileno(), 1 << 20, 0).decode(errors="replace")


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("x = (\n", r"importing broken failed: SyntaxError: .* \(\S*broken\.py, line 1\)"),
        (
            "undefined_name\n",
            r"NameError: name 'undefined_name' is not defined \(\S*broken\.py, line 1",
        ),
        ("app = 1\n", None),
    ],
)
def test_an_application_that_cannot_be_loaded_exits_2_saying_why(
    tmp_path: Path, source: str, said: str | None
) -> None:
    (tmp_path / "broken.py").write_text(source)
    result = a2a("serve", "broken:nothing", "--bind", f"127.0.0.1:{free_port()}", cwd=tmp_path)
    assert result.status == 2
    assert "Traceback" not in result.err and "Usage:" not in result.err
    assert result.err.startswith("error: broken:nothing: ")
    if said is None:
        assert "broken has no 'nothing' (it has: app)" in result.err
    else:
        assert re.search(said, result.err), result.err


def test_a_module_that_is_not_there_says_where_it_was_looked_for(tmp_path: Path) -> None:
    result = a2a("serve", "nowhere:app", cwd=tmp_path)
    assert result.status == 2
    assert f"no module 'nowhere' here ({tmp_path})" in result.err


def test_serve_takes_an_app_or_a_configuration_not_both(tmp_path: Path) -> None:
    result = a2a("serve", "agent:app", "--config", "a2a.toml", cwd=tmp_path)
    assert result.status == 2
    assert "give MODULE:APP or --config, not both" in result.err


def test_serve_help_names_the_application_argument(tmp_path: Path) -> None:
    result = a2a("serve", "--help", cwd=tmp_path)
    assert result.lines[0] == "Usage: a2a-trio serve [OPTIONS] [MODULE:APP]"
    assert "--reload" in result.out

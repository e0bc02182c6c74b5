"""What ``send`` and ``subscribe`` print of an answer, and the exit status a task's end gives.

``send --stream`` prints the answer's text as it arrives, on one line;
``--events`` one line per event; a task that ends FAILED or REJECTED exits 1
with the agent's reason on standard error, whichever way it is printed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .servers import ServerProcess
from .test_cli import a2a_here, agent, task_line, with_terminal_stderr

__all__ = ["agent"]  # the fixture (tests.scripted_app served by hypercorn), used by name

FAILED = re.compile(r"^error: task \S+ ended TASK_STATE_FAILED: .+$")


def test_send_stream_prints_the_text_as_it_arrives_on_one_line(
    tmp_path: Path, agent: ServerProcess
) -> None:
    # The agent streams "one ", "two ", "three" as chunks of one artifact.
    result = a2a_here("send", agent.url, "chunks", "--stream", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.out == "one two three\n"
    assert result.err == ""


def test_send_stream_prints_an_echo_and_nothing_else(tmp_path: Path, agent: ServerProcess) -> None:
    result = a2a_here("send", agent.url, "echo hello there", "--stream", cwd=tmp_path)
    assert (result.status, result.out, result.err) == (0, "hello there\n", "")


def test_send_stream_prints_the_question_and_how_to_answer_it(
    tmp_path: Path, agent: ServerProcess
) -> None:
    result = a2a_here("send", agent.url, "ask", "--stream", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.out == "What is your name?\n"
    hint = re.fullmatch(
        r"task (\S+) TASK_STATE_INPUT_REQUIRED: answer with --task (\S+)\n", result.err
    )
    assert hint is not None and hint.group(1) == hint.group(2), result.err
    answered = a2a_here("send", agent.url, "Ada", "--task", hint.group(1), "--stream", cwd=tmp_path)
    # The artifact, then what the agent said as it completed.
    assert (answered.status, answered.out) == (0, "continued with: Ada\ndone\n")


def test_send_events_keeps_one_line_per_event_of_a_chunked_answer(
    tmp_path: Path, agent: ServerProcess
) -> None:
    result = a2a_here("send", agent.url, "chunks", "--events", cwd=tmp_path)
    assert result.status == 0, result.err
    assert result.lines[1:] == [
        "status TASK_STATE_WORKING",
        "artifact: one ",
        "artifact: two ",
        "artifact: three",
        "status TASK_STATE_COMPLETED",
    ]


@pytest.mark.parametrize("printing", [[], ["--stream"], ["--events"], ["--json"]])
def test_a_task_that_fails_exits_1_with_the_reason(
    tmp_path: Path, agent: ServerProcess, printing: list[str]
) -> None:
    result = a2a_here("send", agent.url, "raise", *printing, cwd=tmp_path)
    assert result.status == 1
    assert "Traceback" not in result.err
    assert FAILED.match(result.err.splitlines()[-1]), result.err


@pytest.mark.parametrize("printing", [[], ["--stream"], ["--events"]])
def test_a_rejected_task_exits_1_with_the_agents_reason(
    tmp_path: Path, agent: ServerProcess, printing: list[str]
) -> None:
    result = a2a_here("send", agent.url, "reject", *printing, cwd=tmp_path)
    assert result.status == 1
    assert result.err.splitlines()[-1].endswith("ended TASK_STATE_REJECTED: not for me")


def test_the_blocking_summary_of_a_failed_task_shows_why(
    tmp_path: Path, agent: ServerProcess
) -> None:
    result = a2a_here("send", agent.url, "reject", cwd=tmp_path)
    line = task_line(result.lines[0])
    assert (line["state"], line["text"]) == ("TASK_STATE_REJECTED", "not for me")


def test_subscribe_to_a_task_that_fails_exits_1(tmp_path: Path, agent: ServerProcess) -> None:
    started = a2a_here("send", agent.url, "raise", "--no-wait", cwd=tmp_path)
    task_id = task_line(started.lines[0])["id"]
    result = a2a_here("subscribe", agent.url, task_id, "--last-event-id", "0", cwd=tmp_path)
    assert result.status == 1, result.out + result.err
    assert FAILED.match(result.err.splitlines()[-1]), result.err


def test_a_completed_task_exits_0_and_so_does_one_that_waits_for_input(
    tmp_path: Path, agent: ServerProcess
) -> None:
    assert a2a_here("send", agent.url, "echo fine", cwd=tmp_path).status == 0
    assert a2a_here("send", agent.url, "ask", cwd=tmp_path).status == 0


def test_send_stream_spins_on_a_terminal_until_the_first_words(
    tmp_path: Path, agent: ServerProcess
) -> None:
    # The task exists at once; its only words come a second later: the spinner
    # (a frame every 0.1 s) turns through that second, not only until the task.
    args = ["send", agent.url, "sleep 1", "--stream"]
    process, written = with_terminal_stderr(args, cwd=tmp_path)
    assert process.returncode == 0
    assert written.count(b" waiting for the agent") >= 5, written
    assert process.stdout == b"slept\n"

"""What the client verbs print of an agent's answer, and the exit status its end gives.

Three ways to print a send or a subscription: the answer's text as it
arrives, on one line (``send --stream``); one summary line per event
(``--events``, ``subscribe``, a blocking ``send``); or one ProtoJSON object
per line (``--json``). Whichever way, a task that ends FAILED or REJECTED
makes the command exit 1, with the agent's reason on standard error.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from typing import TextIO

import click

from ..client import text_of
from ..protocol import StreamResponse, Task, TaskState

__all__ = ["FAILED_EXIT", "Ending", "describe", "print_events", "print_text"]

#: The exit status of a command whose task ended FAILED or REJECTED.
FAILED_EXIT = 1
_FAILURES = frozenset({TaskState.FAILED, TaskState.REJECTED})


def describe(event: StreamResponse) -> str:
    """One summary line: ``task ID STATE: TEXT``, ``status STATE: TEXT``, ``artifact: TEXT``..."""
    if event.task is not None:
        task = event.task
        # What the agent said in its status (its question, why it failed)
        # where that is the news; else the artifacts' text.
        said = text_of(task.status.message) if task.status.message else ""
        if task.status.state in _FAILURES or task.status.state.is_interrupted:
            text = said or text_of(task)
        else:
            text = text_of(task) or said
        return f"task {task.id} {task.status.state.value}" + (f": {text}" if text else "")
    if event.status_update is not None:
        status = event.status_update.status
        note = text_of(status.message) if status.message else ""
        return f"status {status.state.value}" + (f": {note}" if note else "")
    if event.artifact_update is not None:
        return f"artifact: {text_of(event)}"
    assert event.message is not None
    return f"message: {text_of(event.message)}"


class Ending:
    """Where a printed task got to: its id, its last state and what the agent said then."""

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.state: TaskState | None = None
        self.said = ""

    def see(self, event: StreamResponse) -> None:
        payload = event.payload
        if isinstance(payload, Task):
            self.task_id, status = payload.id, payload.status
        elif event.status_update is not None:
            self.task_id, status = event.status_update.task_id, event.status_update.status
        else:
            return
        self.state = status.state
        self.said = text_of(status.message) if status.message else ""

    def exit_status(self) -> int:
        """1 (saying why on standard error) for a task that ended FAILED or REJECTED; else 0."""
        if self.state not in _FAILURES:
            return 0
        assert self.state is not None
        reason = self.said or "the agent gave no reason"
        click.echo(f"error: task {self.task_id} ended {self.state.value}: {reason}", err=True)
        return FAILED_EXIT


async def print_events(
    events: AsyncIterator[StreamResponse], as_json: bool, started: Callable[[], None]
) -> Ending:
    """One line per event (a summary, or ProtoJSON), flushed as each arrives."""
    ending = Ending()
    async for event in events:
        started()  # the spinner stops
        ending.see(event)
        click.echo(event.to_json() if as_json else describe(event))
        sys.stdout.flush()
    return ending


async def print_text(events: AsyncIterator[StreamResponse], started: Callable[[], None]) -> Ending:
    """The answer's text as it arrives, on one line; what the agent says in a
    status (its question) on a line of its own. A task left waiting for input
    says so on standard error, with the option that continues it."""
    out: TextIO = sys.stdout
    ending = Ending()
    open_line = False

    def write(text: str, *, new_line: bool = False) -> None:
        nonlocal open_line
        if text:
            started()  # the spinner turns until the answer's first words, not its first event
        if new_line and open_line:
            out.write("\n")
            open_line = False
        if text:
            out.write(text)
            open_line = True
        out.flush()

    last: StreamResponse | None = None
    async for event in events:
        ending.see(event)
        last = event
        if event.artifact_update is not None:
            # A new artifact begins on a new line; its chunks continue it.
            write(text_of(event), new_line=not event.artifact_update.append)
        elif event.message is not None:
            write(text_of(event.message), new_line=True)
        elif event.status_update is not None:
            state = event.status_update.status.state
            if ending.said and state not in _FAILURES:  # the reason goes to stderr
                write(ending.said, new_line=True)
                write("", new_line=True)
    if last is not None and last.task is not None:
        # The task was all there is (an agent that answered at once): its text,
        # or its question. A task that begins a stream is only its state so far.
        state = last.task.status.state
        if state.is_interrupted:
            write(ending.said, new_line=True)
        elif state not in _FAILURES:
            write(text_of(last.task), new_line=True)
    if open_line:
        out.write("\n")
        out.flush()
    if ending.state is not None and ending.state.is_interrupted:
        click.echo(
            f"task {ending.task_id} {ending.state.value}: answer with --task {ending.task_id}",
            err=True,
        )
    return ending

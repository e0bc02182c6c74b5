"""A process reads back what another recorded: the feed keeps the history whole.

The rows a reader reads back (``Store.task_since``) hold every message the
history gained since its feed's last event, so an answer shows the history
from the feed, as on the process that recorded it, without a read of the log.
"""

from __future__ import annotations

from a2a_trio.protocol import (
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_trio.protocol.limits import Limits
from a2a_trio.runtime.feed import ReadBack, TaskFeed

LIMITS = Limits()


def message(text: str, role: Role = Role.USER) -> Message:
    return Message(message_id=text, role=role, parts=[Part(text=text)])


def task(state: TaskState, history: list[Message] | None = None) -> Task:
    return Task(id="t-1", context_id="c-1", status=TaskStatus(state=state), history=history)


def status(state: TaskState, said: Message | None = None) -> StreamResponse:
    update = TaskStatusUpdateEvent(
        task_id="t-1", context_id="c-1", status=TaskStatus(state=state, message=said)
    )
    return StreamResponse(status_update=update)


def rows() -> list[ReadBack]:
    """A task created, asked for input, continued (a message row), then completed."""
    first, asked, again = message("hi"), message("who?", Role.AGENT), message("me")
    return [
        (1, StreamResponse(task=task(TaskState.SUBMITTED, [first])), None, [first]),
        (2, status(TaskState.INPUT_REQUIRED, asked), None, [asked]),
        (3, None, None, [again]),
        (4, status(TaskState.COMPLETED), None, []),
    ]


def texts(history: list[Message] | None) -> list[str] | None:
    return None if history is None else [m.message_id for m in history]


def test_a_feed_that_read_a_task_back_from_its_start_shows_its_whole_history() -> None:
    feed = TaskFeed(None, 0)
    feed.catch_up(rows(), task(TaskState.COMPLETED), 4)
    assert texts(feed.history(LIMITS, None, 4)) == ["hi", "who?", "me"]
    assert texts(feed.history(LIMITS, 2, 4)) == ["who?", "me"]
    assert texts(feed.history(LIMITS, None, 2)) == ["hi", "who?"]


def test_a_feed_that_began_in_the_middle_of_a_task_leaves_its_history_to_the_log() -> None:
    feed = TaskFeed(task(TaskState.INPUT_REQUIRED), 2)
    feed.catch_up(rows(), task(TaskState.COMPLETED), 4)
    assert feed.last_seq == 4
    assert feed.history(LIMITS, None, 4) is None  # reaches back past it: read the log

"""The console's fan-out: every observer hears its hooks; a failing one stops none of them."""

from __future__ import annotations

import logging

import pytest

from a2a_trio.console.observers import Fanout
from a2a_trio.store import Notification, Share
from a2a_trio.store.observer import Observer
from a2a_trio.store.records import Lane

from .store_contract import make_task
from .writes import AGENT, status_event, task_event


class Heard(Observer):
    """Writes down every hook it hears."""

    def __init__(self) -> None:
        self.heard: list[tuple[object, ...]] = []

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        self.heard.append(("committed", agent, share.task_id, owner))

    def attempted(self, notification, outcome, status, error) -> None:  # type: ignore[no-untyped-def]
        self.heard.append(("attempted", notification.lane.task_id, outcome))

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        self.heard.append(("started", task_id))

    def execution_ended(self, agent: str, task_id: str, owner: str, error: str | None) -> None:
        self.heard.append(("ended", task_id, error))


class Failing(Observer):
    """Raises from the two hooks it has; hears no others."""

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        raise RuntimeError("committed broke")

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        raise RuntimeError("started broke")


def test_every_observer_hears_its_hooks_though_one_before_it_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = make_task("t-1")
    share = Share(AGENT, "t-1", events=[task_event(1, task), status_event(2, task)])
    first, late = Heard(), Heard()
    fanout = Fanout(Failing(), first, Observer())
    fanout.add(late)
    notification = Notification(Lane(AGENT, "t-1", "c-1"), 7, "n-7", 2, "{}", 1, 0.0)
    with caplog.at_level(logging.ERROR, logger="a2a_trio.console"):
        fanout.execution_started(AGENT, "t-1", "alice")
        fanout.committed(AGENT, share, "alice", 0.01)
        fanout.attempted(notification, "delivered", 200, None)
        fanout.execution_ended(AGENT, "t-1", "alice", None)
    expected = [
        ("started", "t-1"),
        ("committed", AGENT, "t-1", "alice"),
        ("attempted", "t-1", "delivered"),
        ("ended", "t-1", None),
    ]
    assert first.heard == expected
    assert late.heard == expected
    failures = [record.getMessage() for record in caplog.records]
    assert failures == [
        "console: Failing.execution_started failed",
        "console: Failing.committed failed",
    ]

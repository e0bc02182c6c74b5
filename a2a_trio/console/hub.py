"""The feed hub: every committed event of every agent, numbered, for every subscriber.

The hub is the observer the recorder, the executions and the push worker
call after each commit (:class:`~a2a_trio.store.observer.Observer`). It
turns what they report into feed events, gives each the next feed-wide
sequence number and keeps the last ``backlog`` events. Publishing costs the
same however many subscribers there are (the TaskFeed idea): each
subscriber keeps a cursor into the backlog and reads what its filter
matches when its connection is ready for more; one wake-up serves them all.
A subscriber that falls more than ``buffer`` events behind the feed is
dropped (its connection closes with the reason) rather than slow anything;
one whose client stops reading is cut off when a send times out.

The sequence lives in memory: it starts at 1 with each process, and the
``epoch`` (a random id per hub) tells a resuming client whether its
sequence is of this process. A resume from a sequence older than the
backlog, or of another epoch, starts with a ``feed.gap`` event saying what
was lost, then gives the whole backlog.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Literal

import trio
from pydantic_core import to_json

from ..store import Notification, Share
from ..store.browse import TimelineEntry
from ..store.observer import Observer
from .events import (
    Event,
    FeedFilter,
    attempt_events,
    execution_event,
    logged_events,
    now,
    share_events,
)

__all__ = ["FeedHub", "Subscriber"]

#: How long after its last subscriber left the feed is still kept whole for a resume.
RESUME_WINDOW = 60.0

#: Owners (and log positions) remembered per (agent, task), for events whose
#: reporter does not know it.
_OWNERS_KEPT = 10_000


class _Entry:
    """A numbered event; its JSON text is made the first time a subscriber needs it."""

    __slots__ = ("_text", "event", "seq")

    def __init__(self, seq: int, event: Event) -> None:
        self.seq = seq
        self.event = event
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = to_json(self.event).decode()  # compact, UTF-8, 5x json.dumps' speed
        return self._text


class Subscriber:
    """One feed client: its filter, its place in the feed, and why it was dropped."""

    def __init__(self, hub: FeedHub, wanted: FeedFilter, buffer: int, cursor: int) -> None:
        self.filter = wanted
        self._hub = hub
        self._buffer = buffer
        #: The feed sequence up to which this subscriber has looked.
        self.cursor = cursor
        #: Where the feed stood when it subscribed: falling behind counts from there,
        #: so a resume may replay the backlog at its own pace.
        self._since = hub.seq
        #: Messages it gets before the feed (a resume's gap).
        self.pending: list[str] = []
        #: Why the hub let go of this subscriber (None while it is served).
        self.dropped: str | None = None
        #: The sequence of the last event handed to the client.
        self.sent_seq = cursor

    @property
    def behind(self) -> int:
        """Events published since it subscribed that it has not looked at yet."""
        return self._hub.seq - max(self.cursor, self._since)

    def drop(self, reason: str, *, slow: bool = False) -> None:
        """Stop serving this subscriber; :meth:`next` raises from now on.

        ``slow``: it is dropped for falling behind (the hub counts those).
        """
        if self.dropped is None:
            self.dropped = reason
            self._hub.unsubscribe(self, slow=slow)
            self._hub.notify()  # a subscriber waiting for events hears of it

    async def next(self, most: int = 1) -> list[str]:
        """The next events' JSON texts (at least one, at most ``most``, oldest first).

        Waits for a matching event. Raises ``trio.EndOfChannel`` once dropped
        (a subscriber more than ``buffer`` events behind is dropped here); the
        client resumes from :attr:`sent_seq` instead.
        """
        while True:
            if self.dropped is not None:
                raise trio.EndOfChannel
            if self.behind > self._buffer or self._hub.evicted(self.cursor):
                self.drop(
                    f"too slow: more than {self._buffer} events behind; "
                    f"resume after {self.sent_seq}",
                    slow=True,
                )
                raise trio.EndOfChannel
            if self.pending:
                texts, self.pending = self.pending[:most], self.pending[most:]
                await trio.lowlevel.checkpoint()
                return texts
            wakeup = self._hub.wakeup  # taken before looking, so no publish is missed
            entries, self.cursor = self._hub.after(self.cursor, self.filter, most)
            if entries:
                self.sent_seq = entries[-1].seq
                await trio.lowlevel.checkpoint()
                return [entry.text for entry in entries]
            await wakeup.wait()

    def close(self) -> None:
        self._hub.unsubscribe(self)


class FeedHub(Observer):
    """Numbers every committed event and fans it out; see the module docstring."""

    def __init__(self, *, backlog: int = 10_000, buffer: int = 1_000) -> None:
        self.epoch = secrets.token_hex(8)
        self.seq = 0
        # A subscriber may fall ``buffer`` events behind: the backlog holds them.
        self._backlog: deque[_Entry] = deque(maxlen=max(backlog, buffer))
        self._wakeup = trio.Event()
        self._wakeup_taken = False
        self._buffer = buffer
        self.subscribers: set[Subscriber] = set()
        self._owners: OrderedDict[tuple[str, str], str] = OrderedDict()
        #: The last log sequence published per (agent, task), so that an event
        #: this process recorded and also read back from the log is published once.
        self._logged: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._last_left = -RESUME_WINDOW
        #: How many subscribers were dropped for being slow.
        self.dropped = 0
        #: Others told of each event after it is numbered (the metrics).
        self.listeners: list[Callable[[Event], None]] = []

    # --- the observer ----------------------------------------------------------------

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        if share.new is not None:
            owner = share.new.owner
        owner = self._owner(agent, share.task_id, owner)
        if not share.events:
            return
        done = self.logged(agent, share.task_id)
        if done is not None and share.events[0].seq <= done:  # read back from the log already
            if share.events[-1].seq <= done:
                return
            share = Share(
                agent, share.task_id, share.new, [e for e in share.events if e.seq > done]
            )
        self._note_logged(agent, share.task_id, share.events[-1].seq)
        if self._unwatched(len(share.events)):
            return
        for event in share_events(agent, share, owner):
            self.publish(event)

    def logged(self, agent: str, task_id: str) -> int | None:
        """The last log sequence of the task published here (None: none that is remembered)."""
        return self._logged.get((agent, task_id))

    def skip_logged(self, agent: str, task_id: str, seq: int) -> None:
        """Take the task's log up to ``seq`` as published (nobody watched it move)."""
        if seq > (self.logged(agent, task_id) or 0):
            self._note_logged(agent, task_id, seq)

    def publish_logged(
        self, agent: str, task_id: str, owner: str, entries: list[TimelineEntry], state: str
    ) -> None:
        """Publish log rows another process recorded (those not published yet), in log order."""
        done = self.logged(agent, task_id) or 0
        fresh = [entry for entry in entries if entry.seq > done]
        if not fresh:
            return
        owner = self._owner(agent, task_id, owner) or owner
        self._note_logged(agent, task_id, fresh[-1].seq)
        for event in logged_events(agent, task_id, owner, fresh, state):
            self.publish(event)

    def _note_logged(self, agent: str, task_id: str, seq: int) -> None:
        key = (agent, task_id)
        self._logged[key] = seq
        self._logged.move_to_end(key)
        if len(self._logged) > _OWNERS_KEPT:
            self._logged.popitem(last=False)

    def attempted(
        self,
        notification: Notification,
        outcome: Literal["delivered", "retry", "failed", "abandoned"],
        status: int | None,
        error: str | None,
    ) -> None:
        lane = notification.lane
        owner = self._owners.get((lane.agent, lane.task_id))
        if self._unwatched(1):
            return
        for event in attempt_events(notification, owner, outcome, status, error):
            self.publish(event)

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        self._owner(agent, task_id, owner)
        if not self._unwatched(1):
            self.publish(execution_event("execution.started", agent, task_id, owner))

    def execution_ended(self, agent: str, task_id: str, owner: str, error: str | None) -> None:
        if not self._unwatched(1):
            self.publish(execution_event("execution.ended", agent, task_id, owner, error))

    def _unwatched(self, events: int) -> bool:
        """Whether nobody watches: then ``events`` are numbered, but neither made nor kept.

        The backlog goes with them, so that a resume from before them starts
        with a ``feed.gap``. Building the events of every commit is most of
        what the feed costs; unwatched, it costs nothing.
        """
        if self.watched:
            return False
        self.seq += events
        self._backlog.clear()
        return True

    def _owner(self, agent: str, task_id: str, owner: str | None) -> str | None:
        key = (agent, task_id)
        if owner is None:
            return self._owners.get(key)
        self._owners[key] = owner
        self._owners.move_to_end(key)
        if len(self._owners) > _OWNERS_KEPT:
            self._owners.popitem(last=False)
        return owner

    # --- fan-out ------------------------------------------------------------------------

    def publish(self, event: Event) -> None:
        """Number the event, keep it in the backlog and wake the subscribers waiting."""
        self.seq += 1
        event["seq"] = self.seq
        self._backlog.append(_Entry(self.seq, event))
        for listener in self.listeners:
            listener(event)
        self.notify()

    @property
    def wakeup(self) -> trio.Event:
        """Set at the next publish (or :meth:`notify`); take it before looking."""
        self._wakeup_taken = True
        return self._wakeup

    def notify(self) -> None:
        if self._wakeup_taken:  # else no one waits on it: keep it
            self._wakeup.set()
            self._wakeup = trio.Event()
            self._wakeup_taken = False

    def evicted(self, cursor: int) -> bool:
        """Whether events after ``cursor`` have left the backlog unread."""
        return bool(self._backlog) and cursor < self._backlog[0].seq - 1

    def after(self, cursor: int, wanted: FeedFilter, most: int) -> tuple[list[_Entry], int]:
        """Up to ``most`` matching events above ``cursor``, and the cursor past what was read."""
        if not self._backlog or cursor >= self.seq:
            return [], max(cursor, 0)
        oldest = self._backlog[0].seq
        start = max(cursor - oldest + 1, 0)
        if wanted.everything:
            taken = list(itertools.islice(self._backlog, start, start + most))
            return taken, taken[-1].seq if taken else cursor
        taken = []
        for entry in itertools.islice(self._backlog, start, None):
            cursor = entry.seq
            if wanted.matches(entry.event):
                taken.append(entry)
                if len(taken) == most:
                    break
        return taken, cursor

    def subscribe(
        self, wanted: FeedFilter, *, after: int | None = None, epoch: str | None = None
    ) -> Subscriber:
        """A new subscriber of what comes next; with ``after``, of the backlog after it first.

        A resume the backlog cannot serve whole (``after`` is older than its
        oldest event, or ``epoch`` is another process's) starts with a
        ``feed.gap`` event, then everything the backlog holds.
        """
        if after is None:
            subscriber = Subscriber(self, wanted, self._buffer, self.seq)
        else:
            oldest = self._backlog[0].seq if self._backlog else self.seq + 1
            foreign = epoch is not None and epoch != self.epoch
            gap = foreign or after < oldest - 1
            subscriber = Subscriber(self, wanted, self._buffer, oldest - 1 if gap else after)
            if gap:
                subscriber.pending.append(
                    json.dumps(
                        {
                            "kind": "feed.gap",
                            "epoch": self.epoch,
                            "after": after,
                            "oldest": oldest,
                            "seq": oldest - 1,
                            "time": now(),
                            "reason": "another process (the server restarted)"
                            if foreign
                            else "older than the backlog",
                        }
                    )
                )
        self.subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber, *, slow: bool = False) -> None:
        if subscriber in self.subscribers:
            self.subscribers.discard(subscriber)
            self.dropped += slow
            self._last_left = time.monotonic()

    @property
    def watched(self) -> bool:
        """Whether a client is subscribed, or was within ``RESUME_WINDOW`` (it may resume)."""
        return bool(self.subscribers) or time.monotonic() - self._last_left < RESUME_WINDOW

    def hello(self) -> dict[str, Any]:
        """The first message of every connection: the epoch and the latest sequence."""
        return {"kind": "feed.hello", "epoch": self.epoch, "seq": self.seq, "time": now()}

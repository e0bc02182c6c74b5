"""The feed hub: every committed event of every agent, numbered, fanned out to subscribers.

The hub is the observer the recorder, the executions and the push worker
call after each commit (:class:`~a2a_trio.store.observer.Observer`). It
turns what they report into feed events, gives each the next feed-wide
sequence number, keeps the last ``backlog`` events for subscribers who
resume, and hands each event to every subscriber whose filter matches,
without waiting: a subscriber's buffer is bounded, and one that is full is
dropped (its connection closes with the reason) rather than slow anything.

The sequence lives in memory: it starts at 1 with each process, and the
``epoch`` (a random id per hub) tells a resuming client whether its
sequence is of this process. A resume from a sequence older than the
backlog, or of another epoch, starts with a ``feed.gap`` event saying what
was lost, then gives the whole backlog.
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Literal

import trio

from ..store import Notification, Share
from ..store.observer import Observer
from .events import Event, FeedFilter, attempt_events, execution_event, now, share_events

__all__ = ["FeedHub", "Subscriber"]

#: Owners remembered per (agent, task), for events whose reporter does not know it.
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
            self._text = json.dumps(self.event, ensure_ascii=False, separators=(",", ":"))
        return self._text


class Subscriber:
    """One feed client: its filter, its bounded buffer, and why it was dropped."""

    def __init__(self, hub: FeedHub, wanted: FeedFilter, buffer: int) -> None:
        self.filter = wanted
        self._hub = hub
        self._send, self._receive = trio.open_memory_channel[tuple[int, str]](buffer)
        self._buffer = buffer
        #: The backlog a resume replays first, outside the bounded buffer.
        self.replay: deque[tuple[int, str]] = deque()
        #: Why the hub let go of this subscriber (None while it is served).
        self.dropped: str | None = None
        #: The sequence of the last event handed to the client.
        self.sent_seq = 0

    def offer(self, seq: int, text: str) -> None:
        if self.dropped is not None:
            return
        try:
            self._send.send_nowait((seq, text))
        except trio.WouldBlock:
            self.drop(
                f"too slow: {self._buffer} events unsent; resume after {self.sent_seq}", slow=True
            )

    def drop(self, reason: str, *, slow: bool = False) -> None:
        """Stop serving this subscriber; :meth:`next` raises once it is idle.

        ``slow``: it is dropped for falling behind (the hub counts those).
        """
        if self.dropped is None:
            self.dropped = reason
            self._send.close()
            self._hub.unsubscribe(self, slow=slow)

    async def next(self, most: int = 1) -> list[str]:
        """The next events' JSON texts (at least one, at most ``most``, oldest first).

        Raises ``trio.EndOfChannel`` once dropped: a dropped subscriber gets
        nothing more of its buffer; the client resumes from :attr:`sent_seq`
        instead.
        """
        if self.dropped is not None:
            raise trio.EndOfChannel
        taken: list[tuple[int, str]] = []
        while self.replay and len(taken) < most:
            taken.append(self.replay.popleft())
        if taken:
            await trio.lowlevel.checkpoint()
        else:
            taken.append(await self._receive.receive())
        while len(taken) < most:
            try:
                taken.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        if self.dropped is not None:
            raise trio.EndOfChannel
        self.sent_seq = taken[-1][0]
        return [text for _, text in taken]

    def close(self) -> None:
        self._send.close()
        self._hub.unsubscribe(self)


class FeedHub(Observer):
    """Numbers every committed event and fans it out; see the module docstring."""

    def __init__(self, *, backlog: int = 10_000, buffer: int = 1_000) -> None:
        self.epoch = secrets.token_hex(8)
        self.seq = 0
        self._backlog: deque[_Entry] = deque(maxlen=backlog)
        self._buffer = buffer
        self.subscribers: set[Subscriber] = set()
        self._owners: OrderedDict[tuple[str, str], str] = OrderedDict()
        #: How many subscribers were dropped for being slow.
        self.dropped = 0
        #: Others told of each event after it is numbered (the metrics).
        self.listeners: list[Callable[[Event], None]] = []

    # --- the observer ----------------------------------------------------------------

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        if share.new is not None:
            owner = share.new.owner
        owner = self._owner(agent, share.task_id, owner)
        for event in share_events(agent, share, owner):
            self.publish(event)

    def attempted(
        self,
        notification: Notification,
        outcome: Literal["delivered", "retry", "failed", "abandoned"],
        status: int | None,
        error: str | None,
    ) -> None:
        lane = notification.lane
        owner = self._owners.get((lane.agent, lane.task_id))
        for event in attempt_events(notification, owner, outcome, status, error):
            self.publish(event)

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        self._owner(agent, task_id, owner)
        self.publish(execution_event("execution.started", agent, task_id, owner))

    def execution_ended(self, agent: str, task_id: str, owner: str, error: str | None) -> None:
        self.publish(execution_event("execution.ended", agent, task_id, owner, error))

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
        """Number the event, keep it in the backlog and offer it to every matching subscriber."""
        self.seq += 1
        event["seq"] = self.seq
        entry = _Entry(self.seq, event)
        self._backlog.append(entry)
        for listener in self.listeners:
            listener(event)
        for subscriber in tuple(self.subscribers):
            if subscriber.filter.matches(event):
                subscriber.offer(self.seq, entry.text)

    def subscribe(
        self, wanted: FeedFilter, *, after: int | None = None, epoch: str | None = None
    ) -> Subscriber:
        """A new subscriber; with ``after``, it first gets the backlog's events after it.

        A resume the backlog cannot serve whole (``after`` is older than its
        oldest event, or ``epoch`` is another process's) starts with a
        ``feed.gap`` event, then everything the backlog holds.
        """
        subscriber = Subscriber(self, wanted, self._buffer)
        if after is not None:
            oldest = self._backlog[0].seq if self._backlog else self.seq + 1
            foreign = epoch is not None and epoch != self.epoch
            if foreign or after < oldest - 1:
                gap: Event = {
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
                subscriber.replay.append((oldest - 1, json.dumps(gap)))
                after = 0
            for entry in self._backlog:
                if entry.seq > after and wanted.matches(entry.event):
                    subscriber.replay.append((entry.seq, entry.text))
        self.subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber, *, slow: bool = False) -> None:
        if subscriber in self.subscribers:
            self.subscribers.discard(subscriber)
            self.dropped += slow

    def hello(self) -> dict[str, Any]:
        """The first message of every connection: the epoch and the latest sequence."""
        return {"kind": "feed.hello", "epoch": self.epoch, "seq": self.seq, "time": now()}

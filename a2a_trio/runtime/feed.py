"""Fan-out of one task's recorded events to everyone waiting on them.

A :class:`TaskFeed` keeps the task's latest snapshot and a bounded window of
its most recent streamed events. Readers keep their own cursor (the last
sequence number they saw) and wait on a trio.Event that is replaced at every
publish, so fan-out costs one ``Event.set()`` however many readers there are,
and an idle reader holds no buffer at all. A reader that falls behind the
window catches up from the event log in SQLite.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import trio

from ..protocol import Message, StreamResponse, Task
from ..protocol.limits import Limits
from ..protocol.tasks import HistoryWindow

__all__ = ["FeedItem", "ReadBack", "TaskFeed"]

#: Messages of the history a feed keeps for answering without a read of the log.
HISTORY_KEPT = 1_000

#: A published streamed event: its log sequence, the event, and its JSON text
#: as recorded (None when it has not been rendered), so relays need not render it again.
FeedItem = tuple[int, StreamResponse, str | None]

#: An event read back from the log (see :meth:`TaskFeed.catch_up`): its sequence, the
#: streamed event (None: a history row only), its JSON text, the messages it adds.
ReadBack = tuple[int, StreamResponse | None, str | None, Sequence[Message]]


class TaskFeed:
    """The live view of one task: snapshot, recent events and a wake-up."""

    def __init__(self, snapshot: Task | None, last_seq: int, *, window: int = 256) -> None:
        #: The task as readers may see it (published).
        self.snapshot = snapshot
        #: The task as recorded: ahead of ``snapshot`` while events are held.
        self.current = snapshot
        self.last_seq = last_seq
        #: The sequence of ``current``: the last event recorded, published or not.
        self.current_seq = last_seq
        self._held: list[
            tuple[int, Task, StreamResponse | None, str | None, Sequence[Message]]
        ] = []
        self._holding = False
        self._uncommitted_from = 0
        self._recent: deque[FeedItem] = deque()
        self._window = window
        # Streamed events up to this sequence are no longer in the window.
        self._evicted_through = last_seq
        self._wakeup = trio.Event()
        self._wakeup_taken = False
        #: Sequence of the latest streamed event published while the task was
        #: final or interrupted: a blocking SendMessage waits for one after it began.
        self.settled_seq = last_seq if snapshot is not None and _settled(snapshot) else 0
        #: The history messages of the events published after ``_messages_after``,
        #: by sequence: a response's history window is often all in here (a new
        #: task's, or a turn's last few messages), and then needs no read of the log.
        self._messages: deque[tuple[int, Message]] = deque()
        self._messages_after = last_seq

    @property
    def wakeup(self) -> trio.Event:
        """Set at the next publish (or :meth:`notify`); take it before checking state."""
        self._wakeup_taken = True
        return self._wakeup

    def record(
        self,
        seq: int,
        snapshot: Task,
        response: StreamResponse | None,
        text: str | None = None,
        messages: Sequence[Message] = (),
    ) -> None:
        """A recorded event: publish it now, or hold it (and all after it) until released.

        ``messages``: what the event adds to the task's history, in order.
        """
        self.current, self.current_seq = snapshot, seq
        if self._holding or self._held:
            self._held.append((seq, snapshot, response, text, messages))
        else:
            self.publish(seq, snapshot, response, text, messages)

    def hold(self) -> None:
        """Hold every event recorded from now on until :meth:`release` or :meth:`discard`.

        For events written in a transaction that has not committed yet.
        """
        self._holding = True
        self._uncommitted_from = len(self._held)

    def release(self) -> None:
        """Publish the held events, in order, and stop holding."""
        self._holding = False
        held, self._held = self._held, []
        for seq, snapshot, response, text, messages in held:
            self.publish(seq, snapshot, response, text, messages)

    def discard(self) -> None:
        """Forget the events held since :meth:`hold` (their transaction rolled back)."""
        self._holding = False
        del self._held[self._uncommitted_from :]
        if self._held:
            self.current_seq, self.current = self._held[-1][:2]
        else:
            self.current_seq, self.current = self.last_seq, self.snapshot

    def reset(self, snapshot: Task, seq: int) -> None:
        """Take the stored task as both the current and the published state."""
        if seq != self.last_seq:  # the log moved on without this feed: readers catch up there
            self._recent.clear()
            self._evicted_through = seq
            self._forget_messages(seq)
        self.snapshot = self.current = snapshot
        self.last_seq = self.current_seq = seq

    def publish(
        self,
        seq: int,
        snapshot: Task,
        response: StreamResponse | None,
        text: str | None = None,
        messages: Sequence[Message] = (),
    ) -> None:
        """Make a committed event visible. ``response`` is None for history-only rows."""
        for message in messages:
            self._messages.append((seq, message))
        if len(self._messages) > HISTORY_KEPT:
            self._forget_messages(self._messages[-HISTORY_KEPT - 1][0])
        if not self._held:
            self.current, self.current_seq = snapshot, seq
        self.snapshot = snapshot
        self.last_seq = seq
        # A message added to the history of a paused task settles nothing: a
        # blocking SendMessage waits for the state its own execution reaches.
        if response is not None and _settled(snapshot):
            self.settled_seq = seq
        if response is not None:
            if len(self._recent) >= self._window:
                self._evicted_through = self._recent.popleft()[0]
            self._recent.append((seq, response, text))
        self.notify()

    def catch_up(self, rows: list[ReadBack], snapshot: Task, seq: int) -> None:
        """Publish what another process recorded, read back from the log up to ``seq``.

        ``rows`` are every event after :attr:`last_seq` up to ``seq`` that is
        streamed or adds to the history, so the messages they carry keep the
        feed's history whole (a response then needs no read of the log).
        Ignored while this process writes the task (it holds events) or has
        seen ``seq`` already. Every event is published with the task as it
        stands at ``seq``, the only snapshot read back.
        """
        if self._holding or self._held or seq <= self.current_seq:
            return
        for row_seq, response, text, messages in rows:
            if row_seq > self.last_seq:
                self.publish(row_seq, snapshot, response, text, messages)
        if seq > self.last_seq:  # a history-only event last: the task moved all the same
            self.publish(seq, snapshot, None)

    def history(self, limits: Limits, length: int | None, through: int) -> list[Message] | None:
        """The history window up to event ``through``, if this feed holds all of it.

        None when the window reaches back past what the feed saw published:
        the log has it (:meth:`a2a_trio.store.Store.history`).
        """
        if through < self._messages_after:
            return None
        window = HistoryWindow(limits, length)
        for seq, message in reversed(self._messages):
            if seq > through:
                continue
            if not window.offer(message):
                return window.messages()
        return window.messages() if self._messages_after == 0 else None

    def _forget_messages(self, through: int) -> None:
        """Keep only the messages of events after ``through`` (the log has the rest)."""
        while self._messages and self._messages[0][0] <= through:
            self._messages.popleft()
        self._messages_after = max(self._messages_after, through)

    def notify(self) -> None:
        """Wake every waiting reader (something they may care about changed)."""
        if self._wakeup_taken:  # else no one can be waiting on it: keep it
            self._wakeup.set()
            self._wakeup = trio.Event()
            self._wakeup_taken = False

    def after(self, cursor: int) -> list[FeedItem] | None:
        """Streamed events above ``cursor``; None when the window no longer covers it."""
        if cursor >= self.last_seq:
            return []
        if cursor < self._evicted_through:
            return None
        return [item for item in self._recent if item[0] > cursor]


def _settled(task: Task) -> bool:
    state = task.status.state
    return state.is_final or state.is_interrupted

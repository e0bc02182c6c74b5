"""The stream of one task's events, as a stream or a subscription relays them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

import trio

from ..protocol import A2AError, StreamResponse, TaskState
from .feed import FeedItem

if TYPE_CHECKING:
    from .state import Execution, HostState, LiveTask

__all__ = ["TaskEventStream"]


def _response_state(response: StreamResponse) -> TaskState | None:
    if response.task is not None:
        return response.task.status.state
    if response.status_update is not None:
        return response.status_update.status.state
    return None


class TaskEventStream:
    """The events a stream relays, read with :meth:`receive` (cancel-safe).

    Waiting in :meth:`receive` can be cancelled (by a keep-alive timer, say)
    and called again without losing anything: all state lives here, and the
    wait itself is only on the feed's wake-up event.
    """

    def __init__(
        self,
        state: HostState | None,
        task_id: str,
        cursor: int,
        initial: Sequence[FeedItem | tuple[None, StreamResponse, None]],
        *,
        execution: Execution | None = None,
        stop_on_interrupt: bool = True,
        live: LiveTask | None = None,
        finished: bool = False,
    ) -> None:
        self._host = state
        #: Told, once, whether the stream had reached its end when it closed.
        self._on_close: Callable[[bool], object] | None = None
        self._task_id = task_id
        # Given (and held) here, or taken on the first receive, so that a
        # subscription nobody reads holds nothing; let go at the end or on close.
        self._live = live
        if live is not None:
            live.users += 1
        self._cursor = cursor
        # Events at or before the origin (the opening snapshot) never end the stream.
        self._origin = cursor
        # A list, not a deque: it is mostly empty, and 10,000 idle streams each
        # holding an empty deque (760 bytes) would cost over 7 MB.
        self._pending: list[FeedItem | tuple[None, StreamResponse, None]] = list(initial)
        self._execution = execution
        self._stop_on_interrupt = stop_on_interrupt
        self._finished = finished
        # What ended the execution after the stream began, told once at the end.
        self._failure: A2AError | None = None
        self._closed = False

    def on_close(self, callback: Callable[[bool], object]) -> None:
        """Call ``callback(finished)`` once the stream closes (``finished``: it reached its end)."""
        self._on_close = callback

    @classmethod
    def single(cls, response: StreamResponse) -> TaskEventStream:
        """A stream of exactly one event (a direct Message answer)."""
        return cls(None, "", 0, [(None, response, None)], finished=True)

    async def receive(self) -> tuple[int | None, StreamResponse]:
        """The next event and its log sequence; raises ``trio.EndOfChannel`` at the end.

        A stream whose execution failed after the stream began, with no final
        or paused state to tell (a follow-up whose first event found the disk
        full: STORAGE_FULL, the task left paused for its retry), raises that
        error at its end instead, once.
        """
        seq, response, _ = await self.receive_rendered()
        return seq, response

    async def receive_rendered(self) -> tuple[int | None, StreamResponse, str]:
        """Like :meth:`receive`, with the event's JSON text (as recorded, when it was)."""
        while True:
            ready = await self._poll()
            if not isinstance(ready, trio.Event):
                return ready
            await ready.wait()

    async def receive_ready(self) -> tuple[int | None, StreamResponse, str] | None:
        """The next event if it is already there, else None (never waits for one).

        Raises ``trio.EndOfChannel`` at the end, like :meth:`receive`. A relay
        uses it to send the events published together in one write.
        """
        ready = await self._poll()
        return None if isinstance(ready, trio.Event) else ready

    async def _poll(self) -> tuple[int | None, StreamResponse, str] | trio.Event:
        """The next event, or the wake-up to wait on before asking again."""
        while True:
            if self._pending:
                seq, response, text = self._pending.pop(0)
                if seq is None or seq > self._origin:
                    self._note_end(response)
                return seq, response, text if text is not None else response.to_json()
            if self._finished or self._host is None:
                self.close()
                failure, self._failure = self._failure, None
                if failure is not None:
                    raise failure
                raise trio.EndOfChannel
            live = await self._hold(self._host)
            if live is None:  # the task is gone (pruned)
                self._finished = True
                continue
            feed = live.feed
            wakeup = feed.wakeup
            items = feed.after(self._cursor)
            if items is None:
                assert self._host is not None
                items = [
                    (event.seq, StreamResponse.model_validate_json(event.payload), event.payload)
                    for event in await self._host.store.events_after(
                        self._host.name, self._task_id, self._cursor
                    )
                ]
            if items:
                self._cursor = items[-1][0]
                self._pending.extend(items)
                continue
            # An execution that is done may leave its task's ending to come (see
            # LiveTask.left_running): the stream waits for it in the log.
            execution = self._execution
            if execution is not None and execution.done.is_set() and not live.left_running:
                self._finished = True
                self._failure = execution.error
                continue
            snapshot = feed.snapshot
            if self._execution is None and snapshot is not None and snapshot.status.state.is_final:
                self._finished = True
                continue
            if self._host.finished.is_set():  # the host has stopped: nothing more comes
                self._finished = True
                continue
            return wakeup

    def _note_end(self, response: StreamResponse) -> None:
        state = _response_state(response)
        if state is None:
            return
        if state.is_final or (self._stop_on_interrupt and state.is_interrupted):
            self._finished = True
            self._pending.clear()

    async def _hold(self, host: HostState) -> LiveTask | None:
        if self._live is None:
            stored = None
            if self._task_id not in host.live.tasks:
                stored = await host.store.get_task(host.name, self._task_id, owner=None)
                if stored is None:
                    return None
            self._live = host.live.acquire(self._task_id, stored)
        return self._live

    def close(self) -> None:
        """Let go of the task (idempotent)."""
        if not self._closed:
            self._closed = True
            if self._on_close is not None:
                self._on_close(self._finished)
            if self._host is not None and self._live is not None:
                self._host.live.release(self._live)
                self._live = None

    def __aiter__(self) -> AsyncIterator[tuple[int | None, StreamResponse]]:
        return self

    async def __anext__(self) -> tuple[int | None, StreamResponse]:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

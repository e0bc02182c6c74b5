"""The asyncio bridge: agents written for asyncio, served by the trio host.

An :class:`AsyncioAgentExecutor` is written like an :class:`AgentExecutor`,
but its ``execute`` and ``cancel`` are asyncio coroutines: LangGraph, Pydantic
AI, Google's ADK, the OpenAI Agents SDK and most other frameworks run in them
as they are. :class:`AsyncioBridge` is the trio executor that runs one:

- one asyncio event loop per agent, in a thread of its own, started and
  stopped with the host (:meth:`AsyncioBridge.lifespan`, which the host enters
  in its nursery); no thread outlives the host;
- each execution (and each cancel) is one asyncio task on that loop;
- the events it enqueues reach the host in order: they are handed to the trio
  loop with ``TrioToken.run_sync_soon`` (FIFO, wakes trio at once, no polling;
  one wake-up for a burst) and forwarded by the trio side of the execution; a
  window of credits (:data:`CREDITS`) bounds how far the asyncio side may run
  ahead, so a full host queue still slows the agent down;
- a trio cancellation (CancelTask, shutdown) cancels the asyncio task at once
  and waits for it to finish; an exception in it ends the task FAILED.

A stalled asyncio loop (blocking code in it) stalls this agent's tasks only:
the trio loop, other agents and every other request go on.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import math
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from ..runtime.executor import AgentEvent, AgentExecutor, EventQueue, RequestContext, TaskUpdater

__all__ = ["CREDITS", "AsyncioAgentExecutor", "AsyncioBridge", "AsyncioEventQueue"]

#: How many events an execution's asyncio side may hand over before the trio
#: side has forwarded them to the host (then ``enqueue_event`` waits).
CREDITS = 64

#: The name every bridge thread's name starts with.
THREAD_NAME = "a2a-trio asyncio loop"


class AsyncioEventQueue:
    """An execution's outbox on the asyncio side; :class:`TaskUpdater` takes it.

    :meth:`enqueue_event` is an asyncio coroutine. It returns as soon as the
    event is on its way to the trio side (in order), and waits only when
    :data:`CREDITS` events are still in transit.
    """

    def __init__(self, crossing: _Crossing) -> None:
        self._crossing = crossing
        self._ended = False

    async def enqueue_event(self, event: AgentEvent) -> None:
        """Hand one event to the host; waits only while too many are in transit."""
        if self._ended:
            raise RuntimeError("the execution this queue served has ended")
        await self._crossing.put(event)

    def close(self) -> None:
        """Refuse every later event: the execution this queue served has ended.

        The bridge calls it when the agent's coroutine returns; an event
        enqueued after that (from a task the agent left running) raises
        RuntimeError instead of reaching a task that moved on.
        """
        self._ended = True


class _Crossing:
    """One execution's events on their way from the asyncio thread to the trio side.

    In order and without polling: the asyncio side appends to a deque and
    schedules a trio callback (``TrioToken.run_sync_soon``) only when none is
    pending, so a burst of events costs one wake-up of the trio loop; that
    callback moves what is there into a memory channel, read by
    :func:`_forward`. Backpressure is a window of :data:`CREDITS` events
    handed over and not yet forwarded to the host; the trio side wakes the
    asyncio side only when it waits for room.

    Each counter is written by one side only; the GIL orders the rest, and
    every check that could miss a write from the other thread is made again
    after publishing what the other side reads.
    """

    def __init__(
        self, token: trio.lowlevel.TrioToken, loop: asyncio.AbstractEventLoop, window: int
    ) -> None:
        self._token = token
        self._loop = loop
        self._window = window
        self._items: collections.deque[AgentEvent | _Ended] = collections.deque()
        self._scheduled = False
        self.send, self.receive = trio.open_memory_channel[AgentEvent | _Ended](math.inf)
        self._handed = 0  # written on the asyncio side
        self._forwarded = 0  # written on the trio side
        self._room: asyncio.Future[None] | None = None  # the asyncio side waits on it

    # --- the asyncio side -----------------------------------------------------------

    async def put(self, event: AgentEvent) -> None:
        while self._handed - self._forwarded >= self._window:
            room = self._room = self._loop.create_future()
            try:
                if self._handed - self._forwarded >= self._window:  # not freed meanwhile
                    await room
            finally:
                self._room = None
        self._handed += 1
        self._push(event)

    def finish(self, outcome: _Ended) -> None:
        """The task's outcome, after its last event."""
        self._push(outcome)

    def _push(self, item: AgentEvent | _Ended) -> None:
        self._items.append(item)
        if not self._scheduled:
            self._scheduled = True
            self._token.run_sync_soon(self._flush)

    # --- the trio side ----------------------------------------------------------------

    def _flush(self) -> None:
        self._scheduled = False  # before taking: what comes after is scheduled anew
        while self._items:
            item = self._items.popleft()
            with contextlib.suppress(trio.BrokenResourceError):  # the trio side gave up
                self.send.send_nowait(item)

    def forwarded(self, count: int) -> None:
        """``count`` more events were passed on to the host: room for as many."""
        self._forwarded += count
        room = self._room
        if room is not None:
            self._loop.call_soon_threadsafe(_settle, room)


class AsyncioAgentExecutor(abc.ABC):
    """An agent's logic written for asyncio; mount it like any executor.

    ``execute`` and ``cancel`` are asyncio coroutines run on the agent's own
    asyncio loop (see :class:`AsyncioBridge`, which :meth:`A2AApp.mount
    <a2a_trio.A2AApp.mount>` wraps around it); otherwise the contract is
    :class:`AgentExecutor`'s: report only by enqueueing events, raise to end
    the task FAILED, expect ``asyncio.CancelledError`` on CancelTask and at
    shutdown.
    """

    @abc.abstractmethod
    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        """Do the work for one incoming message (on the agent's asyncio loop)."""

    async def cancel(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        """Stop the work on ``context.task_id``. The default marks it CANCELED."""
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


@dataclass(frozen=True, slots=True)
class _Ended:
    """The asyncio task's outcome, taken in its own loop: sent after its last event."""

    error: BaseException | None
    cancelled: bool


@dataclass(slots=True)
class _Loop:
    """The running loop of a bridge, and how to stop it."""

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Future[None]


class AsyncioBridge(AgentExecutor):
    """Runs an :class:`AsyncioAgentExecutor` on an asyncio loop of its own.

    The loop runs in a dedicated thread for as long as the host runs
    (:meth:`lifespan`). ``loop_factory`` makes the loop (``uvloop.new_event_loop``,
    say); the default is asyncio's. One bridge serves one host at a time.
    """

    def __init__(
        self,
        agent: AsyncioAgentExecutor,
        *,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> None:
        self.agent = agent
        self._loop_factory = loop_factory
        self._running: _Loop | None = None
        self._entered = False

    # --- the loop's lifetime ------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[object]:
        """Run the asyncio loop in its thread; stop it and join the thread on exit.

        On exit, asyncio tasks still running there (ones the agent left behind)
        are cancelled, as ``asyncio.run`` does.
        """
        if self._entered:
            raise RuntimeError(f"{self!r} already runs for a host; one host at a time")
        self._entered = True
        token = trio.lowlevel.current_trio_token()
        started, stopped = trio.Event(), trio.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            loop = asyncio.get_running_loop()
            self._running = _Loop(loop, loop.create_future())
            token.run_sync_soon(started.set)
            await self._running.stop

        def thread_main() -> None:
            try:
                with asyncio.Runner(loop_factory=self._loop_factory) as runner:
                    runner.run(main())
            except BaseException as error:
                failure.append(error)
            finally:
                token.run_sync_soon(started.set)
                token.run_sync_soon(stopped.set)

        name = f"{THREAD_NAME} for {type(self.agent).__name__}"
        thread = threading.Thread(target=thread_main, name=name, daemon=True)
        try:
            thread.start()
            with trio.CancelScope(shield=True):
                await started.wait()
            if failure:
                raise RuntimeError("the asyncio loop did not start") from failure[0]
            yield self
        finally:
            running = self._running
            if running is not None and not stopped.is_set():
                with contextlib.suppress(RuntimeError):  # the loop has closed already
                    running.loop.call_soon_threadsafe(_settle, running.stop)
            if thread.ident is not None:  # it was started: wait for its end
                with trio.CancelScope(shield=True):
                    await stopped.wait()
                thread.join()
            self._running = None
            self._entered = False

    def _loop(self) -> asyncio.AbstractEventLoop:
        if self._running is None:
            raise RuntimeError(
                "the asyncio loop is not running: mount the agent on an A2AApp "
                "(or enter AsyncioBridge.lifespan()) first"
            )
        return self._running.loop

    # --- executions ---------------------------------------------------------------

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        """Run the agent's ``execute`` on its asyncio loop, its events relayed to ``queue``."""
        await self._bridge(lambda bridged: self.agent.execute(context, bridged), queue)

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        """Run the agent's ``cancel`` on its asyncio loop, its events relayed to ``queue``."""
        await self._bridge(lambda bridged: self.agent.cancel(context, bridged), queue)

    async def _bridge(
        self,
        run: Callable[[AsyncioEventQueue], Coroutine[Any, Any, None]],
        queue: EventQueue,
    ) -> None:
        """Run ``run`` as an asyncio task and forward its events to ``queue`` in order."""
        loop = self._loop()
        crossing = _Crossing(trio.lowlevel.current_trio_token(), loop, CREDITS)
        bridged = AsyncioEventQueue(crossing)
        task: list[asyncio.Task[None]] = []

        def ended(done: asyncio.Task[None]) -> None:  # on the asyncio loop
            bridged.close()
            cancelled = done.cancelled()
            crossing.finish(_Ended(None if cancelled else done.exception(), cancelled))

        def start() -> None:  # on the asyncio loop
            task.append(loop.create_task(run(bridged)))
            task[0].add_done_callback(ended)

        def stop() -> None:  # on the asyncio loop, after start (call_soon is FIFO)
            if task:
                task[0].cancel()

        with crossing.receive:
            # `start` runs in a copy of this task's context, and its asyncio task in
            # a copy of that: the agent's code sees the execution's context
            # variables (its OpenTelemetry span, say), as a trio agent's does.
            loop.call_soon_threadsafe(start)
            try:
                outcome = await _forward(crossing, queue)
            except BaseException:
                # Cancelled (CancelTask, shutdown) or the host refused an event:
                # the asyncio task stops now, and is waited for.
                loop.call_soon_threadsafe(stop)
                with trio.CancelScope(shield=True):
                    async for item in crossing.receive:
                        if isinstance(item, _Ended):
                            break
                raise
        if outcome.error is not None:
            raise outcome.error
        if outcome.cancelled:
            raise RuntimeError("the agent's asyncio task was cancelled from within asyncio")


async def _forward(crossing: _Crossing, queue: EventQueue) -> _Ended:
    """Pass the events on to ``queue`` until the asyncio task's outcome arrives.

    Room is given back once per batch (what arrived together), not per event.
    """
    while True:
        item = await crossing.receive.receive()
        forwarded = 0
        while not isinstance(item, _Ended):
            await queue.enqueue_event(item)
            forwarded += 1
            try:
                item = crossing.receive.receive_nowait()
            except trio.WouldBlock:
                break
        if forwarded:
            crossing.forwarded(forwarded)
        if isinstance(item, _Ended):
            return item


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

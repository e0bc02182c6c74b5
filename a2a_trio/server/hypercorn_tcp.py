"""hypercorn's trio TCP server with five faults mended, a header timeout and two costs cut.

hypercorn (0.17 and 0.18, the newest) serves each connection of its trio
worker with a ``TCPServer``: a task that reads the socket and hands the
bytes to the connection's protocol (HTTP/1.1, or HTTP/2 after an upgrade),
in a nursery that also holds the protocol's tasks and an idle timer.
:class:`MendedTCPServer` removes four faults of it (1, 2, 3, 5), and adds
a header timeout (4); :class:`MendedH11Protocol` removes a fifth, of its
access log (8, after the costs):

1. **One connection's fault ends the server.** An exception out of a
   connection's tasks leaves ``TCPServer.run`` and reaches the worker's
   listener nursery, which ends the whole process (with ``--workers N``
   hypercorn then stops every worker). :mod:`.hypercorn_h2` catches those of
   an HTTP/2 connection once it runs, but not those of HTTP/1.1 or of the
   step between them. A client reaches two with a single request: a
   WebSocket handshake the app refuses (the console's feed without its
   token) followed by any byte before the refusal is sent in full, and an
   ``Upgrade: h2c`` whose ``HTTP2-Settings`` hold a value HTTP/2 forbids.
   Here any such fault is logged and closes that connection only.
2. **A connection the client closed stays open for the idle timeout.** After
   the client closes an idle connection (every pooled client does, and
   ``--keep-alive 75`` is there so that clients close first), the socket
   stays open in CLOSE-WAIT, with its tasks, until hypercorn's idle timer
   runs out ``keep_alive_timeout`` later (75 s): clients opening 14
   connections a second keep 1,024 descriptors busy, and the server then
   accepts no one. Here the idle timer stops when the reading ends.
3. **A client that stops reading holds its answer, and the server, for
   good.** Each write to the socket waits, shielded from cancellation, until
   the client takes it all: a client that never reads keeps the answer in
   memory (30 such connections asking for an 8 MB task: 290 MB) and its
   tasks alive, and a SIGTERM does not stop the server while it stays. Here
   a write that cannot hand :data:`.hypercorn_h2.SEND_PROGRESS` bytes to the
   client within its app's ``send_timeout`` seconds (:func:`install`)
   closes the connection.
4. **A request's head has as long as an idle connection.** hypercorn times
   a request line and headers with the idle timer, ``keep_alive_timeout``:
   75 s under ``a2a-trio serve``, so that clients, not the server, close
   idle connections. But then 1,008 clients that connect and send their
   headers slowly, or nothing, held a 1,024-descriptor process for 75 s.
   Here a new connection must complete its first request's head within
   ``header_timeout`` seconds (:func:`install`), and on HTTP/1.1 each later
   request's head within that long of its first byte; only the wait between
   requests is ``keep_alive_timeout`` long.
5. **After a Quart route, an idle connection has no idle timer.** hypercorn
   starts the timer when a request ends, from the app's task, inside the
   app's ``send`` of the answer's end; quart-trio cancels its request's
   nursery, that task's, when hypercorn puts ``http.disconnect`` just before.
   The timer, started in a cancelled scope, never ran: the connection stayed
   open for as long as its client kept it (a 404 was enough), and SIGTERM
   waited the whole ``graceful_timeout`` for it (15 s under ``a2a-trio
   serve``, 0.2 s otherwise). Here the timer (6) is armed and disarmed
   without a schedule point, which a cancelled scope cannot cut.

Two costs of every HTTP/1.1 request go too (6, 7); together they were some
15 % of the CPU a blocking SendMessage costs the server (docs/benchmarks.md):

6. **An idle timer task per request.** hypercorn cancels the connection's
   idle timer when a request begins and starts a new task for it (through
   ``nursery.start``, with a lock) when the answer is done, and again at
   the next request's first byte. Here one task per connection keeps the
   timer, and a request only moves its deadline.
7. **Three writes per answer.** hypercorn writes an answer's head, its
   body and its end (no bytes at all, for a body of declared length) to the
   socket one after another, each under a lock and two cancel scopes.
   Here the head of an answer with a ``Content-Length`` waits for its body
   and both go in one write (:class:`MendedH11Protocol`), an empty write is
   none, and a write takes the lock without a schedule point when it is free.

8. **An answer its client took in full is logged twice.** hypercorn logs a
   request when its stream closes: with the answer's status once the answer
   is written, or as ``- -`` (no answer) when the client closed first. A
   client that closes as soon as it has read the answer (curl, any client
   not pooling) often does so while the stream is still between its last
   write and its end: the stream then logs the request as unanswered, then
   again with its status (16 of 40 such requests on stock 0.18.0). Here a
   close that comes once the answer's last byte is written leaves the
   stream to end the answer, and log it, first (:class:`MendedH11Protocol`).

With them, :mod:`.hypercorn_disconnect` tells an app of its client's
disconnect without a task of the app's waiting for it.

:func:`install` puts the classes where hypercorn's trio worker finds them;
:class:`a2a_trio.A2AApp` installs it when it is built (before the worker
starts accepting), next to :func:`.hypercorn_h2.install`, for the hypercorn
releases it was written against (:data:`.hypercorn_release.MENDED_VERSIONS`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from functools import cache
from typing import Any

import h11
import hypercorn.protocol
import hypercorn.trio.run
import hypercorn.trio.tcp_server
import trio
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer

from . import hypercorn_disconnect
from .hypercorn_h2 import SEND_PROGRESS, SEND_TIMEOUT, send_timeout_for, set_send_timeout
from .hypercorn_release import mendable

__all__ = ["HEADER_TIMEOUT", "MendedH11Protocol", "MendedTCPServer", "install", "installed"]

#: Seconds a request line and headers may take (see the module docstring, 4).
HEADER_TIMEOUT = 10.0
#: How long the usual clients keep an idle connection (httpx and Node: 5 s). A
#: server that keeps it no longer closes some under a request sent at that
#: instant, and no client retries a POST (server/serving.py, KEEP_ALIVE_TIMEOUT).
CLIENT_KEEP_ALIVE = 5.0

_log = logging.getLogger("a2a_trio.server")


@cache
def _warn_short_keep_alive(seconds: float) -> None:
    """Say once (per value) that ``keep_alive_timeout`` races the clients' own."""
    _log.warning(
        "hypercorn's keep_alive_timeout is %g s, no longer than the clients' idle timeout"
        " (httpx and Node: %g s): under load the server closes some kept-alive connections"
        " under a request sent at that instant, and the client sees 'Server disconnected'."
        " Serve with --keep-alive 75 (docs/deployment.md), as a2a-trio serve does.",
        seconds,
        CLIENT_KEEP_ALIVE,
    )


class MendedTCPServer(TCPServer):
    """hypercorn's trio ``TCPServer``, its connection's faults its own (module docstring)."""

    _reading = True
    #: Seconds a write may take to hand SEND_PROGRESS bytes over (fault 3): its app's.
    send_timeout = SEND_TIMEOUT
    #: Seconds a request's head may take (4; set by install; never past keep_alive_timeout).
    header_timeout = HEADER_TIMEOUT
    #: Whether the idle timer runs between requests (keep_alive_timeout) rather
    #: than for a request's head (header_timeout): not before the first answer.
    _between_requests = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.config.keep_alive_timeout <= CLIENT_KEEP_ALIVE:
            _warn_short_keep_alive(self.config.keep_alive_timeout)
        self.send_timeout = send_timeout_for(self.app)
        self._idle = _IdleTimer(self._idle_limit, self._initiate_server_close, self.context)
        self.idle_task = self._idle  # type: ignore[assignment]  # hypercorn's calls fit

    # -- fault 1: a connection's fault closes that connection -------------------

    async def run(self) -> None:
        try:
            await super().run()  # which closes the socket, whatever happens
        except* Exception:
            # Cancellation (the server's shutdown) passes on untouched.
            await self.config.log.exception("a connection failed; closing it")

    # -- fault 2: no idle timer once the client is gone --------------------------

    async def _read_data(self) -> None:
        # hypercorn's loop (TCPServer._read_data), with the head's timer (4).
        read_timeout = self.config.read_timeout
        while True:
            try:
                if not read_timeout:  # no deadline: no cancel scope per read
                    data = await self.stream.receive_some(MAX_RECV)
                else:
                    with trio.fail_after(read_timeout):
                        data = await self.stream.receive_some(MAX_RECV)
            except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                break
            if data and self._between_requests and isinstance(self.protocol.protocol, H11Protocol):
                # The first byte of the next request: its head is timed now.
                self._between_requests = False
                await self.idle_task.restart(self._task_group, self._idle_timeout)
            await self.protocol.handle(RawData(bytes(data)))
            if data == b"":
                break
        await self.protocol.handle(Closed())
        # The client closed (or the read failed) and the protocol was told:
        # the connection ends with its last stream, and an idle timer would
        # only keep its socket open until it ran out.
        self._reading = False
        self._idle.end()

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData):
            await self._send(event.data)
        elif isinstance(event, Updated) and not self._reading:
            return  # a stream ending after the client left restarts no timer
        else:
            if isinstance(event, Updated):
                self._between_requests = event.idle
            # Fault 5: an Updated is sent by the task that sent the answer's
            # end, the app's, under the app's cancel scopes; the timer's
            # restart and stop (_IdleTimer) make no schedule point, so a
            # cancelled app cannot cancel them.
            await super().protocol_send(event)

    # -- 4: a request's head is timed apart from the wait between requests -------

    def _idle_limit(self) -> float:
        limit: float = self.config.keep_alive_timeout
        if not self._between_requests:
            limit = min(limit, self.header_timeout)
        return limit

    # -- fault 3: a client that takes nothing is let go (and 7: writes cost less) --

    async def _send(self, data: bytes) -> None:
        if not data:  # h11 ends a body of declared length with no bytes
            return
        # As trio.Lock.acquire, a cancelled task writes nothing (hypercorn's
        # 500 for an app task cut off by the server's graceful_timeout, say);
        # but a free lock is taken without a schedule point: the write makes one.
        await trio.lowlevel.checkpoint_if_cancelled()
        lock = self.send_lock
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:
            await lock.acquire()
        try:
            await self._send_or_give_up(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await self.protocol.handle(Closed())
        finally:
            lock.release()

    async def _send_or_give_up(self, data: bytes) -> None:
        view = memoryview(data)
        for start in range(0, len(view), SEND_PROGRESS):
            # Shielded as hypercorn's: a write cut short by a cancellation
            # would leave the client half a frame. Only its own deadline,
            # which closes the connection, may cut it.
            deadline = trio.current_time() + self.send_timeout
            with trio.CancelScope(shield=True, deadline=deadline) as waiting:
                await self.stream.send_all(view[start : start + SEND_PROGRESS])
            if waiting.cancelled_caught:
                await trio.aclose_forcefully(self.stream)
                raise trio.BrokenResourceError("the client stopped reading")


class _IdleTimer:
    """The connection's idle timer (6): hypercorn's ``TrioSingleTask``, with one task.

    :meth:`restart` arms it (``limit()`` seconds from now), :meth:`stop`
    disarms it while a request is served; armed, it closes the connection
    when its time is up or when the worker is told to stop, as hypercorn's
    timer task does. :meth:`end` lets its task go with the connection.

    Arming and disarming only note the time that is due: they move the task's
    deadline only when it must come earlier (a request's head, timed shorter
    than the wait between requests, or the first arming). A deadline that
    passes finds the time due moved on, or the timer disarmed, and sets the
    next; so a connection busy with request after request moves no deadline
    (each move is a change of trio's deadline heap), the timer wakes once per
    limit at most.
    """

    def __init__(
        self,
        limit: Callable[[], float],
        close: Callable[[], Any],
        context: Any,
    ) -> None:
        self._limit = limit
        self._close = close
        self._context = context
        #: Its task's scope: its deadline is at or before the time due (inf: none).
        self._scope: trio.CancelScope | None = None
        self._armed = False
        #: When the armed timer runs out.
        self._due = math.inf
        #: Set when the timer is armed again after the worker was told to stop.
        self._rearmed: trio.Event | None = None
        self._ended = False

    async def restart(self, task_group: Any, action: object = None) -> None:
        """Arm the timer (``action``, hypercorn's timer function, is not needed)."""
        if self._ended:
            return
        self._armed = True
        self._due = trio.current_time() + self._limit()
        if self._scope is None:
            self._scope = trio.CancelScope(deadline=self._due)
            task_group.spawn(self._run)
        elif self._due < self._scope.deadline:
            self._scope.deadline = self._due
        if self._rearmed is not None:
            self._rearmed.set()

    async def stop(self) -> None:
        """Disarm the timer: a request is being served (its deadline, passing, sees it)."""
        self._armed = False

    def end(self) -> None:
        """The connection is over: the timer's task ends, closing nothing."""
        self._ended = True
        if self._scope is not None:
            self._scope.cancel()

    async def _run(self) -> None:
        terminated = self._context.terminated
        while True:
            assert self._scope is not None
            with self._scope:
                while True:
                    await terminated.wait()
                    if self._armed:
                        break
                    # Told to stop while a request is served: close once idle.
                    self._rearmed = trio.Event()
                    await self._rearmed.wait()
            if self._ended:
                return
            if not self._scope.cancelled_caught:
                break  # the worker was told to stop while the timer was armed
            if self._armed and trio.current_time() >= self._due:
                break  # its time is up
            # A deadline passed early: the time due moved on, or a request is served.
            self._scope = trio.CancelScope(deadline=self._due if self._armed else math.inf)
        with trio.CancelScope(shield=True):
            await self._close()


class MendedH11Protocol(H11Protocol):
    """hypercorn's ``H11Protocol``, writing an answer's head with its body (7),
    and logging an answer its client took in full once (8).

    The head of an answer that declares its length is held until the next
    write, which the body (or, for an empty one, its end) makes at once.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._write = self.send
        self.send = self._send_after_head
        self._head = b""
        #: Bytes of the answer's declared length not written yet (None: no length).
        self._unwritten: int | None = None
        #: Whether the answer's last byte is written, or being written.
        self._answered = False

    async def handle(self, event: Event) -> None:
        if isinstance(event, Closed) and self.stream is not None and self._answered:
            # (8) The client closed as soon as it had the whole answer, while the
            # stream is still ending it: it logs the answer and closes itself next
            # (its StreamClosed recycles the connection, which closes it now).
            return
        await super().handle(event)

    async def _send_h11_event(self, event: Any) -> None:
        if isinstance(event, h11.Response):
            self._unwritten = _declared_length(event.headers)
            self._answered = False
        elif isinstance(event, h11.Data) and self._unwritten is not None:
            self._unwritten -= len(event.data)
            self._answered = self._unwritten <= 0
        elif isinstance(event, h11.EndOfMessage):
            self._answered = True
        if isinstance(event, h11.Response) and self._unwritten is not None:
            try:
                self._head += self.connection.send(event)
            except h11.LocalProtocolError:  # as hypercorn's
                if self.connection.their_state != h11.ERROR:
                    raise
            return
        await super()._send_h11_event(event)

    async def _send_after_head(self, event: Event) -> None:
        if self._head:
            head, self._head = self._head, b""
            if isinstance(event, RawData):
                event = RawData(data=head + event.data)
            else:
                await self._write(RawData(data=head))
        await self._write(event)


def _declared_length(headers: Any) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # h11 refuses it when it writes the head
    return None


def installed() -> bool:
    """Whether hypercorn's trio worker serves connections with :class:`MendedTCPServer`."""
    return (
        vars(hypercorn.trio.run)["TCPServer"] is MendedTCPServer
        and vars(hypercorn.protocol)["H11Protocol"] is MendedH11Protocol
        and vars(hypercorn.trio.tcp_server)["TaskGroup"] is hypercorn_disconnect.MendedTaskGroup
    )


def install(
    app: object | None = None,
    send_timeout: float = SEND_TIMEOUT,
    header_timeout: float = HEADER_TIMEOUT,
) -> bool:
    """Make hypercorn's trio worker serve connections with :class:`MendedTCPServer`.

    ``send_timeout``: seconds a write to a client of ``app`` may take to hand
    ``SEND_PROGRESS`` bytes over (fault 3); each app keeps its own
    (:func:`.hypercorn_h2.set_send_timeout`). ``header_timeout``: seconds a
    request's head may take (4), for every connection of the process from
    now on (the last app built decides it). Idempotent; effective for the
    servers started after it. Returns whether it is installed: not for a
    hypercorn release outside ``MENDED_VERSIONS``.
    """
    if app is not None:
        set_send_timeout(app, send_timeout)
    MendedTCPServer.header_timeout = header_timeout
    if mendable():
        # Where worker_serve looks the class up when it starts listening, and
        # where ProtocolWrapper looks its HTTP/1.1 protocol up for each connection.
        setattr(hypercorn.trio.run, "TCPServer", MendedTCPServer)  # noqa: B010
        setattr(hypercorn.protocol, "H11Protocol", MendedH11Protocol)  # noqa: B010
        hypercorn_disconnect.install()
    return installed()

"""hypercorn's trio TCP server with four faults mended, for a2a-trio's servers.

hypercorn (0.17 and 0.18, the newest) serves each connection of its trio
worker with a ``TCPServer``: a task that reads the socket and hands the
bytes to the connection's protocol (HTTP/1.1, or HTTP/2 after an upgrade),
in a nursery that also holds the protocol's tasks and an idle timer.
:class:`MendedTCPServer` removes four faults of it (1, 2, 3, 5), and adds
a header timeout (4):

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
   serve``, 0.2 s otherwise). Here the timer starts shielded.

:func:`install` puts the class where hypercorn's trio worker finds it;
:class:`a2a_trio.A2AApp` installs it when it is built (before the worker
starts accepting), next to :func:`.hypercorn_h2.install`, for the hypercorn
releases it was written against (:data:`.hypercorn_release.MENDED_VERSIONS`).
"""

from __future__ import annotations

import math
from typing import Any

import hypercorn.trio.run
import trio
from hypercorn.events import Closed, Event, RawData, Updated
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.tcp_server import MAX_RECV, TCPServer

from .hypercorn_h2 import SEND_PROGRESS, SEND_TIMEOUT, send_timeout_for, set_send_timeout
from .hypercorn_release import mendable

__all__ = ["HEADER_TIMEOUT", "MendedTCPServer", "install", "installed"]

#: Seconds a request line and headers may take (see the module docstring, 4).
HEADER_TIMEOUT = 10.0


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
        self.send_timeout = send_timeout_for(self.app)

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
        while True:
            try:
                with trio.fail_after(self.config.read_timeout or math.inf):
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
        await self.idle_task.stop()

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, RawData):
            await self._send(event.data)
        elif isinstance(event, Updated) and not self._reading:
            return  # a stream ending after the client left restarts no timer
        elif isinstance(event, Updated):
            self._between_requests = event.idle
            # Fault 5: the idle timer is started by the task that sent the
            # answer's end, the app's, under the app's cancel scopes; shielded,
            # it starts even when the app is being cancelled.
            with trio.CancelScope(shield=True):
                await super().protocol_send(event)
        else:
            await super().protocol_send(event)

    # -- 4: a request's head is timed apart from the wait between requests -------

    async def _idle_timeout(self) -> None:
        limit = self.config.keep_alive_timeout
        if not self._between_requests:
            limit = min(limit, self.header_timeout)
        with trio.move_on_after(limit):
            await self.context.terminated.wait()
        with trio.CancelScope(shield=True):
            await self._initiate_server_close()

    # -- fault 3: a client that takes nothing is let go ---------------------------

    async def _send(self, data: bytes) -> None:
        async with self.send_lock:
            try:
                # Shielded as hypercorn's: a write cut short by a cancellation
                # would leave the client half a frame. Only its own deadline,
                # which closes the connection, may cut it.
                with trio.CancelScope(shield=True):
                    await self._send_or_give_up(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await self.protocol.handle(Closed())

    async def _send_or_give_up(self, data: bytes) -> None:
        view = memoryview(data)
        for start in range(0, len(view), SEND_PROGRESS):
            with trio.move_on_after(self.send_timeout) as waiting:
                await self.stream.send_all(view[start : start + SEND_PROGRESS])
            if waiting.cancelled_caught:
                await trio.aclose_forcefully(self.stream)
                raise trio.BrokenResourceError("the client stopped reading")


def installed() -> bool:
    """Whether hypercorn's trio worker serves connections with :class:`MendedTCPServer`."""
    return vars(hypercorn.trio.run)["TCPServer"] is MendedTCPServer


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
        # Where worker_serve looks the class up when it starts listening.
        setattr(hypercorn.trio.run, "TCPServer", MendedTCPServer)  # noqa: B010
    return installed()

"""hypercorn's HTTP/2 connection: seven faults mended and two costs cut, for a2a-trio.

hypercorn (0.17 and 0.18, the newest) keeps each response stream in a
priority tree that its sending task walks, and takes a stream out only on a
visit after the stream has ended. Six faults follow from that and from its
bookkeeping, and a seventh from the order of its stream's last steps; this
module's :class:`MendedH2Protocol` removes each:

1. **Ended streams pile up.** A stream ended by its trailers (every gRPC
   answer), or whose body ended after its last chunk went out, or that the
   client reset, waits for one more visit to leave the tree. Under steady
   load the tree serves the newest streams first, so those visits never
   come; at 1,000 streams ``priority.TooManyStreamsError`` escapes the
   connection. Here a stream leaves the tree the moment it ends.
2. **PRIORITY frames add streams.** Each PRIORITY frame for a stream that is
   not open adds one to the tree for good, so one client sending 1,000 of
   them (a few kilobytes) raises the same error. RFC 9113 (5.3.2) deprecates
   that priority scheme and lets a server ignore it; here it is ignored.
3. **Body after the answer fails the connection.** A client that goes on
   sending a request's body after the server answered it (a 404, a 413)
   makes hypercorn look up a stream it has dropped. Here that body is
   dropped and its flow-control window given back.
4. **One connection's fault ends the server.** The trio worker lets an
   exception out of a connection's tasks end the whole process, and with
   ``--workers N`` hypercorn then stops every worker: faults 1 to 3 were
   each a way for one client to stop a server. Here any such fault is
   logged and closes that connection only.
5. **The request limit breaks calls in flight.** After
   ``keep_alive_max_requests`` (1,000) requests hypercorn sends GOAWAY with
   calls in flight; h2 then refuses every later frame of the connection, so
   those calls fail and the client's next frame is a protocol error. Here
   the connection is retired at its first idle moment after the limit, with
   a GOAWAY that leaves h2 open: a call the client sent before it arrived is
   refused (``REFUSED_STREAM``, which clients retry), not broken. The
   GOAWAY names the last stream handed to an app, and waits until the
   events of a read are all handed out: h2 parses a whole read at once, and
   a call of it that its app never saw but the GOAWAY covered (h2's
   ``highest_inbound_stream_id``) was refused as if it might have been
   processed, which grpcio reports as failed instead of retrying it. The
   GOAWAY leaves with the last answers, in one write: a client that read
   the answers first opened new calls there, to have them refused.
6. **A client that stops reading holds its answers for good.** A client
   that never opens its flow-control window (``INITIAL_WINDOW_SIZE`` 0, or
   no WINDOW_UPDATE) leaves every answer on the connection waiting in
   memory, with the app task that made it: 100 streams of one connection,
   each asking for an 8 MB task, held 1.5 GB until the client left. Here a
   stream with data waiting that cannot send :data:`SEND_PROGRESS` bytes
   within its app's ``send_timeout`` seconds (:func:`install`) is reset
   (CANCEL), its data dropped and its app told the client is gone.

7. **An answer its client took in full is logged twice.** A client that
   closes as soon as it has a whole answer (curl's HTTP/2) often does so
   while the stream is still between its END_STREAM and its end, and the
   request was logged as unanswered (``- -``), then again with its status
   (6 to 13 of 40; :mod:`.hypercorn_tcp`'s fault 8 on HTTP/1.1). Here a
   stream whose app has ended its answer is left to close itself.

Beneath the mends, :class:`.hypercorn_h2_writes.FewerWrites` writes an
answer in fewer writes: a unary gRPC answer in one (its module docstring);
and :class:`.hypercorn_h2_turns.SendingTurns` stands for the priority tree,
a round robin whose cost does not grow with the streams in flight;
:mod:`.h2_hpack` gives each connection hpack's blocks for less Python.

:func:`install` puts the class where hypercorn's connections find their
HTTP/2 protocol; :class:`a2a_trio.A2AApp` installs it when it is built, so
``hypercorn --worker-class trio a2a_trio:app`` and :func:`a2a_trio.server.serve`
both get it. It is installed only for the hypercorn releases it was written
against (:data:`.hypercorn_release.MENDED_VERSIONS`); on any other,
:func:`install` puts :class:`Http11Required` there instead, which refuses
HTTP/2, since faults 1 to 4 let one client stop the server.
"""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import hypercorn.protocol
import trio
from hypercorn.events import Closed, Event, RawData
from hypercorn.protocol.events import EndBody, EndData, StreamClosed, Trailers
from hyperframe.frame import GoAwayFrame
from priority.priority import MissingStreamError

from . import h2_hpack
from .hypercorn_h2_turns import SendingTurns
from .hypercorn_h2_writes import SENDING_FAULTS, FewerWrites
from .hypercorn_release import MENDED_VERSIONS, mendable

if TYPE_CHECKING:
    from hypercorn.protocol.events import Event as StreamEvent

__all__ = [
    "MENDED_VERSIONS",
    "SEND_PROGRESS",
    "SEND_TIMEOUT",
    "Http11Required",
    "MendedH2Protocol",
    "install",
    "installed",
    "mendable",
    "send_timeout_for",
    "set_send_timeout",
]

#: Seconds a client may take to accept :data:`SEND_PROGRESS` bytes of an
#: answer waiting for it before the server gives that answer up (the default
#: of ``server.send_timeout``).
SEND_TIMEOUT = 60.0
#: The bytes that count as progress: a client reading slower than this every
#: ``send_timeout`` seconds (273 bytes a second at 60 s) is as good as gone.
SEND_PROGRESS = 16 * 1024

#: Each app's ``send_timeout``, given to :func:`install` when the app is built.
_SEND_TIMEOUTS: WeakKeyDictionary[object, float] = WeakKeyDictionary()
#: How many ASGI wrappers (hypercorn's own, middleware) to look through for the app.
_WRAPPERS = 8


def set_send_timeout(app: object, seconds: float) -> None:
    """Give ``app``'s connections ``seconds`` as their ``send_timeout`` (both mends read it)."""
    _SEND_TIMEOUTS[app] = seconds


def send_timeout_for(app: object) -> float:
    """The ``send_timeout`` of the app a connection serves, :data:`SEND_TIMEOUT` if none was given.

    ``app`` is what hypercorn serves: the app :func:`install` was given, or a
    wrapper around it (hypercorn's own, ASGI middleware) that keeps it as ``app``.
    """
    for _ in range(_WRAPPERS):
        with suppress(TypeError):  # an object a weak reference cannot point to
            if app in _SEND_TIMEOUTS:
                return _SEND_TIMEOUTS[app]
        app = getattr(app, "app", None)
        if app is None:
            break
    return SEND_TIMEOUT


class MendedH2Protocol(FewerWrites):
    """hypercorn's ``H2Protocol``, ending each stream's sending at once (module docstring)."""

    _retiring = False
    _goaway_sent = False
    #: Whether the reading task is handing out the events of a read (fault 5).
    _handling = False
    #: The highest stream handed to its app (fault 5).
    _last_served = 0
    #: Seconds a stream may wait to send SEND_PROGRESS bytes (fault 6): its app's.
    send_timeout = SEND_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Whose turn it is to send: a round robin for hypercorn's priority tree.
        self.priority = SendingTurns()  # type: ignore[assignment]
        # The same header blocks as hpack's, with less Python (on a checked hpack).
        h2_hpack.install(self.connection)
        self.send_timeout = send_timeout_for(self.app)
        #: Streams whose data waits for the client's window: each one's
        #: deadline, and the bytes it must still send to be clear (fault 6).
        self._stalls: dict[int, tuple[float, int]] = {}
        #: Streams whose app has ended its answer and not yet closed (fault 7).
        self._ending: set[int] = set()
        self._stall_watch: trio.CancelScope | None = None
        self._watching = False

    # -- fault 1: a stream leaves the sending tree when it ends ------------------

    async def stream_send(self, event: StreamEvent) -> None:
        if isinstance(event, Trailers):
            self._ending.add(event.stream_id)  # (7)
            await super().stream_send(event)
            # The trailers ended the stream: nothing more goes out on it, and
            # the EndBody that follows finds it gone.
            await self._forget(event.stream_id)
        elif isinstance(event, EndBody | EndData):
            if isinstance(event, EndBody):  # an HTTP answer's (a WebSocket's ends with EndData)
                self._ending.add(event.stream_id)  # (7)
            await self._end_body(event.stream_id)
        elif isinstance(event, StreamClosed):
            self._ending.discard(event.stream_id)  # (7): it closes itself, as in hypercorn
            await super().stream_send(event)
        else:
            await super().stream_send(event)

    async def _end_body(self, stream_id: int) -> None:
        buffer = self.stream_buffers.get(stream_id)
        if buffer is None:  # reset, or ended by its trailers
            return
        buffer.set_complete()
        with suppress(MissingStreamError):
            self.priority.unblock(stream_id)
        await self.has_data.set()
        await buffer.drain()
        # Every byte is with h2 now. If the sending task has not ended the
        # stream meanwhile, end it here rather than wait for its next visit.
        if self.stream_buffers.get(stream_id) is buffer:
            await self._end_stream(stream_id)

    async def _end_stream(self, stream_id: int) -> None:
        """Take ``stream_id`` out of the sending side, then send its END_STREAM."""
        await self._forget(stream_id)
        with suppress(*SENDING_FAULTS):
            self.connection.end_stream(stream_id)
            await self._flush()

    async def _send_data(self, stream_id: int) -> None:
        buffer = self.stream_buffers.get(stream_id)
        if buffer is None:  # ended while it waited for this visit
            with suppress(MissingStreamError):
                self.priority.remove_stream(stream_id)
            return
        try:
            chunk_size = min(
                self.connection.local_flow_control_window(stream_id),
                self.connection.max_outbound_frame_size,
            )
            data = await buffer.pop(max(0, chunk_size))
            if data:
                self.connection.send_data(stream_id, data)
                await self._flush()
            else:
                with suppress(MissingStreamError):
                    self.priority.block(stream_id)
            if self.stream_buffers.get(stream_id) is not buffer:
                return  # ended (or reset) while this visit flushed
            if buffer.complete:
                await self._end_stream(stream_id)
            else:
                self._note_progress(stream_id, len(data), waiting=bool(buffer.buffer))
        except SENDING_FAULTS:
            # Closed while this visit waited to send: not a fault of ours.
            await self._forget(stream_id)

    async def _close_stream(self, stream_id: int) -> None:
        if stream_id in self._ending:
            # (7) The client reset the stream, or closed the connection, once
            # its answer was ending: the stream ends it, logs it with its
            # status, and closes itself next (its StreamClosed, just above).
            return
        await super()._close_stream(stream_id)
        if stream_id in self.stream_buffers:
            # Reset by the client, or the connection closed, or the app gave
            # up mid-body: nothing will end it, so it leaves the tree now
            # (and the client, if it still waits, is told the stream is gone).
            await self._forget(stream_id)
            if not self.closed:
                with suppress(*SENDING_FAULTS):
                    self.connection.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)
                    await self._flush()
        await self._retire_if_idle()

    async def _forget(self, stream_id: int) -> None:
        """Take ``stream_id`` out of the sending side; idempotent."""
        buffer = self.stream_buffers.pop(stream_id, None)
        with suppress(MissingStreamError):
            self.priority.remove_stream(stream_id)
        self._stalls.pop(stream_id, None)
        if buffer is not None:
            await buffer.close()  # frees an app task waiting for room in it

    # -- fault 2: priority signals are ignored ----------------------------------

    async def _priority_updated(self, event: h2.events.PriorityUpdated) -> None:
        # Every stream keeps the default weight (RFC 9113, 5.3.2).
        return

    # -- fault 3: body after the answer is dropped --------------------------------

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        # While these are handed out, a retiring connection waits (fault 5):
        # a request h2 has read but its app not yet seen would be refused.
        self._handling = True
        try:
            await self._hand_out(events)
        finally:
            self._handling = False
        await self._retire_if_idle()

    async def _hand_out(self, events: list[h2.events.Event]) -> None:
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                # Body for a request already answered (or reset): hypercorn
                # looks the stream up and fails. Drop it, but give the window back.
                with suppress(*SENDING_FAULTS):
                    self.connection.acknowledge_received_data(
                        event.flow_controlled_length, event.stream_id
                    )
            elif isinstance(event, h2.events.RequestReceived) and self._goaway_sent:
                await self._refuse(event.stream_id)
            else:
                await super()._handle_events([event])

    # -- fault 4: a connection's fault closes that connection ------------------

    async def handle(self, event: Event) -> None:
        try:
            await super().handle(event)
        except Exception:
            await self._fail("an HTTP/2 connection failed reading")
        if isinstance(event, Closed):
            self._stop_watching()

    async def send_task(self) -> None:
        try:
            await super().send_task()
        except Exception:
            await self._fail("an HTTP/2 connection failed sending")

    async def _fail(self, what: str) -> None:
        await self.config.log.exception(f"{what}; closing it")
        self.closed = True
        self._stop_watching()
        await self.has_data.set()
        await self.send(Closed())

    # -- fault 5: the request limit retires the connection when it is idle ------

    async def _create_stream(self, request: h2.events.RequestReceived) -> None:
        # The GOAWAY names the last stream served, not h2's last one received:
        # h2 parses a whole read at once, and a stream of it not yet handed to
        # its app when the connection retires is refused -- and must be above
        # the GOAWAY's last stream, or the client takes it as maybe processed.
        self._last_served = max(self._last_served, request.stream_id)
        await super()._create_stream(request)
        if self.keep_alive_requests > self.config.keep_alive_max_requests:
            # hypercorn closes the connection as soon as its count passes the
            # limit; keeping the count under it keeps the calls in flight.
            self._retiring = True
            self.keep_alive_requests = 0

    async def _retire_if_idle(self) -> None:
        if (
            self._retiring
            and not self._goaway_sent
            and not self.streams
            and not self._handling
            and not self.closed
        ):
            # GOAWAY, but not through h2's close_connection(): that makes h2
            # refuse every later frame, and a call the client sent before the
            # GOAWAY reached it would end in a protocol error. Streams opened
            # after it are refused instead (REFUSED_STREAM: safe to retry),
            # and the client closes the connection when it is done with it.
            # The GOAWAY leaves in one write with what h2 holds (the last
            # answers, see FewerWrites): the client reads it before it opens
            # another call on seeing them answered, which would be refused.
            goaway = GoAwayFrame(stream_id=0, last_stream_id=self._last_served)
            self._goaway_sent = True
            await self.send(RawData(data=self.connection.data_to_send() + goaway.serialize()))

    async def _refuse(self, stream_id: int) -> None:
        with suppress(*SENDING_FAULTS):
            self.connection.reset_stream(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            await self._flush()

    # -- fault 6: an answer the client does not take is given up ---------------

    def _note_progress(self, stream_id: int, sent: int, *, waiting: bool) -> None:
        """After a visit to ``stream_id``: ``sent`` bytes went out, data is ``waiting`` or not."""
        stall = self._stalls.get(stream_id)
        if stall is not None:
            deadline, owed = stall
            if waiting and owed > sent:
                self._stalls[stream_id] = (deadline, owed - sent)
                return
            del self._stalls[stream_id]  # it made its progress, or sent all it had
        if waiting and self.connection.local_flow_control_window(stream_id) <= 0:
            deadline = trio.current_time() + self.send_timeout
            self._stalls[stream_id] = (deadline, SEND_PROGRESS)
            if not self._watching:
                self._watching = True
                self.task_group.spawn(self._give_up_stalls)

    async def _give_up_stalls(self) -> None:
        # One task per connection while any stream stalls. A stall begun later
        # ends later, so waking for the first deadline never misses one; the
        # connection's close cancels the wait, which must not hold it open.
        with trio.CancelScope() as self._stall_watch:
            while self._stalls and not self.closed:
                await trio.sleep_until(min(deadline for deadline, _ in self._stalls.values()))
                now = trio.current_time()
                for stream_id, (deadline, _) in list(self._stalls.items()):
                    if deadline <= now:
                        await self._give_up(stream_id)
        self._stall_watch = None
        self._watching = False

    async def _give_up(self, stream_id: int) -> None:
        await self._forget(stream_id)  # its data goes, its app's sends return
        with suppress(*SENDING_FAULTS):
            self.connection.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
            await self._flush()
        await self._close_stream(stream_id)  # its app sees the client gone

    def _stop_watching(self) -> None:
        if self._stall_watch is not None:
            self._stall_watch.cancel()


class Http11Required:
    """Stands for hypercorn's HTTP/2 protocol on a release the mends do not cover.

    Every connection that turns to HTTP/2 (TLS with ALPN ``h2``, prior
    knowledge, an ``Upgrade: h2c``) is answered with the server's preface and
    a GOAWAY whose code is ``HTTP_1_1_REQUIRED`` (RFC 9113, 7), then closed.
    It relies only on what every hypercorn release since 0.11 shares: the
    connection's ``send`` callable is the last argument, and takes
    ``RawData`` and ``Closed``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._send = kwargs["send"] if "send" in kwargs else args[-1]

    async def initiate(self, *args: Any, **kwargs: Any) -> None:
        """Refuse the connection: preface, GOAWAY (HTTP_1_1_REQUIRED), close."""
        connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
        connection.initiate_connection()
        connection.close_connection(h2.errors.ErrorCodes.HTTP_1_1_REQUIRED)
        await self._send(RawData(data=connection.data_to_send()))
        await self._send(Closed())

    async def handle(self, event: Event) -> None:
        """Whatever the client sends after the refusal is dropped."""


def installed() -> bool:
    """Whether hypercorn's connections use :class:`MendedH2Protocol`."""
    return vars(hypercorn.protocol)["H2Protocol"] is MendedH2Protocol


def install(app: object | None = None, send_timeout: float = SEND_TIMEOUT) -> bool:
    """Make hypercorn's connections speak HTTP/2 through :class:`MendedH2Protocol`.

    ``send_timeout``: seconds a stream of ``app`` may take to send
    :data:`SEND_PROGRESS` bytes to a client that does not open its window
    (fault 6); each app keeps its own. Idempotent. Returns whether the mend
    is installed: not for a hypercorn release outside
    :data:`.hypercorn_release.MENDED_VERSIONS`, whose internals it was not
    written for; there :class:`Http11Required` refuses HTTP/2 instead.
    """
    if app is not None:
        set_send_timeout(app, send_timeout)
    # Where ProtocolWrapper looks the class up for each new connection.
    protocol = MendedH2Protocol if mendable() else Http11Required
    setattr(hypercorn.protocol, "H2Protocol", protocol)  # noqa: B010
    return installed()

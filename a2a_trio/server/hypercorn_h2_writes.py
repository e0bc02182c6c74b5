"""hypercorn's HTTP/2 sending in fewer writes: a unary gRPC answer in one.

hypercorn's ``H2Protocol`` writes an answer's head at once, its body from the
connection's sending task, and its trailers after that: three writes to the
socket for a gRPC answer (each with a lock, cancel scopes and a system call),
and the client reads them as three. Its sending task visits every stream
given body, and every stream on each WINDOW_UPDATE of the connection, to find
most of them with nothing to send. :class:`FewerWrites`, beneath
:class:`.hypercorn_h2.MendedH2Protocol`:

- holds an answer's head in h2 until the next write; the sending task writes
  what h2 holds whenever it runs out of streams to send, so a head alone (a
  stream's, before its first event) waits only until its app yields;
- lets trailers take the body still buffered with them when the client's
  window has room for it, and leaves the write to the sending task, which
  writes every answer ended in one scheduling pass at once;
- visits a stream only while data waits in its buffer;
- leaves out h2's checks of the header blocks it sends (kept: their
  normalisation), which hold for every answer of this app.

A unary gRPC answer leaves in one write, and the answers of the calls one
recorder round ended leave together, so the client sends its next calls
together and they share the next round.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import h2.exceptions
from hypercorn.protocol import h2 as hypercorn_h2
from hypercorn.protocol.events import Body, Response, Trailers
from hypercorn.protocol.h2 import BufferCompleteError
from priority.priority import DeadlockError, MissingStreamError

if TYPE_CHECKING:
    from hypercorn.protocol.events import Event as StreamEvent

__all__ = ["SENDING_FAULTS", "FewerWrites"]

#: What h2 raises for a stream (or connection) closed while a write waited.
SENDING_FAULTS = (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError)


class FewerWrites(hypercorn_h2.H2Protocol):
    """hypercorn's ``H2Protocol``, sending an answer in as few writes as it can (module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # h2 checks each header block going out against HTTP/2's rules, after
        # normalising it (names lowercased, connection headers stripped). What
        # the checks still catch (a ``te`` other than trailers, pseudo-headers
        # other than hypercorn's ``:status``, a request's host and path) no
        # answer of this app has; they cost a gRPC call ~1 % of its instructions.
        self.connection.config.validate_outbound_headers = False
        #: Streams given body since the sending task last looked.
        self._fresh: set[int] = set()

    async def stream_send(self, event: StreamEvent) -> None:
        if isinstance(event, Response):
            self._hold_head(event)
            await self.has_data.set()  # the sending task writes it if nothing else does
        elif isinstance(event, Body):
            await self._push_body(event)
        elif isinstance(event, Trailers):
            await self._send_trailers(event)
        else:
            await super().stream_send(event)

    def _hold_head(self, event: Response) -> None:
        """Give h2 the answer's head, but leave it to the next write to send."""
        headers = [(b":status", b"%d" % event.status_code), *event.headers]
        with suppress(*SENDING_FAULTS):  # reset meanwhile: as hypercorn's, nothing to send
            self.connection.send_headers(
                event.stream_id, headers + self.config.response_headers("h2")
            )

    async def _send_trailers(self, event: Trailers) -> None:
        """The body still buffered and the trailers, in one write when the window allows."""
        buffer = self.stream_buffers.get(event.stream_id)
        if buffer is None:  # reset, or the connection closed
            return
        waiting = len(buffer.buffer)
        with suppress(*SENDING_FAULTS):
            if waiting > self.connection.local_flow_control_window(event.stream_id):
                # The client's window holds the body: the sending task sends
                # it as the window opens, and the trailers follow it.
                await super().stream_send(event)
                return
            # Taken whole and at once: the sending task cannot send part of
            # it after the trailers, which end the stream.
            data = await buffer.pop(waiting)
            frame_size = self.connection.max_outbound_frame_size
            for start in range(0, len(data), frame_size):
                self.connection.send_data(event.stream_id, data[start : start + frame_size])
            self.connection.send_headers(event.stream_id, event.headers, end_stream=True)
        # The sending task writes it, with every answer ended in the same pass.
        await self.has_data.set()

    async def _push_body(self, event: Body) -> None:
        """hypercorn's, but the stream is visited only if its data is still there then.

        Trailers that follow at once take the data themselves; a visit that
        found nothing (and every stream visited on each WINDOW_UPDATE) was
        most of the sending task's work.
        """
        buffer = self.stream_buffers.get(event.stream_id)
        if buffer is None:
            return
        self._fresh.add(event.stream_id)
        await self.has_data.set()
        with suppress(BufferCompleteError):
            await buffer.push(event.data)

    def _unblock_waiting(self, stream_ids: Iterable[int]) -> None:
        """Put those of ``stream_ids`` with data waiting back on the sending task's round."""
        for stream_id in stream_ids:
            buffer = self.stream_buffers.get(stream_id)
            if buffer is not None and buffer.buffer:
                with suppress(MissingStreamError):
                    self.priority.unblock(stream_id)

    async def _window_updated(self, stream_id: int | None) -> None:
        if not stream_id:  # the connection's window, or the initial one, changed
            self._unblock_waiting(list(self.stream_buffers))
        else:
            self._unblock_waiting((stream_id,))
        await self.has_data.set()

    async def send_task(self) -> None:
        # hypercorn's loop, which also writes what an app left with h2 (a
        # head held for its body) once it has nothing else to send.
        while not self.closed:
            if self._fresh:
                self._unblock_waiting(self._fresh)
                self._fresh.clear()
            try:
                stream_id = next(self.priority)
            except DeadlockError:
                await self._flush()
                await self.has_data.wait()
                await self.has_data.clear()
            else:
                await self._send_data(stream_id)

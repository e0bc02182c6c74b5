"""A client's disconnect told to the app as it happens, with no task waiting for it.

hypercorn tells an app that a request's client is gone with an
``http.disconnect`` message on the request's receive channel. An app that
must stop its work when that happens -- a blocking SendMessage, whose client
retries and must then get the original (see Retries), or an event stream,
which stops relaying -- had to keep a task waiting on the channel, in a
nursery of its own, for every such request: a task, a nursery, two cancel
scopes and three more scheduler steps per SendMessage, some 3 % of its CPU.

:class:`MendedTaskGroup` is hypercorn's trio task group (each connection's,
in which its requests' app tasks run) putting a :class:`Disconnect` in each
request's ASGI scope, under ``scope["extensions"]["a2a_trio.disconnect"]``;
when hypercorn puts the disconnect on the channel, the :class:`Disconnect`
cancels the cancel scope the app gave it. The message is still put on the
channel for whoever reads it. A message put on a channel with room goes
without a schedule point (hypercorn's ``send`` makes one each time): the
calls of one HTTP/2 read all reach their apps in one pass, and their events
the recorder in one round, as HTTP/1.1's from as many connections do.
:func:`install` puts the class where
hypercorn's TCP server finds it (with :mod:`.hypercorn_tcp`'s mends, for the
hypercorn releases they were written for); an app served otherwise finds no
such extension and waits for the message itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import hypercorn.trio.tcp_server
import trio
from hypercorn.trio.task_group import TaskGroup

__all__ = ["EXTENSION", "Disconnect", "MendedTaskGroup", "install"]

#: The key of the :class:`Disconnect` in the ASGI scope's ``extensions``.
EXTENSION = "a2a_trio.disconnect"

_DISCONNECTS = frozenset({"http.disconnect", "websocket.disconnect"})


class Disconnect:
    """Whether a request's client is gone, and the cancel scope to cancel when it goes."""

    __slots__ = ("_scope", "gone")

    def __init__(self) -> None:
        #: True once hypercorn reported the client gone.
        self.gone = False
        self._scope: trio.CancelScope | None = None

    def cancel_on_disconnect(self, scope: trio.CancelScope | None) -> None:
        """Cancel ``scope`` when the client goes (at once if it has); None: no scope now."""
        self._scope = scope
        if scope is not None and self.gone:
            scope.cancel()

    def disconnected(self) -> None:
        """hypercorn reports the client gone."""
        self.gone = True
        if self._scope is not None:
            self._scope.cancel()


class MendedTaskGroup(TaskGroup):
    """hypercorn's trio ``TaskGroup``, giving each request a :class:`Disconnect`."""

    async def spawn_app(
        self, app: Any, config: Any, scope: Any, send: Callable[..., Awaitable[None]]
    ) -> Callable[[Any], Awaitable[None]]:
        notice = Disconnect()
        extensions = scope.get("extensions")
        if isinstance(extensions, dict):
            extensions[EXTENSION] = notice
        put = await super().spawn_app(app, config, scope, send)
        # hypercorn hands back its channel's ``send``, which yields even when
        # the channel has room: a connection's reader then lets every request
        # it reads run on before reading the next one of the same chunk, and
        # the calls of one HTTP/2 connection reach the recorder one scheduling
        # pass apart, each in a commit of its own. With room, put without one.
        channel: trio.MemorySendChannel[Any] | None = getattr(put, "__self__", None)
        put_nowait = channel.send_nowait if isinstance(channel, trio.MemorySendChannel) else None

        async def put_and_tell(message: Any) -> None:
            if message["type"] in _DISCONNECTS:
                notice.disconnected()
            if put_nowait is not None:
                try:
                    put_nowait(message)
                except trio.WouldBlock:
                    pass
                else:
                    return
            await put(message)

        return put_and_tell


def install() -> bool:
    """Make hypercorn's trio TCP server run its requests in a :class:`MendedTaskGroup`."""
    setattr(hypercorn.trio.tcp_server, "TaskGroup", MendedTaskGroup)  # noqa: B010
    return vars(hypercorn.trio.tcp_server)["TaskGroup"] is MendedTaskGroup

"""The databases an app's agents live in: one :class:`~.lifespan.Lifespan` each, run together.

Agents without a storage of their own live in the app's ``database``; an
agent mounted with ``storage=`` (``[[agents]] storage``) lives in that one,
with its own leases, wake-ups, outbox and pruner. Agents naming the same
database share its lifespan. With one database nothing here adds a task or
a connection: the app's single lifespan runs as it always did.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

from .. import telemetry
from ..store import Store
from ..store.url import DatabaseLocation, SqliteLocation, parse_database_url
from .lifespan import Lifespan, LifespanSettings

__all__ = ["GC_THRESHOLD", "ASGICall", "Databases", "Storage", "database_identity"]

#: The youngest generation's collection threshold a serving process sets with
#: ``freeze_gc`` (CPython's default is 700), when the program left the defaults.
GC_THRESHOLD = 7_000
_DEFAULT_GC_THRESHOLD = (700, 10, 10)

#: An ASGI application's entry point: ``(scope, receive, send)``.
ASGICall = Callable[[Any, Any, Any], Awaitable[None]]
#: Where an agent's tasks live: a path, a ``sqlite:///`` or ``postgresql://`` URL, or a location.
Storage = str | Path | DatabaseLocation


def _location(storage: Storage, key: str) -> DatabaseLocation:
    if isinstance(storage, Path):
        return SqliteLocation(storage, key)
    if isinstance(storage, str):
        return parse_database_url(storage, key=key)
    return storage


def database_identity(location: DatabaseLocation) -> object:
    """Equal for two spellings of one database (relative, absolute, through a link)."""
    if isinstance(location, SqliteLocation):
        return ("sqlite", os.path.realpath(location.path))
    return location  # the setting it came from is not compared


class Databases:
    """The lifespans of an app, the default database's first, started and stopped together."""

    def __init__(
        self,
        *,
        database: Storage,
        store: Store | None,
        settings: LifespanSettings,
        freeze_gc: bool,
    ) -> None:
        #: What each database's lifespan is made with (the same for every database).
        self.settings = settings
        self._freeze_gc = freeze_gc
        self.retention = settings.retention
        #: What the pruners of this app did, every database's, across restarts.
        self.retention_stats = settings.retention_stats
        #: The app's own database: agents without a storage of their own.
        self.default = self._lifespan(database, store)
        self._by_identity: dict[object, Lifespan] = {}
        if store is None:
            self._by_identity[database_identity(_location(database, "storage.url"))] = self.default
        self._others: list[Lifespan] = []
        #: Called once every store is open (and its cluster joined), before the
        #: hosts start, when serving and when working (the console hooks on here).
        self.on_start: list[Callable[[], Awaitable[None]]] = []
        #: What this process is to the others on its databases: ``web`` or ``worker``.
        self.role = "web"
        #: Set when the shutdown begins: long-lived connections of the app's
        #: own (the console's feed) close then instead of holding it up.
        self.stopping = trio.Event()
        self._stop_working = trio.Event()
        #: The lifespans started by this process (a worker starts only those it works for).
        self._running: list[Lifespan] = []

    def _lifespan(self, database: Storage, store: Store | None) -> Lifespan:
        return Lifespan(database=database, store=store, settings=self.settings)

    @property
    def all(self) -> list[Lifespan]:
        """Every database's lifespan, the default one first."""
        return [self.default, *self._others]

    def for_storage(self, storage: Storage | None, *, key: str = "storage") -> Lifespan:
        """The lifespan of the database ``storage`` names (the default one for None).

        A bad URL raises :class:`~a2a_trio.store.url.DatabaseURLError` naming ``key``.
        """
        if storage is None:
            return self.default
        location = _location(storage, key)
        identity = database_identity(location)
        lifespan = self._by_identity.get(identity)
        if lifespan is None:
            lifespan = self._by_identity[identity] = self._lifespan(location, None)
            self._others.append(lifespan)
        return lifespan

    async def serve(self, call: ASGICall, scope: Any, receive: Any, send: Any) -> None:
        """Run the ASGI lifespan ``call`` (quart-trio's) inside the services' nurseries.

        Quart-trio's shutdown gives its nursery, and the shutdown functions
        running in it, ``BACKGROUND_TASK_SHUTDOWN_TIMEOUT`` (5 s) before
        cancelling them, which would cut the hosts' grace short. So the hosts
        and the push workers live in these nurseries, and are stopped when the
        server announces the shutdown, before quart-trio's own begins.
        """

        async def receive_event() -> Any:
            event = await receive()
            if event["type"] == "lifespan.shutdown":
                await self.stop()
            return event

        async with AsyncExitStack() as stack:
            for lifespan in self.all:
                await stack.enter_async_context(lifespan.services())
            await call(scope, receive_event, send)

    async def open(self) -> None:
        """Open every database's store (serving holds each; see :meth:`Lifespan.open`)."""
        for lifespan in self.all:
            await lifespan.open(serving=True)

    async def start(self) -> None:
        """Open the stores, join the clusters, run the hooks, then start the services."""
        self.stopping = trio.Event()
        await self._start(self.all, serving=True)
        if self._freeze_gc and gc.get_freeze_count() == 0:
            # Once per process (a program that froze its own heap is left as
            # it is), and garbage first, so that none is kept for good.
            gc.collect()
            gc.freeze()
            if gc.get_threshold() == _DEFAULT_GC_THRESHOLD:
                # A request allocates some thousand objects, most freed by their
                # last reference within it: collecting the youngest generation
                # every 700 allocations walks, and promotes, the objects of every
                # request in flight, and the older generations' collections
                # follow. A program that set its own thresholds keeps them.
                gc.set_threshold(GC_THRESHOLD, *_DEFAULT_GC_THRESHOLD[1:])

    async def _start(self, lifespans: list[Lifespan], *, serving: bool) -> None:
        telemetry.configure()  # traces, if the OTEL_* variables ask for them (workers too)
        self._running = lifespans
        for lifespan in lifespans:
            lifespan.role = self.role
            await lifespan.open(serving=serving)
        for lifespan in lifespans:
            await lifespan.join()
        for lifespan in self._others:  # the console observes the default's deliveries
            lifespan.push.observer = lifespan.push.observer or self.default.push.observer
        for hook in self.on_start:
            await hook()
        for lifespan in lifespans:
            await lifespan.start()

    async def work(
        self, names: list[str], concurrency: int, task_status: trio.TaskStatus[None]
    ) -> None:
        """Be a queue worker for the agents ``names``, in whichever databases they live,
        until :meth:`begin_shutdown` (see :meth:`a2a_trio.server.A2AApp.work`)."""
        self._stop_working = trio.Event()
        self.role = "worker"
        groups = []
        for lifespan in self.all:
            served = [name for name in names if name in lifespan.mounts]
            if served:
                lifespan.agents_served = served
                groups.append((lifespan, served))
        async with AsyncExitStack() as stack:
            # Opened before any nursery, so that a database out of reach is
            # refused as itself, not inside an exception group.
            for lifespan, _ in groups:
                stack.push_async_callback(lifespan.close)
                await lifespan.open(serving=False)
                lifespan.require_shared()  # before any host starts on it
            for lifespan, _ in groups:
                await stack.enter_async_context(lifespan.services())
            await self._start([lifespan for lifespan, _ in groups], serving=False)
            for lifespan, served in groups:
                await lifespan.serve_queues(served, concurrency)
            task_status.started()
            await self._stop_working.wait()
            await self.stop()

    def begin_shutdown(self, *, now: bool = False) -> None:
        """Start the orderly shutdown (see :meth:`a2a_trio.server.A2AApp.begin_shutdown`)."""
        self.stopping.set()
        for lifespan in self.all:
            lifespan.begin_shutdown(now=now)
        self._stop_working.set()

    async def stop(self) -> None:
        """Stop every database's services, each in order, the databases at once
        (so that the hosts' graces run together)."""
        self.stopping.set()
        async with trio.open_nursery() as nursery:
            for lifespan in self._running:
                nursery.start_soon(lifespan.stop)
        self._running = []

"""An app's services and their lifetime: the store, the cluster, the push worker, the hosts.

While the app serves (its ASGI lifespan) or works (a queue worker), its
services run in one nursery of its own: this process's membership of the
cluster (on PostgreSQL), the WAL checkpointer (on SQLite), the push worker,
the pruner (when ``retention.max_age`` is set) and every agent's host. They
start in that order and stop in the reverse one, the hosts first, within
their grace; docs/configuration.md says when the grace begins.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from .. import telemetry
from ..push import PushDispatcher, PushSettings
from ..runtime.cluster import Cluster
from ..runtime.retention import Pruner, RetentionSettings, RetentionStats
from ..store import SqliteStore, Store, checkpoint_periodically
from ..store.factory import store_at
from ..store.postgres import PoolSettings
from ..store.url import DatabaseLocation
from .failed_start import refuse_start
from .mount import AgentMount

__all__ = ["ASGICall", "Lifespan"]

#: An ASGI application's entry point: ``(scope, receive, send)``.
ASGICall = Callable[[Any, Any, Any], Awaitable[None]]


class Lifespan:
    """The services of the agents in ``mounts``, started and stopped in order.

    The store is the one at ``database`` (opened at start-up, closed when the
    services end), unless ``store`` is given: then it is the caller's to close.
    """

    def __init__(
        self,
        mounts: Mapping[str, AgentMount],
        *,
        database: str | Path | DatabaseLocation,
        store: Store | None,
        pool: PoolSettings | None,
        lease_seconds: float,
        secret_key: str | bytes | None,
        push_settings: PushSettings,
        retention: RetentionSettings,
        freeze_gc: bool,
    ) -> None:
        self._mounts = mounts
        self._database = database
        self._pool = pool
        self._lease_seconds = lease_seconds
        self._secret_key = secret_key
        self._store = store
        self._owns_store = store is None
        self._freeze_gc = freeze_gc
        #: Delivers every agent's webhooks from the outbox (see a2a_trio.push).
        self.push = PushDispatcher(self.store, push_settings)
        self._push_scope: trio.CancelScope | None = None
        self._push_stopped = trio.Event()
        #: This process's membership when several serve the database (PostgreSQL).
        self.cluster: Cluster | None = None
        self._cluster_stopped = trio.Event()
        #: Finished work older than ``retention.max_age`` pruned on a schedule
        #: (runtime.retention); the pruner while it runs.
        self.retention = retention
        self.pruner: Pruner | None = None
        #: What the pruners of this app did, across restarts (the metrics read it).
        self.retention_stats = RetentionStats()
        #: The agents this process serves (all of them unless it works on a few).
        self._agents_served: list[str] = []
        #: Set by begin_shutdown: a queue worker (see work) stops.
        self._stop_working = trio.Event()
        #: The WAL checkpointer's scope and end, once it runs.
        self._checkpoints: tuple[trio.CancelScope, trio.Event] | None = None
        #: The nursery of the services while they run.
        self._nursery: trio.Nursery | None = None
        #: Called once the store is open (and the cluster joined), before the
        #: hosts start, when serving and when working (the console hooks on here).
        self.on_start: list[Callable[[], Awaitable[None]]] = []
        #: What this process is to the others on the database: ``web`` or ``worker``.
        self.role = "web"
        #: Set when the shutdown begins: long-lived connections of the app's
        #: own (the console's feed) close then instead of holding it up.
        self.stopping = trio.Event()

    @property
    def store(self) -> Store:
        """The store, made on first use (opened at start-up)."""
        if self._store is None:
            self._store = store_at(
                self._database,
                secret_key=self._secret_key,
                pool=self._pool,
                lease_seconds=self._lease_seconds,
            )
        return self._store

    async def serve(self, call: ASGICall, scope: Any, receive: Any, send: Any) -> None:
        """Run the ASGI lifespan ``call`` (quart-trio's) inside the services' nursery.

        Quart-trio's shutdown gives its nursery, and the shutdown functions
        running in it, ``BACKGROUND_TASK_SHUTDOWN_TIMEOUT`` (5 s) before
        cancelling them, which would cut the hosts' grace short. So the hosts
        and the push worker live in this nursery, and are stopped when the
        server announces the shutdown, before quart-trio's own begins.
        """

        async def receive_event() -> Any:
            event = await receive()
            if event["type"] == "lifespan.shutdown":
                await self.stop()
            return event

        try:
            async with trio.open_nursery() as self._nursery:
                await call(scope, receive_event, send)
                # Stopped in order by now, unless the start-up failed halfway:
                # then whatever did start ends here (hosts still record their
                # endings) instead of holding the lifespan open for good.
                self._nursery.cancel_scope.cancel()
        finally:
            await self._ended()

    async def _ended(self) -> None:
        """The services' nursery is gone: close the store if it is the app's own."""
        self._nursery = None
        if self._owns_store and self._store is not None:
            with trio.CancelScope(shield=True):
                await self._store.aclose()
            self._store = None

    async def start(self) -> None:
        """Open the store, join the cluster, run the hooks, then start the services."""
        telemetry.configure()  # traces, if the OTEL_* variables ask for them
        self.stopping = trio.Event()
        # Serving holds the database: a second server on it is refused here, as
        # are a bad path and a newer schema.
        try:
            await self.store.open(exclusive=True)
        except Exception as error:
            refuse_start(error)  # under hypercorn's CLI: one line, a non-zero exit
            raise
        nursery = self._nursery
        assert nursery is not None, "the hosts start with the app's ASGI lifespan"
        coordination = self.store.coordination
        if coordination is not None:  # several processes may serve this database
            self.cluster, self._cluster_stopped = Cluster(coordination), trio.Event()
            self.cluster.role = self.role
            self.cluster.agents = list(self._agents_served or self._mounts)
            # Each heartbeat says whether webhooks are pending: no poll.
            self.cluster.push_pending = self.push.notify
            self.push.poll_interval = math.inf
            for mount in self._mounts.values():
                mount.host.attach(self.cluster)
            await nursery.start(self._run_cluster, self.cluster)
        for hook in self.on_start:
            await hook()
        await nursery.start(self._run_checkpoints)
        await nursery.start(self._run_push)
        if self.retention.enabled:
            member = self.cluster.member if self.cluster is not None else None
            self.pruner = Pruner(self.store, self.retention, member, self.retention_stats)
            await nursery.start(self.pruner.run)
        for mount in self._mounts.values():
            await nursery.start(mount.host.run)
        if self._freeze_gc and gc.get_freeze_count() == 0:
            # Once per process (a program that froze its own heap is left as
            # it is), and garbage first, so that none is kept for good.
            gc.collect()
            gc.freeze()

    async def _run_cluster(self, cluster: Cluster, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            await cluster.run(task_status=task_status)
        finally:
            self._cluster_stopped.set()

    async def _run_push(self, *, task_status: trio.TaskStatus[None]) -> None:
        try:
            with trio.CancelScope() as self._push_scope:
                await self.push.run(task_status=task_status)
        finally:
            self._push_stopped.set()

    async def _run_checkpoints(self, *, task_status: trio.TaskStatus[None]) -> None:
        scope, stopped = self._checkpoints = trio.CancelScope(), trio.Event()
        try:
            with scope:
                if isinstance(self.store, SqliteStore):
                    await checkpoint_periodically(self.store, task_status=task_status)
                else:  # PostgreSQL checkpoints on its own
                    task_status.started()
        finally:
            stopped.set()

    async def work(
        self, names: list[str], concurrency: int, task_status: trio.TaskStatus[None]
    ) -> None:
        """Be a queue worker for the agents ``names`` until :meth:`begin_shutdown`.

        See :meth:`a2a_trio.server.A2AApp.work`.
        """
        self._stop_working = trio.Event()
        self.role, self._agents_served = "worker", names
        try:
            await self.store.open(exclusive=True)
            if self.store.coordination is None:
                raise ValueError(
                    "a queue worker needs a database several processes share (PostgreSQL);"
                    f" {self.store.display} is not one: set storage.url (or"
                    " A2A_TRIO_DATABASE) to a postgresql:// URL"
                )
            async with trio.open_nursery() as self._nursery:
                await self.start()
                for name in names:
                    await self._nursery.start(self._mounts[name].host.serve_queue, concurrency)
                task_status.started()
                await self._stop_working.wait()
                await self.stop()
                self._nursery.cancel_scope.cancel()
        finally:
            await self._ended()

    def begin_shutdown(self, *, now: bool = False) -> None:
        """Start the orderly shutdown (see :meth:`a2a_trio.server.A2AApp.begin_shutdown`)."""
        self.stopping.set()
        for mount in self._mounts.values():
            mount.host.begin_close(now=now)
        self._stop_working.set()

    async def stop(self) -> None:
        """Stop the hosts (within their grace), then the push worker, the pruner, the
        checkpointer and the cluster membership."""
        self.stopping.set()
        async with trio.open_nursery() as nursery:
            for mount in self._mounts.values():
                nursery.start_soon(mount.host.close)
        # Hosts are done, so nothing new is queued; what is undelivered stays
        # in the outbox for the next start.
        if self._push_scope is not None:
            self._push_scope.cancel()
            await self._push_stopped.wait()
        if self.pruner is not None:  # a batch under way rolls back; the run's record closes
            await self.pruner.stop()
            self.pruner = None
        if self._checkpoints is not None:  # before the store closes under it
            scope, stopped = self._checkpoints
            scope.cancel()
            await stopped.wait()
            self._checkpoints = None
        if self.cluster is not None:  # last: the hosts' leases go with the membership
            self.cluster.stop()
            await self._cluster_stopped.wait()
            self.cluster = None

"""One database's services and their lifetime: its store, cluster, push worker, hosts.

While the app serves (its ASGI lifespan) or works (a queue worker), the
services of each database its agents live in run in one nursery of their
own: this process's membership of the cluster (on PostgreSQL), the WAL
checkpointer (on SQLite), the push worker, the pruner (when
``retention.max_age`` is set) and the hosts of the agents stored there. They
start in that order and stop in the reverse one, the hosts first, within
their grace; docs/configuration.md says when the grace begins.
:class:`~.databases.Databases` runs the lifespans of an app together.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..push import PushDispatcher, PushSettings
from ..runtime.cluster import Cluster
from ..runtime.retention import Pruner, RetentionSettings, RetentionStats
from ..store import SqliteStore, Store, checkpoint_periodically
from ..store.factory import store_at
from ..store.postgres import PoolSettings
from ..store.url import DatabaseLocation
from .failed_start import refuse_start
from .mount import AgentMount

__all__ = ["Lifespan", "LifespanSettings"]


@dataclass(frozen=True)
class LifespanSettings:
    """What every database's lifespan of an app is made with, whichever database it is."""

    #: The PostgreSQL pool of each store (None: the store's defaults).
    pool: PoolSettings | None = None
    #: How long a lease (an execution's, a push lane's) lasts without renewal.
    lease_seconds: float = 10.0
    #: The key that encrypts push secrets at rest (None: the development key).
    secret_key: str | bytes | None = None
    push: PushSettings = field(default_factory=PushSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    #: What the pruners of the app did, every database's, across restarts (shared).
    retention_stats: RetentionStats = field(default_factory=RetentionStats)


class Lifespan:
    """The services of the agents that live in one database (:attr:`mounts`).

    The store is the one at ``database`` (opened at start-up, closed when the
    services end), unless ``store`` is given: then it is the caller's to close.
    """

    def __init__(
        self,
        *,
        database: str | Path | DatabaseLocation,
        store: Store | None,
        settings: LifespanSettings,
    ) -> None:
        #: The agents stored in this database, by name (the app mounts them here).
        self.mounts: dict[str, AgentMount] = {}
        self._database = database
        self._settings = settings
        self._store = store
        self._owns_store = store is None
        #: Delivers these agents' webhooks from this database's outbox (see a2a_trio.push).
        self.push = PushDispatcher(self.store, settings.push)
        self._push_scope: trio.CancelScope | None = None
        self._push_stopped = trio.Event()
        #: This process's membership when several serve the database (PostgreSQL).
        self.cluster: Cluster | None = None
        self._cluster_stopped = trio.Event()
        #: Finished work older than ``retention.max_age`` pruned on a schedule
        #: (runtime.retention); the pruner while it runs.
        self.retention = settings.retention
        self.pruner: Pruner | None = None
        #: What the pruners of this app did, across restarts (the metrics read it).
        self.retention_stats = settings.retention_stats
        #: The agents this process serves (all of them unless it works on a few).
        self.agents_served: list[str] = []
        #: The WAL checkpointer's scope and end, once it runs.
        self._checkpoints: tuple[trio.CancelScope, trio.Event] | None = None
        #: The nursery of the services while they run.
        self._nursery: trio.Nursery | None = None
        #: What this process is to the others on the database: ``web`` or ``worker``.
        self.role = "web"

    @property
    def store(self) -> Store:
        """The store, made on first use (opened at start-up)."""
        if self._store is None:
            self._store = store_at(
                self._database,
                secret_key=self._settings.secret_key,
                pool=self._settings.pool,
                lease_seconds=self._settings.lease_seconds,
            )
        return self._store

    @asynccontextmanager
    async def services(self) -> AsyncIterator[None]:
        """The nursery the services run in; they end with the block, and the store
        closes then if it is the app's own (whatever started before a failure ends
        here too, hosts still recording their endings)."""
        try:
            async with trio.open_nursery() as self._nursery:
                yield
                self._nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            await self.close()

    async def close(self) -> None:
        """Close the store if it is the app's own (a store passed in is the caller's)."""
        if self._owns_store and self._store is not None:
            with trio.CancelScope(shield=True):
                await self._store.aclose()
            self._store = None

    async def open(self, *, serving: bool) -> None:
        """Open the store; serving holds the database, so a second server on it is
        refused here, as are a bad path and a newer schema."""
        try:
            await self.store.open(exclusive=True)
        except Exception as error:
            if serving:
                refuse_start(error)  # under hypercorn's CLI: one line, a non-zero exit
            raise

    async def join(self) -> None:
        """Join the cluster of the processes serving this database (PostgreSQL only)."""
        nursery = self._nursery
        assert nursery is not None, "the services start inside Lifespan.services()"
        coordination = self.store.coordination
        if coordination is None:
            return
        self.cluster, self._cluster_stopped = Cluster(coordination), trio.Event()
        self.cluster.role = self.role
        self.cluster.agents = list(self.agents_served or self.mounts)
        # Each heartbeat says whether webhooks are pending: no poll.
        self.cluster.push_pending = self.push.notify
        self.push.poll_interval = math.inf
        for mount in self.mounts.values():
            mount.host.attach(self.cluster)
        await nursery.start(self._run_cluster, self.cluster)

    async def start(self) -> None:
        """Start the checkpointer, the push worker, the pruner and the hosts."""
        nursery = self._nursery
        assert nursery is not None, "the services start inside Lifespan.services()"
        await nursery.start(self._run_checkpoints)
        self._push_stopped = trio.Event()
        await nursery.start(self._run_push)
        if self.retention.enabled:
            member = self.cluster.member if self.cluster is not None else None
            self.pruner = Pruner(self.store, self.retention, member, self.retention_stats)
            await nursery.start(self.pruner.run)
        for mount in self.mounts.values():
            await nursery.start(mount.host.run)

    def require_shared(self) -> None:
        """ValueError unless several processes may share this database (a worker's)."""
        if self.store.coordination is None:
            raise ValueError(
                "a queue worker needs a database several processes share (PostgreSQL);"
                f" {self.store.display} is not one: set storage.url (or"
                " A2A_TRIO_DATABASE) to a postgresql:// URL"
            )

    async def serve_queues(self, names: list[str], concurrency: int) -> None:
        """Claim and run the queued executions of the agents ``names`` (a worker)."""
        nursery = self._nursery
        assert nursery is not None, "the services start inside Lifespan.services()"
        for name in names:
            await nursery.start(self.mounts[name].host.serve_queue, concurrency)

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

    def begin_shutdown(self, *, now: bool = False) -> None:
        """Every host stops accepting work (see :meth:`a2a_trio.server.A2AApp.begin_shutdown`)."""
        for mount in self.mounts.values():
            mount.host.begin_close(now=now)

    async def stop(self) -> None:
        """Stop the hosts (within their grace), then the push worker, the pruner, the
        checkpointer and the cluster membership."""
        async with trio.open_nursery() as nursery:
            for mount in self.mounts.values():
                nursery.start_soon(mount.host.close)
        # Hosts are done, so nothing new is queued; what is undelivered stays
        # in the outbox for the next start.
        if self._push_scope is not None:
            self._push_scope.cancel()
            await self._push_stopped.wait()
            self._push_scope = None
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

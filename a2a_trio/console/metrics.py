"""Prometheus metrics of one app: counters fed as things happen, gauges read at scrape.

Each app has its own registry, so several apps in one process (the tests)
never share a counter. docs/metrics.md lists every metric.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from ..protocol import TaskState
from ..runtime.retention import RetentionStats
from ..store import Notification, Share
from ..store.observer import Observer
from ..store.retention import PRUNED_KINDS
from .fleet_view import DatabaseFleet, Process, fleets, outbox_of, processes, task_counts_of
from .tallies import CounterTally, HistogramTally, Tallies

if TYPE_CHECKING:
    from ..server import A2AApp
    from .hub import FeedHub

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1)


class Metrics(Observer):
    """The app's metrics; :meth:`render` reads the gauges and returns the exposition text."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        # Told on every request and commit: plain numbers, turned into their
        # families at scrape (see .tallies).
        self.requests = CounterTally(
            "a2a_requests",
            "Protocol requests answered, by agent, operation, binding and outcome.",
            ["agent", "operation", "binding", "outcome"],
        )
        self.latency = HistogramTally(
            "a2a_request_duration_seconds",
            "Time to answer a protocol request (a stream: until it starts).",
            ["agent", "operation", "binding"],
            _LATENCY_BUCKETS,
        )
        self.events = CounterTally(
            "a2a_events_recorded",
            "Task events committed to the store, by agent and kind.",
            ["agent", "kind"],
        )
        self.commit = HistogramTally(
            "a2a_commit_seconds",
            "Time of the store commit of each recorded share's round.",
            ["agent"],
            _COMMIT_BUCKETS,
        )
        self.executions = CounterTally(
            "a2a_executions_started", "Executions of the agent's executor started.", ["agent"]
        )
        registry.register(
            Tallies(self.requests, self.latency, self.events, self.commit, self.executions)
        )
        self.webhooks = Counter(
            "a2a_webhook_attempts",
            "Webhook delivery attempts, by agent and outcome "
            "(delivered, retry, failed, abandoned).",
            ["agent", "outcome"],
            registry=registry,
        )
        self.tasks = Gauge(
            "a2a_tasks",
            "Tasks in the store, by agent and state.",
            ["agent", "state"],
            registry=registry,
        )
        self.running = Gauge(
            "a2a_executions_running", "Executions running now.", ["agent"], registry=registry
        )
        self.streams = Gauge(
            "a2a_open_streams", "Event streams (SSE) being relayed now.", registry=registry
        )
        self.backlog = Gauge(
            "a2a_outbox_backlog", "Webhook notifications pending delivery.", registry=registry
        )
        self.oldest = Gauge(
            "a2a_outbox_oldest_pending_seconds",
            "Age of the oldest notification pending delivery (0 when none is).",
            registry=registry,
        )
        self.dead = Gauge(
            "a2a_outbox_dead_letters",
            "Webhook notifications that failed for good (dead letters).",
            registry=registry,
        )
        self.feed_clients = Gauge(
            "a2a_feed_subscribers", "Live feed (WebSocket) clients now.", registry=registry
        )
        self.feed_dropped = Counter(
            "a2a_feed_dropped",
            "Live feed clients dropped for being slow.",
            registry=registry,
        )
        self._dropped_counted = 0
        # A deployment of several processes on PostgreSQL (absent otherwise).
        self.queued = Gauge(
            "a2a_queued_executions",
            "Executions of queued agents not done yet, by agent and state "
            "(queued: waiting for a worker; claimed; running). The whole deployment's.",
            ["agent", "state"],
            registry=registry,
        )
        self.leases_held = Gauge(
            "a2a_task_leases_held",
            "Task leases this process holds now (executions and cancels in progress).",
            registry=registry,
        )
        self.leases = Gauge(
            "a2a_task_leases",
            "Task leases held in the whole deployment now.",
            registry=registry,
        )
        self.members = Gauge(
            "a2a_cluster_members",
            "Live processes serving the database, by role (web, worker).",
            ["role"],
            registry=registry,
        )
        # The pruner (runtime.retention), when retention.max_age is set.
        self.pruned = Counter(
            "a2a_retention_pruned",
            "Rows this process's pruner removed, by kind (tasks, events, push_configs,"
            " notifications, attempts, receipts).",
            ["kind"],
            registry=registry,
        )
        self.prune_batches = Counter(
            "a2a_retention_batches",
            "Prune transactions this process's pruner committed.",
            registry=registry,
        )
        self.prune_busy = Counter(
            "a2a_retention_lease_busy",
            "Times this process's pruner found another process's run holding the lease.",
            registry=registry,
        )
        self.prune_last_run = Gauge(
            "a2a_retention_last_run_timestamp_seconds",
            "When this process's last retention run ended (0: none yet).",
            registry=registry,
        )
        self.prune_last_seconds = Gauge(
            "a2a_retention_last_run_seconds",
            "How long this process's last retention run took.",
            registry=registry,
        )
        self._pruned_children = {kind: self.pruned.labels(kind) for kind in PRUNED_KINDS}
        self._pruned_counted = RetentionStats()
        self.listening = Gauge(
            "a2a_cluster_listening",
            "1 while this process's wake-up connection (LISTEN) is up, else 0.",
            registry=registry,
        )

    # --- told as things happen ----------------------------------------------------------

    def request(
        self, agent: str, binding: str, operation: str, outcome: str, seconds: float
    ) -> None:
        self.requests.inc((agent, operation, binding, outcome))
        self.latency.observe((agent, operation, binding), seconds)

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        for write in share.events:
            self.events.inc((agent, write.kind))
        self.commit.observe((agent,), seconds)

    def attempted(
        self,
        notification: Notification,
        outcome: Literal["delivered", "retry", "failed", "abandoned"],
        status: int | None,
        error: str | None,
    ) -> None:
        self.webhooks.labels(notification.lane.agent, outcome).inc()

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        self.executions.inc((agent,))

    # --- read at scrape -----------------------------------------------------------------

    async def render(self, app: A2AApp, hub: FeedHub) -> bytes:
        """The exposition text, with the gauges read from the app and the store now."""
        counts = await task_counts_of(app)
        for mount in app.mounts.values():
            for state in TaskState:
                if state is not TaskState.UNSPECIFIED:
                    value = counts.get((mount.name, state), 0)
                    self.tasks.labels(mount.name, state.value).set(value)
            self.running.labels(mount.name).set(mount.host.executions_running)
        outbox = await outbox_of(app)
        self.backlog.set(outbox.pending)
        oldest = outbox.oldest_pending
        self.oldest.set(max(0.0, time.time() - oldest.timestamp()) if oldest else 0.0)
        self.dead.set(outbox.failed)
        self.streams.set(app.open_streams)
        self.feed_clients.set(len(hub.subscribers))
        self.feed_dropped.inc(hub.dropped - self._dropped_counted)
        self._dropped_counted = hub.dropped
        self._read_pruner(app.retention_stats)
        read = await fleets(app)
        if read:
            self._read_fleet(read, await processes(app, {}, read))
        return generate_latest(self.registry)

    def _read_pruner(self, stats: RetentionStats) -> None:
        counted = self._pruned_counted
        before = counted.pruned.as_dict()
        for kind, value in stats.pruned.as_dict().items():
            self._pruned_children[kind].inc(value - before[kind])
        self.prune_batches.inc(stats.batches - counted.batches)
        self.prune_busy.inc(stats.busy - counted.busy)
        self._pruned_counted = RetentionStats(stats.pruned, stats.batches, busy=stats.busy)
        self.prune_last_run.set(stats.last_run_at)
        self.prune_last_seconds.set(stats.last_run_seconds)

    def _read_fleet(self, read: list[DatabaseFleet], members: list[Process]) -> None:
        # Every database this process serves: its agents' queues are there, its
        # leases are counted there, and a process serving several is one member.
        self.listening.set(1 if all(fleet.cluster.listening for fleet in read) else 0)
        self.queued.clear()
        for fleet in read:
            queued = fleet.view.queued
            for agent in {agent for agent, _ in queued} | set(fleet.cluster.agents):
                for state in ("queued", "claimed", "running"):
                    self.queued.labels(agent, state).set(queued.get((agent, state), 0))
        self.leases.set(sum(fleet.view.leases for fleet in read))
        self.leases_held.set(sum(p.member.leases for p in members if p.me))
        self.members.clear()
        for role in ("web", "worker"):
            self.members.labels(role).set(sum(1 for p in members if p.member.role == role))

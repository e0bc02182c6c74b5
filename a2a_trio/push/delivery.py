"""Webhook delivery: the outbox worker, lanes in order, pinned connections.

Every task update bound for a webhook is an outbox row, written in the same
transaction as the event. A *lane* is one webhook config of one task; its rows
are delivered strictly in order, one at a time, retrying with backoff, while
other lanes go on concurrently (at most ``concurrency`` attempts in flight,
at most ``per_host`` of them to one host, and none to a host whose circuit
is open: see :mod:`.hosts`). The dispatcher is woken when rows are queued
and polls for rows whose retry is due, so pending rows are picked up after a
restart too.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

import httpx
import trio

from .. import telemetry
from .._http import CLIENT_LIMITS
from ..protocol import StorageFullError
from ..store import Lane, Notification, Outbox, PushConfigs
from ..store.coordination import Coordination
from ..store.observer import NO_OBSERVER, Observer
from ..store.outbox_caps import OutboxCaps
from .hosts import Host, HostGate
from .policy import Decision, PushSettings, decide
from .screening import AddressScreen, ScreenedTarget, WebhookRefused

__all__ = ["DeliveryStore", "PushDispatcher"]

log = logging.getLogger("a2a_trio.push")

NOTIFICATION_ID_HEADER = "X-A2A-Notification-Id"
TOKEN_HEADER = "X-A2A-Notification-Token"


class _PinnedTransport(httpx.AsyncBaseTransport):
    """Connects to the address that was screened, whatever DNS says now.

    The URL keeps its host name for the Host header; TLS verifies the
    certificate against that name (SNI), while the socket goes to ``address``.
    """

    def __init__(self, address: str | None, ssl_context: ssl.SSLContext) -> None:
        self._address = address
        self._inner = httpx.AsyncHTTPTransport(retries=0, verify=ssl_context, limits=CLIENT_LIMITS)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._address is not None:
            host = request.url.host
            request.url = request.url.copy_with(host=self._address)
            request.extensions = {**request.extensions, "sni_hostname": host}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Clients:
    """HTTP clients per (scheme, host, port, address), so a pooled connection is
    only ever reused for the same name and the same checked address."""

    def __init__(self, limit: int = 128) -> None:
        self._clients: OrderedDict[tuple[str, str, int, str | None], httpx.AsyncClient] = (
            OrderedDict()
        )
        self._limit = limit
        # Building an SSL context costs tens of milliseconds of CPU: once is enough.
        self._ssl_context = httpx.create_ssl_context()

    async def get(self, target: ScreenedTarget) -> httpx.AsyncClient:
        key = (target.scheme, target.host, target.port, target.address)
        client = self._clients.get(key)
        if client is not None:
            self._clients.move_to_end(key)
            return client
        client = httpx.AsyncClient(
            transport=_PinnedTransport(target.address, self._ssl_context), follow_redirects=False
        )
        self._clients[key] = client
        if len(self._clients) > self._limit:
            _, evicted = self._clients.popitem(last=False)
            await evicted.aclose()
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


class DeliveryStore(Outbox, PushConfigs, Protocol):
    """What the dispatcher asks of a store (every :class:`~a2a_trio.store.Store` has it).

    The outbox, the configs its lanes deliver to, and how several processes
    share the lanes.
    """

    @property
    def coordination(self) -> Coordination | None:
        """See :attr:`a2a_trio.store.Lifetime.coordination`."""


class PushDispatcher:
    """Delivers the outbox of one database. Run it in a nursery with :meth:`run`."""

    def __init__(
        self,
        store: DeliveryStore,
        settings: PushSettings | None = None,
        *,
        screen: AddressScreen | None = None,
        wall_clock: Callable[[], float] = time.time,
        poll_interval: float = 1.0,
    ) -> None:
        self.store = store
        self.settings = settings or PushSettings()
        self.screen = screen or AddressScreen(
            enabled=self.settings.screening, allowed_hosts=self.settings.allowed_hosts
        )
        self._wall_clock = wall_clock
        store.outbox_caps = OutboxCaps(
            self.settings.max_pending_per_webhook, self.settings.max_pending_per_task
        )
        #: How often the outbox is read without a wake-up (several processes on
        #: PostgreSQL: the cluster's heartbeat says when rows are pending).
        self.poll_interval = poll_interval
        self._limiter = trio.CapacityLimiter(self.settings.concurrency)
        #: Each host's share of the attempts, and its circuit breaker.
        self.hosts = HostGate(
            per_host=self.settings.per_host,
            threshold=self.settings.breaker_threshold,
            cooldown=self.settings.breaker_cooldown,
        )
        self._active: set[Lane] = set()
        self._wakeup = trio.Event()
        self._clients = _Clients()
        self._nursery: trio.Nursery | None = None
        #: Told of every stored attempt (the console, the metrics).
        self.observer: Observer = NO_OBSERVER

    # --- lifetime -------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver until cancelled; undelivered rows stay pending for the next start."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                while True:
                    self._wakeup = trio.Event()
                    try:
                        await self._start_lanes()
                    except Exception:  # the store is failing: look again at the next poll
                        log.exception("push dispatcher could not read the outbox")
                    with trio.move_on_after(self.poll_interval):
                        await self._wakeup.wait()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self._clients.aclose()

    def notify(self) -> None:
        """Rows were queued: look for new lanes now rather than at the next poll."""
        self._wakeup.set()

    async def _start_lanes(self) -> None:
        assert self._nursery is not None
        for lane in await self.store.pending_lanes():
            if lane not in self._active:
                self._active.add(lane)
                self._nursery.start_soon(self._run_lane, lane)

    async def _run_lane(self, lane: Lane) -> None:
        try:
            await self._drain_claimed(lane)
        except StorageFullError:
            pass  # logged once, by the store; the rows stay pending for the next pass
        except Exception:
            # One lane's surprise must not stop every other delivery (or the app):
            # its rows stay pending and the next pass retries them.
            log.exception("push lane %s/%s/%s failed", lane.agent, lane.task_id, lane.config_id)
        finally:
            self._active.discard(lane)

    async def flush(self, agent: str, task_id: str) -> None:
        """Direct delivery: deliver the task's pending rows now, in the caller.

        Lanes another delivery is already draining are left to it, and so
        are lanes whose host's circuit is open: the worker delivers them once
        it closes, rather than the task's stream waiting out the cool-down.
        """
        for lane in await self.store.pending_lanes(agent, task_id):
            if lane in self._active:
                continue
            self._active.add(lane)
            try:
                await self._drain_claimed(lane, in_caller=True)
            except _HostWaits:
                pass
            finally:
                self._active.discard(lane)

    # --- one lane ----------------------------------------------------------------------

    async def _drain_claimed(self, lane: Lane, *, in_caller: bool = False) -> None:
        """Drain the lane if no other process delivers it (several processes: a lane lease).

        A lane another live process delivers is left to it; one whose process
        died is claimed at the next look (a poll, or rows queued here).
        """
        coordination = self.store.coordination
        if coordination is None:
            await self._drain(lane, in_caller=in_caller)
            return
        if not await coordination.claim_lane(lane.agent, lane.task_id, lane.config_id):
            return
        try:
            await self._drain(lane, in_caller=in_caller)
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                try:
                    await coordination.release_lane(lane.agent, lane.task_id, lane.config_id)
                except Exception as error:  # it goes with this process's membership
                    log.warning("could not release push lane %s: %s", lane.task_id, error)

    async def _drain(self, lane: Lane, *, in_caller: bool = False) -> None:
        """Deliver the lane's rows one by one, oldest first, until none is pending.

        ``in_caller`` (direct delivery): raise :class:`_HostWaits` rather than
        wait for a host whose circuit is open.
        """
        waited = False
        while (notification := await self.store.next_notification(lane)) is not None:
            due_in = notification.next_attempt_at - self._wall_clock()
            if due_in > 0 and not waited:
                # A row found waiting (after a restart, say) waits out its due time.
                await trio.sleep(min(due_in, self.settings.max_wait))
            decision = await self._attempt(notification, in_caller=in_caller)
            waited = decision.outcome == "retry"
            if waited:
                # The wait runs on trio's clock; the stored due time serves a restart.
                await trio.sleep(decision.wait)

    async def _attempt(self, notification: Notification, *, in_caller: bool = False) -> Decision:
        lane = notification.lane
        config = await self.store.get_push_config(
            lane.agent, lane.task_id, lane.config_id, owner=None
        )
        if config is None:
            await self.store.abandon_notification(notification, "the webhook config was deleted")
            self.observer.attempted(notification, "abandoned", None, "config deleted")
            return Decision("failed", error="config deleted")
        attempt = notification.attempts + 1
        started = trio.current_time()
        status: int | None = None
        try:
            target = await self.screen.screen(config.url)
        except WebhookRefused as refusal:
            decision = decide(
                attempt,
                self.settings,
                error=f"refused: {refusal.reason}",
                retryable_error=refusal.retryable,
            )
        else:
            headers = {
                "Content-Type": "application/json",
                NOTIFICATION_ID_HEADER: notification.notification_id,
            }
            if config.authentication is not None and config.authentication.credentials:
                auth = config.authentication
                headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
            if config.token:
                headers[TOKEN_HEADER] = config.token
            host = (target.scheme, target.host, target.port)
            if in_caller and self.hosts.is_open(host):
                raise _HostWaits
            # The host's turn first: attempts waiting for a slow host wait
            # there, never in the queue every other host's attempts share.
            async with self.hosts.turn(host), self._limiter:
                with telemetry.webhook_attempt(
                    notification, attempt, target.host, target.port, headers
                ) as traced:
                    decision, status = await self._post(
                        target, host, notification.payload, headers, attempt
                    )
                    traced.answered(decision.outcome, status, decision.error)
        duration_ms = (trio.current_time() - started) * 1000
        next_at = self._wall_clock() + decision.wait if decision.outcome == "retry" else 0.0
        await self.store.record_attempt(
            notification,
            outcome=decision.outcome,
            status=status,
            error=decision.error,
            duration_ms=duration_ms,
            next_attempt_at=next_at,
        )
        self.observer.attempted(notification, decision.outcome, status, decision.error)
        level = logging.INFO if decision.outcome == "delivered" else logging.WARNING
        log.log(
            level,
            "push %s to %s (task %s, event %d, attempt %d): %s",
            notification.notification_id,
            lane.config_id,
            lane.task_id,
            notification.seq,
            attempt,
            decision.error or "delivered",
        )
        return decision

    async def _post(
        self,
        target: ScreenedTarget,
        host: Host,
        payload: str,
        headers: dict[str, str],
        attempt: int,
    ) -> tuple[Decision, int | None]:
        client = await self._clients.get(target)
        with trio.move_on_after(self.settings.timeout) as deadline:
            try:
                response = await client.post(
                    target.url, content=payload.encode(), headers=headers, timeout=None
                )
            except UnicodeError as error:
                # A header an older version let through (non-ASCII token): this
                # attempt fails, the lane goes on; the host is not to blame.
                return decide(attempt, self.settings, error=_describe(error)), None
            except httpx.HTTPError as error:
                self.hosts.unanswered(host)
                return decide(attempt, self.settings, error=_describe(error)), None
        if deadline.cancelled_caught:
            self.hosts.unanswered(host)
            message = f"no answer within {self.settings.timeout:g} s"
            return decide(attempt, self.settings, error=message), None
        self.hosts.answered(host)
        decision = decide(
            attempt,
            self.settings,
            status=response.status_code,
            retry_after=response.headers.get("Retry-After"),
        )
        return decision, response.status_code


class _HostWaits(Exception):
    """A direct delivery met a host whose circuit is open: the worker takes the lane."""


def _describe(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__

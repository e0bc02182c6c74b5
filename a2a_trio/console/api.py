"""The console's JSON API: agents, tasks and their timelines, deliveries, counters, members.

Every endpoint asks for an operator (:mod:`.access`). An operator acts for a
task's owner (a cancel follows the host's own rules) and sees every owner's
tasks; nothing served holds a credential or a webhook's secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from quart import Response, request

from ..protocol import A2AError, CancelTaskRequest, TaskState
from ..runtime.executor import Principal
from ..server import A2AApp
from ..store import Delivery, Store
from ..store.browse import merge_pages
from .access import Access, unauthorized
from .delivery_pages import ReadRows, read_page
from .fleet_view import deployment_counters, members, outbox_of, webhook_hosts
from .hub import FeedHub
from .responses import error_response, json_response

__all__ = ["MAX_PAGE", "ConsoleApi"]

#: The most rows one page of tasks, timeline entries or deliveries holds.
MAX_PAGE = 500


class ConsoleApi:
    """The JSON endpoints of the console of ``app``.

    ``stats`` is this process's share of the deployment's counters, and
    ``base_url`` where the app is served (None: the request's host).
    """

    def __init__(
        self,
        app: A2AApp,
        hub: FeedHub,
        access: Access,
        stats: Callable[[], dict[str, float]],
        base_url: Callable[[], str | None],
    ) -> None:
        self._app = app
        self._hub = hub
        self._access = access
        self._stats = stats
        self._base_url = base_url

    def routes(self) -> list[tuple[str, str, Any, list[str]]]:
        """(rule below the console's path, endpoint name, view, methods) of each endpoint."""
        return [
            ("/api/agents", "agents", self.agents, ["GET"]),
            ("/api/tasks", "tasks", self.tasks, ["GET"]),
            ("/api/tasks/<agent>/<path:task_id>/cancel", "cancel", self.cancel, ["POST"]),
            ("/api/tasks/<agent>/<path:task_id>", "task", self.task, ["GET"]),
            ("/api/deliveries", "deliveries", self.deliveries, ["GET"]),
            ("/api/deliveries/<int:outbox_id>/redrive", "redrive", self.redrive, ["POST"]),
            ("/api/counters", "counters", self.counters, ["GET"]),
            ("/api/members", "members", self.members, ["GET"]),
        ]

    def _store_of(self, agent: str | None) -> Store:
        """The store an agent's tasks live in (the app's own for another name)."""
        mount = self._app.mounts.get(agent) if agent is not None else None
        return mount.host.store if mount is not None else self._app.store

    def _stores(self, agent: str | None) -> list[Store]:
        """The stores to read ``agent``'s tasks from: every database's for None."""
        if agent is not None:
            return [self._store_of(agent)]
        return [database.store for database in self._app.databases.all]

    async def _operator(self) -> bool:
        return await self._access.is_operator(request.headers.get("Authorization"))

    async def agents(self) -> Response:
        """Every mounted agent: name, prefix, served card, executions running."""
        if not await self._operator():
            return unauthorized()
        base = (self._base_url() or request.host_url).rstrip("/")
        agents = [
            {
                "name": mount.name,
                "prefix": mount.prefix or "/",
                "card": mount.card.served(base).to_wire(),
                "running": mount.host.executions_running,
            }
            for mount in self._app.mounts.values()
        ]
        return json_response({"agents": agents})

    async def tasks(self) -> Response:
        """A page of tasks, by agent and state (``pageSize``, ``pageToken``)."""
        if not await self._operator():
            return unauthorized()
        args = request.args
        try:
            state = _state(args.get("state"))
            size = _size(args.get("pageSize"), 50)
            agent = args.get("agent") or None
            pages = [
                await store.browse_tasks(
                    agent, state=state, page_size=size, page_token=args.get("pageToken") or None
                )
                for store in self._stores(agent)
            ]
            page = pages[0] if len(pages) == 1 else merge_pages(pages, size)
        except (ValueError, A2AError) as error:
            return error_response(400, "INVALID_ARGUMENT", str(error))
        return json_response(
            {
                "tasks": [
                    {
                        "agent": task.agent,
                        "id": task.id,
                        "owner": task.owner,
                        "contextId": task.context_id,
                        "state": task.state,
                        "createdAt": task.created_at,
                        "updatedAt": task.updated_at,
                    }
                    for task in page.tasks
                ],
                "nextPageToken": page.next_page_token,
            }
        )

    async def task(self, agent: str, task_id: str) -> Response:
        """One task: its timeline (after ``after``) and its webhook deliveries."""
        if not await self._operator():
            return unauthorized()
        store = self._store_of(agent)
        stored = await store.get_task(agent, task_id, owner=None)
        if stored is None or agent not in self._app.mounts:
            return error_response(404, "NOT_FOUND", f"no task {task_id!r} of agent {agent!r}")
        after = int(request.args.get("after") or 0)
        entries = await store.timeline(agent, task_id, after=after, limit=MAX_PAGE)
        deliveries = await store.delivery_page(agent, task_id, limit=MAX_PAGE)
        hosts = await webhook_hosts(store, deliveries)
        return json_response(
            {
                "agent": agent,
                "id": task_id,
                "owner": stored.owner,
                "state": stored.state.value,
                "contextId": stored.task.context_id,
                "timeline": [
                    {"seq": e.seq, "kind": e.kind, "at": e.at, "event": json.loads(e.payload)}
                    for e in entries
                ],
                "more": len(entries) == MAX_PAGE,
                "deliveries": [_delivery(d, hosts[d.id]) for d in deliveries],
            }
        )

    async def cancel(self, agent: str, task_id: str) -> Response:
        """Cancel a task as its owner would (the host's rules apply)."""
        if not await self._operator():
            return unauthorized()
        mount = self._app.mounts.get(agent)
        stored = await mount.host.store.get_task(agent, task_id, owner=None) if mount else None
        if mount is None or stored is None:
            return error_response(404, "NOT_FOUND", f"no task {task_id!r} of agent {agent!r}")
        # The operator acts for the task's owner: the host's own rules apply.
        owner = Principal(identifier=stored.owner, authenticated=True)
        try:
            task = await mount.host.cancel_task(CancelTaskRequest(id=task_id), owner)
        except A2AError as error:
            return error_response(error.http_status, error.spec.reason, error.message)
        return json_response({"id": task_id, "state": task.status.state.value})

    async def deliveries(self) -> Response:
        """A page of webhook deliveries, by agent, task and state (``pageSize``, ``pageToken``).

        Every database's when no agent is named, the most recently queued
        first; ``before`` (an id, with ``nextBefore``) pages one database only.
        """
        if not await self._operator():
            return unauthorized()
        args = request.args
        agent, task, state = args.get("agent") or None, args.get("task") or None, args.get("state")
        stores = self._stores(agent)
        try:
            before = int(args["before"]) if args.get("before") else None
            size = _size(args.get("pageSize"), 50)
            if before is not None and len(stores) > 1:
                raise ValueError(
                    "before: delivery ids are numbered in each database, and this app has"
                    f" {len(stores)}; page with pageToken (nextPageToken), or name an agent"
                )
            if before is not None and args.get("pageToken"):
                raise ValueError("before and pageToken: give one of them")

            def reader(store: Store) -> ReadRows:
                async def read(cursor: int | None, limit: int) -> list[Delivery]:
                    return await store.delivery_page(
                        agent, task, state=state or None, before=cursor or before, limit=limit
                    )

                return read

            page = await read_page(
                [store.display for store in stores],
                [reader(store) for store in stores],
                json.dumps([agent, task, state or None]),
                args.get("pageToken") or None,
                size,
            )
        except ValueError as error:  # PageTokenError too
            return error_response(400, "INVALID_ARGUMENT", str(error))
        hosts: dict[tuple[int, int], str | None] = {}
        for index, store in enumerate(stores):
            found = await webhook_hosts(store, [d for at, d in page.rows if at == index])
            hosts.update(((index, delivery_id), host) for delivery_id, host in found.items())
        shown = [_delivery(d, hosts[at, d.id]) for at, d in page.rows]
        return json_response(
            {
                "deliveries": shown,
                "nextPageToken": page.next_page_token,
                # One database's rows: the last id shown, for ``before``.
                "nextBefore": page.rows[-1][1].id
                if page.next_page_token and len(stores) == 1 and page.rows
                else None,
            }
        )

    async def redrive(self, outbox_id: int) -> Response:
        """Queue a failed delivery again (of ``agent``'s database when named: ids are
        numbered in each database)."""
        if not await self._operator():
            return unauthorized()
        store = self._store_of(request.args.get("agent") or None)
        if not await store.requeue_notification(outbox_id):
            return error_response(404, "NOT_FOUND", f"no failed delivery {outbox_id}")
        for database in self._app.databases.all:
            if database.store is store:
                database.push.notify()
        return json_response({"id": outbox_id, "state": "pending"})

    async def counters(self) -> Response:
        """The deployment's counters, the outbox's backlog and the feed's position."""
        if not await self._operator():
            return unauthorized()
        outbox = await outbox_of(self._app)
        oldest = outbox.oldest_pending
        # The whole deployment's, with each member's share ("members").
        counters = await deployment_counters(self._app, self._stats())
        return json_response(
            {
                **counters,
                "outboxBacklog": outbox.pending,
                "oldestPendingSeconds": max(0.0, time.time() - oldest.timestamp())
                if oldest
                else 0.0,
                "deadLetters": outbox.failed,
                # Webhook hosts whose circuit is open, and the outbox caps that
                # turn a backlog past them into dead letters (docs/push.md).
                "openWebhookHosts": [
                    {"host": host, "secondsLeft": round(left, 1)}
                    for host, left in sorted(self._app.push.hosts.open_hosts().items())
                ],
                "outboxCaps": {
                    "perWebhook": self._app.store.outbox_caps.per_webhook,
                    "perTask": self._app.store.outbox_caps.per_task,
                },
                "feedSubscribers": len(self._hub.subscribers),
                "feedSeq": self._hub.seq,
            }
        )

    async def members(self) -> Response:
        """The processes serving the database, each with its share of the counters."""
        if not await self._operator():
            return unauthorized()
        return json_response({"members": await members(self._app, self._stats())})


def _state(value: str | None) -> TaskState | None:
    if not value:
        return None
    wire = value.upper() if value.upper().startswith("TASK_STATE_") else f"TASK_STATE_{value}"
    try:
        return TaskState(wire.upper())
    except ValueError:
        raise ValueError(f"unknown state {value!r}") from None


def _size(value: str | None, default: int) -> int:
    size = int(value) if value else default
    if not 1 <= size <= MAX_PAGE:
        raise ValueError(f"pageSize must be 1 to {MAX_PAGE}")
    return size


def _delivery(delivery: Delivery, host: str | None) -> dict[str, Any]:
    # The config is named and its webhook's host shown, never its URL's path or
    # query, its token or credentials: they stay in the store.
    return {
        "webhookHost": host,
        "id": delivery.id,
        "notificationId": delivery.notification_id,
        "agent": delivery.agent,
        "task": delivery.task_id,
        "config": delivery.config_id,
        "eventSeq": delivery.seq,
        "state": delivery.state,
        "attemptsMade": delivery.attempts_made,
        "lastError": delivery.last_error,
        "createdAt": delivery.created_at,
        "attempts": [
            {
                "number": a.number,
                "at": a.at,
                "status": a.status,
                "error": a.error,
                "durationMs": round(a.duration_ms, 2),
            }
            for a in delivery.attempts
        ],
    }

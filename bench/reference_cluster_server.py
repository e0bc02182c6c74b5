"""a2a-sdk 1.3's cluster mode: ``python -m bench.reference_cluster_server PORT PG_URL``.

One replica of the reference in the SDK's own multi-replica configuration
(``a2a.server.cluster``): ``DefaultRequestHandler`` (1.3: ``DefaultRequestHandlerV2``)
with a ``VersionedDatabaseTaskStore`` -- which records every event in the
``task_events`` table in the transaction that saves the task -- and a
``DatabaseTaskEventStream`` on the same engine, which a replica that does not
run a task polls for that task's new events every ``poll_interval_s`` (its
default, 0.5 s, unless ``--poll S`` is given). Several replicas on one
PostgreSQL URL share tasks and events; a subscription on a replica that does not
run the task serves the stored snapshot and then tails that table.

The executor is :mod:`bench.reference_server`'s (echo, ``hold``) plus ``tick``
as in :mod:`bench.cluster_server`: N WORKING updates whose text carries
``time.time()`` just before each is enqueued. uvicorn with uvloop and httptools,
one process; the engine is :func:`bench.reference_server.database_engine`'s
(asyncpg, a pool keeping up to 64 connections).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from a2a.helpers import get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import RequestContext
from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import TaskUpdater
from starlette.applications import Starlette

from .common import CARD_PATH, JSONRPC_PATH, REST_PREFIX, TICK_PREFIX, tick_text
from .reference_server import BenchExecutor, bench_card, database_engine, run_uvicorn


class ClusterBenchExecutor(BenchExecutor):
    """The reference bench agent, plus ``tick N INTERVAL_MS DELAY_MS``."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        words = get_message_text(context.message).split()
        if not words or words[0] != TICK_PREFIX:
            await super().execute(context, event_queue)
            return
        count, interval_ms, delay_ms = (int(word) for word in words[1:4])
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await asyncio.sleep(delay_ms / 1000)
        for number in range(1, count + 1):
            await asyncio.sleep(interval_ms / 1000)
            message = updater.new_agent_message(
                parts=[new_text_part(tick_text(number, time.time()))]
            )
            await updater.start_work(message=message)
        await updater.complete()


def build_app(port: int, database: str, poll_interval_s: float | None) -> Starlette:
    card = bench_card(port)
    engine = database_engine(database)
    task_store = VersionedDatabaseTaskStore(engine)
    stream = (
        DatabaseTaskEventStream(engine)
        if poll_interval_s is None
        else DatabaseTaskEventStream(engine, poll_interval_s=poll_interval_s)
    )
    handler = DefaultRequestHandler(
        agent_executor=ClusterBenchExecutor(),
        task_store=task_store,
        agent_card=card,
        event_stream=stream,
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await task_store.initialize()
        await stream.initialize()
        try:
            yield
        finally:
            await handler.aclose()
            await engine.dispose()

    routes = [
        *create_agent_card_routes(card, card_url=CARD_PATH),
        *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH),
        *create_rest_routes(handler, path_prefix=REST_PREFIX),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main(argv: list[str]) -> None:
    poll: float | None = None
    if len(argv) == 4 and argv[2] == "--poll":
        poll = float(argv[3])
        argv = argv[:2]
    if len(argv) != 2:
        raise SystemExit(
            "usage: python -m bench.reference_cluster_server PORT postgresql://... [--poll S]"
        )
    port, database = int(argv[0]), argv[1]
    run_uvicorn(build_app(port, database, poll), port)


if __name__ == "__main__":
    main(sys.argv[1:])

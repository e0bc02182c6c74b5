"""a2a-trio for the cluster bench: ``python -m bench.cluster_server PORT PG_URL [MODE]``.

MODE ``queued`` mounts the agent with ``execution="queued"`` (a web process:
its executions run on workers); ``worker`` runs it as a queue worker
(:meth:`A2AApp.work`, no HTTP; PORT is ignored).

The bench agent of :mod:`bench.trio_server` (echo, ``hold``) plus ``tick``, on
one PostgreSQL database that several such processes share (their cross-process
feed and leases, ``docs/storage.md``). Served by ``hypercorn.trio.serve`` on
127.0.0.1:PORT, one process, as :mod:`bench.trio_server` is.

``tick N INTERVAL_MS DELAY_MS``: WORKING, then after ``DELAY_MS`` (time for a
subscriber to connect elsewhere) N status updates ``INTERVAL_MS`` apart, each
WORKING with the message text ``tick I T`` where ``T`` is ``time.time()`` just
before the update is enqueued; then COMPLETED. :mod:`bench.cluster` reads ``T``
on another process's SSE stream.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Literal

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from a2a_trio import A2AApp, EventQueue, RequestContext, TaskUpdater
from a2a_trio.push import PushSettings
from a2a_trio.server.serving import KEEP_ALIVE_TIMEOUT

from .common import TICK_PREFIX, raise_nofile_limit, tick_text
from .trio_server import BenchExecutor, bench_card


class ClusterBenchExecutor(BenchExecutor):
    """The bench agent, plus ``tick N INTERVAL_MS DELAY_MS`` (see the module)."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        words = context.user_text().split()
        if not words or words[0] != TICK_PREFIX:
            await super().execute(context, queue)
            return
        count, interval_ms, delay_ms = (int(word) for word in words[1:4])
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        await trio.sleep(delay_ms / 1000)
        for number in range(1, count + 1):
            await trio.sleep(interval_ms / 1000)
            await updater.start_work(tick_text(number, time.time()))
        await updater.complete()


def build_app(database: str, *, queued: bool = False) -> A2AApp:
    """The app on the shared database: the bench agent at the root (queued, or inline)."""
    app = A2AApp(
        database=database,
        push_settings=PushSettings(allowed_hosts=("127.0.0.1",)),
    )
    execution: Literal["inline", "queued"] = "queued" if queued else "inline"
    app.mount("", bench_card(), ClusterBenchExecutor(), execution=execution)
    return app


async def work(database: str) -> None:
    """A queue worker for the queued bench agent, until SIGTERM."""
    app = build_app(database, queued=True)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(app.work)
            async for _ in signals:
                app.begin_shutdown()
                break


def main(argv: list[str]) -> None:
    if len(argv) not in (2, 3) or argv[2:] not in ([], ["queued"], ["worker"]):
        raise SystemExit(
            "usage: python -m bench.cluster_server PORT postgresql://... [queued|worker]"
        )
    port, database, mode = int(argv[0]), argv[1], (argv[2:] or ["inline"])[0]
    if mode == "worker":
        trio.run(work, database)
        return
    raise_nofile_limit()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.backlog = 4096
    config.accesslog = None
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT  # as a2a-trio serve and docs/deployment.md
    trio.run(serve, build_app(database, queued=mode == "queued"), config)


if __name__ == "__main__":
    main(sys.argv[1:])

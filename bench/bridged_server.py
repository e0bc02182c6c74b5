"""The bench agent written for asyncio: ``python -m bench.bridged_server PORT DATABASE``.

The server of ``bench.trio_server`` with the same agent (echo; ``hold ...``
works until cancelled) written as an :class:`a2a_trio.AsyncioAgentExecutor`,
so every execution goes through the asyncio bridge: one asyncio task on the
agent's loop thread, each event handed back to trio. Against ``a2a-trio`` in
the same run, the difference is what the bridge costs per request.
"""

from __future__ import annotations

import asyncio
import sys

from a2a_trio import AsyncioAgentExecutor, AsyncioEventQueue, RequestContext, TaskUpdater

from .common import HOLD_PREFIX
from .trio_server import main


class AsyncioBenchExecutor(AsyncioAgentExecutor):
    """``BenchExecutor`` on asyncio: SUBMITTED, WORKING, the echo artifact, COMPLETED."""

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        text = context.user_text()
        if text.startswith(HOLD_PREFIX):
            await asyncio.Event().wait()
        await updater.add_artifact(text or "(no text)", name="echo")
        await updater.complete()


if __name__ == "__main__":
    main(sys.argv[1:], AsyncioBenchExecutor())

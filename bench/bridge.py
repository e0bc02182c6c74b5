"""What the asyncio bridge costs, without HTTP or storage: ``python -m bench.bridge``.

In one process, the bench's echo agent runs N times on trio
(``BenchExecutor``) and N times through the bridge (``AsyncioBenchExecutor``
in an :class:`a2a_trio.AsyncioBridge`), each execution straight into an
:class:`a2a_trio.EventQueue` that is drained after it: the difference is the
bridge's cost per execution (one asyncio task started across the threads,
four events handed back, the outcome). Then one execution of each enqueues M
artifact events: the difference per event is the cost of one hand-off. Both
sides run alternately, in rounds, and the medians are reported. The server
pair ``a2a-trio`` / ``a2a-trio-bridged`` of ``python -m bench`` measures the
same over HTTP and SQLite, where it is a small part of a request.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence

import trio

from a2a_trio import (
    AgentExecutor,
    AsyncioAgentExecutor,
    AsyncioBridge,
    AsyncioEventQueue,
    EventQueue,
    Message,
    Part,
    RequestContext,
    Role,
    TaskUpdater,
)

from .bridged_server import AsyncioBenchExecutor
from .trio_server import BenchExecutor


class TrioBurst(AgentExecutor):
    """Enqueues ``int(text)`` artifact chunks, on trio."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        for i in range(int(context.user_text())):
            await updater.add_artifact("x", artifact_id="a", append=i > 0)


class AsyncioBurst(AsyncioAgentExecutor):
    """Enqueues ``int(text)`` artifact chunks, on asyncio."""

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        for i in range(int(context.user_text())):
            await updater.add_artifact("x", artifact_id="a", append=i > 0)
        await asyncio.sleep(0)


def context_for(text: str) -> RequestContext:
    message = Message(message_id="m", role=Role.USER, parts=[Part(text=text)])
    return RequestContext(task_id="t", context_id="c", message=message)


async def timed(executor: AgentExecutor, text: str, times: int) -> tuple[float, int]:
    """Seconds per execution (mean over ``times``) and the events one execution enqueued."""
    queue, events = EventQueue.open()
    context = context_for(text)
    count = 0
    started = time.perf_counter()
    for _ in range(times):
        await executor.execute(context, queue)
        count = 0
        while True:
            try:
                events.receive_nowait()
            except trio.WouldBlock:
                break
            count += 1
    return (time.perf_counter() - started) / times, count


async def measure(executions: int, events: int, rounds: int) -> dict[str, float]:
    native, bridged = BenchExecutor(), AsyncioBridge(AsyncioBenchExecutor())
    native_burst, bridged_burst = TrioBurst(), AsyncioBridge(AsyncioBurst())
    per_execution: dict[str, list[float]] = {"trio": [], "bridged": []}
    per_event: dict[str, list[float]] = {"trio": [], "bridged": []}
    async with bridged.lifespan(), bridged_burst.lifespan():
        await timed(bridged, "hello", 50)  # warm-up: the loop's first tasks
        for _ in range(rounds):
            for name, executor in (("trio", native), ("bridged", bridged)):
                seconds, count = await timed(executor, "hello", executions)
                assert count == 4, count
                per_execution[name].append(seconds)
            for name, burst in (("trio", native_burst), ("bridged", bridged_burst)):
                seconds, count = await timed(burst, str(events), 1)
                assert count == events, count
                per_event[name].append(seconds / events)
    median = statistics.median
    return {
        "trio_execution_us": median(per_execution["trio"]) * 1e6,
        "bridged_execution_us": median(per_execution["bridged"]) * 1e6,
        "trio_event_us": median(per_event["trio"]) * 1e6,
        "bridged_event_us": median(per_event["bridged"]) * 1e6,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bridge", description=__doc__)
    parser.add_argument("--executions", type=int, default=2000, help="per round (default 2000)")
    parser.add_argument("--events", type=int, default=20000, help="in the burst (default 20000)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    args = parser.parse_args(argv)
    result = trio.run(measure, args.executions, args.events, args.rounds)
    execution = result["bridged_execution_us"] - result["trio_execution_us"]
    event = result["bridged_event_us"] - result["trio_event_us"]
    print(
        f"echo execution (4 events): trio {result['trio_execution_us']:.1f} µs, "
        f"bridged {result['bridged_execution_us']:.1f} µs: the bridge adds {execution:.1f} µs\n"
        f"one event in a burst: trio {result['trio_event_us']:.2f} µs, "
        f"bridged {result['bridged_event_us']:.2f} µs: the bridge adds {event:.2f} µs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

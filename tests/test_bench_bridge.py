"""The bridge's bench case (bench/bridge.py) runs and counts what it measures.

Only that it works: the figures themselves belong to ``python -m bench.bridge``.
"""

from __future__ import annotations

import threading

from a2a_trio.adapters.asyncio import THREAD_NAME
from bench.bridge import measure


async def test_the_bridge_bench_measures_both_sides_and_leaves_no_thread() -> None:
    result = await measure(executions=5, events=200, rounds=1)
    assert set(result) == {
        "trio_execution_us",
        "bridged_execution_us",
        "trio_event_us",
        "bridged_event_us",
    }
    assert all(value > 0 for value in result.values())
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]

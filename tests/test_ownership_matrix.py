"""Task ownership, every operation that names a task: to bob, alice's task does not exist.

For each operation and each state of alice's task, bob gets exactly what he gets
for a task id that never existed, and changes nothing. A file of its own (its
fixtures and helpers are test_ownership's): with a test file to an xdist
worker, its 108 servers and the 68 tests of test_ownership run side by side.
"""

from __future__ import annotations

import pytest
import trio

from .test_bindings import BINDINGS
from .test_ownership import (
    OPERATIONS,
    SCENARIOS,
    TIME_LIMIT,
    Parties,
    assert_hidden_from,
    secured,
    start_task,
)

__all__ = ["secured"]  # the fixture, used by name


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("binding", BINDINGS)
async def test_alices_task_is_not_found_for_bob_exactly_like_a_task_that_never_existed(
    secured: Parties, binding: str, operation: str, scenario: str
) -> None:
    """AUTH-SCOPE-001 (every operation checks the caller), AUTH-SCOPE-003 (no existence leaks)."""
    with trio.fail_after(TIME_LIMIT):
        task = await start_task(secured, secured.alice, binding, scenario)
        await assert_hidden_from(secured, secured.bob, binding, operation, task["id"])

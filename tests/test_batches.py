"""Writes handed in during one scheduling pass share one write (runtime.batches)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_trio.runtime.batches import Batch


def taking_a_second(written: list[list[int]]) -> Callable[[list[int]], Awaitable[None]]:
    """A write that takes a second, then notes its batch (sorted) in ``written``."""

    async def write(items: list[int]) -> None:
        await trio.sleep(1)
        written.append(sorted(items))

    return write


async def test_writes_handed_in_together_are_written_together(
    autojump_clock: trio.testing.MockClock,
) -> None:
    written: list[list[int]] = []

    async def write(items: list[int]) -> None:
        written.append(sorted(items))
        await trio.sleep(1)

    batch = Batch(write)
    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(batch.add, n)
        await trio.sleep(0.5)  # the first batch is being written: these wait for the next
        for n in range(3, 5):
            nursery.start_soon(batch.add, n)
    assert written == [[0, 1, 2], [3, 4]]


async def test_each_writer_of_a_failed_batch_hears_its_error() -> None:
    async def write(items: list[int]) -> None:
        raise OSError(f"could not write {sorted(items)}")

    batch = Batch(write)
    errors: list[str] = []

    async def add(n: int) -> None:
        with pytest.raises(OSError) as caught:
            await batch.add(n)
        errors.append(str(caught.value))

    async with trio.open_nursery() as nursery:
        for n in range(2):
            nursery.start_soon(add, n)
    assert errors == ["could not write [0, 1]"] * 2


async def test_a_write_cancelled_under_its_writer_fails_its_batch_and_the_next_is_written(
    autojump_clock: trio.testing.MockClock,
) -> None:
    written: list[list[int]] = []
    writes = 0

    async def write(items: list[int]) -> None:
        nonlocal writes
        writes += 1
        if writes == 2:  # [1, 2]: stuck until its writer is cancelled
            await trio.sleep_forever()
        await trio.sleep(1)
        written.append(sorted(items))

    batch = Batch(write)
    outcomes: dict[int, str] = {}

    async def add(n: int, within: float = math.inf) -> None:
        with trio.move_on_after(within):
            try:
                await batch.add(n)
            except RuntimeError as error:
                outcomes[n] = str(error)
            else:
                outcomes[n] = "written"
            return
        outcomes[n] = "cancelled"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(add, 0)
        await trio.sleep(0.1)  # 0 is written until 1 s: 1 and 2 are the next batch,
        nursery.start_soon(add, 1, 1.5)  # written by 1, cancelled at 1.6 under its write
        await trio.sleep(0.1)
        nursery.start_soon(add, 2)
        await trio.sleep(1.1)
        nursery.start_soon(add, 3)  # waits for the next: handed it when 1 is cancelled
    assert outcomes == {
        0: "written",
        1: "cancelled",
        2: "the batch's write was cancelled",
        3: "written",
    }
    assert written == [[0], [3]]


async def test_a_writer_returns_once_its_own_batch_is_written(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The next batch is written by one of its own callers, not by the writer
    # of the one before: under steady load no caller waits for more than the
    # batch before its own.
    written: list[tuple[float, list[int]]] = []
    returned: dict[int, float] = {}

    async def write(items: list[int]) -> None:
        await trio.sleep(1)
        written.append((trio.current_time(), sorted(items)))

    batch = Batch(write)

    async def add(n: int) -> None:
        await batch.add(n)
        returned[n] = trio.current_time()

    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        nursery.start_soon(add, 0)
        await trio.sleep(0.5)  # its write is under way: these are the next batch
        for n in (1, 2):
            nursery.start_soon(add, n)
        await trio.sleep(1)  # the second batch is being written: this the third
        nursery.start_soon(add, 3)
    assert [(at - start, items) for at, items in written] == [
        (1, [0]),
        (2, [1, 2]),
        (3, [3]),
    ]
    assert {n: at - start for n, at in returned.items()} == {0: 1, 1: 2, 2: 2, 3: 3}


async def test_a_caller_cancelled_while_it_waits_is_written_by_the_writer_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    written: list[list[int]] = []
    write = taking_a_second(written)
    batch = Batch(write)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(batch.add, 0)
        await trio.sleep(0.5)
        with trio.move_on_after(0.25):  # gone before the pen could be handed to it
            await batch.add(1)
    assert written == [[0], [1]]
    await batch.add(2)  # and the batch is not stuck
    assert written == [[0], [1], [2]]


async def test_a_shielded_batch_writes_for_the_others_when_its_writer_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    written: list[list[int]] = []
    write = taking_a_second(written)
    batch = Batch(write, shield=True)
    outcomes: dict[int, str] = {}

    async def writer() -> None:
        with trio.move_on_after(0.75) as scope:  # while it writes
            await batch.add(0)
        outcomes[0] = "cancelled" if scope.cancelled_caught else "written"

    async def joining(n: int) -> None:
        await batch.add(n)
        outcomes[n] = "written"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        await trio.sleep(0.25)  # its write is under way: these wait for the next
        for n in (1, 2):
            nursery.start_soon(joining, n)
        await trio.sleep(0.25)
        nursery.start_soon(joining, 3)  # joins them (written by 1 or 2)
    assert written == [[0], [1, 2, 3]]
    assert outcomes == {0: "cancelled", 1: "written", 2: "written", 3: "written"}


#: A caller: when it hands its item in, and how long after it is cancelled (if
#: ever), in tenths of a second.
_callers = st.lists(
    st.tuples(st.integers(0, 30), st.none() | st.integers(0, 30)), min_size=1, max_size=12
)
#: The writes, in turn (again from the first when there are more): how long
#: each takes, in tenths of a second, and whether the database refuses it.
_writes = st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(callers=_callers, writes=_writes, shield=st.booleans())
def test_every_caller_returns_and_writes_never_overlap(
    callers: list[tuple[int, int | None]], writes: list[tuple[int, bool]], shield: bool
) -> None:
    written: list[int] = []
    outcomes: dict[int, str] = {}
    writing = False
    taken = 0

    async def write(items: list[int]) -> None:
        nonlocal writing, taken
        assert not writing, "two writes at once"
        writing = True
        try:
            seconds, refused = writes[taken % len(writes)]
            taken += 1
            await trio.sleep(seconds / 10)
            if refused:
                raise OSError("refused")
            written.extend(items)
        finally:
            writing = False

    batch = Batch(write, shield=shield)

    async def call(n: int, at: int, cancelled_after: int | None) -> None:
        await trio.sleep(at / 10)
        with trio.CancelScope() as scope:
            if cancelled_after is not None:
                scope.deadline = trio.current_time() + cancelled_after / 10
            try:
                await batch.add(n)
            except OSError:
                outcomes[n] = "refused"
            except RuntimeError:
                outcomes[n] = "lost with its writer"
            else:
                outcomes[n] = "written"
        if scope.cancelled_caught:
            outcomes[n] = "cancelled"

    async def main() -> None:
        with trio.fail_after(1_000):  # nobody is left waiting for good
            async with trio.open_nursery() as nursery:
                for n, (at, cancelled_after) in enumerate(callers):
                    nursery.start_soon(call, n, at, cancelled_after)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert sorted(outcomes) == list(range(len(callers)))
    assert len(written) == len(set(written)), "an item written twice"
    for n, outcome in outcomes.items():
        if outcome == "written":
            assert n in written
        elif outcome == "cancelled":
            assert callers[n][1] is not None, f"{n} was never cancelled"
        else:  # refused, or lost with its writer
            assert n not in written

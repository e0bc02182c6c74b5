"""Writes handed in during one scheduling pass share one write (runtime.batches)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from a2a_trio.runtime.batches import Batch


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

    async def write(items: list[int]) -> None:
        if not written:
            written.append([])
            await trio.sleep_forever()
        written.append(sorted(items))

    batch = Batch(write)
    outcomes: dict[int, str] = {}

    async def add(n: int) -> None:
        try:
            await batch.add(n)
        except RuntimeError as error:
            outcomes[n] = str(error)
        else:
            outcomes[n] = "written"

    async with trio.open_nursery() as nursery:

        async def writer() -> None:
            nursery.start_soon(add, 1)  # joins its batch: it runs once 0 is handed in
            with trio.move_on_after(1):  # under its write
                await batch.add(0)
            outcomes[0] = "cancelled"

        nursery.start_soon(writer)
        await trio.sleep(0.5)  # their write is under way: this one waits for the next
        nursery.start_soon(add, 2)
    assert outcomes == {0: "cancelled", 1: "the batch's write was cancelled", 2: "written"}
    assert written == [[], [2]]


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

    async def write(items: list[int]) -> None:
        await trio.sleep(1)
        written.append(sorted(items))

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

    async def write(items: list[int]) -> None:
        await trio.sleep(1)
        written.append(sorted(items))

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

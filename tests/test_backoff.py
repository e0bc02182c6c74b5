"""runtime.backoff.retrying: tried at once, then after pauses doubling from 0.1 s to 5 s."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from a2a_trio.runtime.backoff import retrying


class Refusals:
    """An attempt refused ``times`` times, then answering ``"taken"``; what it saw."""

    def __init__(self, times: int) -> None:
        self.left = times
        self.tries: list[tuple[float, bool]] = []  # (when, told it was the first)
        self.pauses: list[float] = []

    async def attempt(self, first: bool) -> str:
        self.tries.append((trio.current_time(), first))
        if self.left:
            self.left -= 1
            raise OSError("refused")
        return "taken"

    def refused(self, error: Exception, pause: float) -> None:
        assert str(error) == "refused"
        self.pauses.append(pause)


async def test_a_refused_attempt_is_tried_at_once_then_after_pauses_doubling_to_5_s(
    autojump_clock: trio.testing.MockClock,
) -> None:
    refusals = Refusals(8)
    start = trio.current_time()
    assert await retrying(refusals.attempt, refusals.refused) == "taken"
    assert refusals.pauses == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    times = [when - start for when, _ in refusals.tries]
    assert times == pytest.approx([0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3, 11.3, 16.3])
    assert [first for _, first in refusals.tries] == [True] + [False] * 8


async def test_what_refused_raises_ends_the_tries(autojump_clock: trio.testing.MockClock) -> None:
    tries = 0

    async def attempt(first: bool) -> None:
        nonlocal tries
        tries += 1
        raise OSError(f"refused {tries}")

    def refused(error: Exception, pause: float) -> None:
        if tries == 2:
            raise error

    with pytest.raises(OSError, match="refused 2"):
        await retrying(attempt, refused)
    assert tries == 2


async def test_a_result_no_longer_wanted_after_a_pause_is_none(
    autojump_clock: trio.testing.MockClock,
) -> None:
    refusals = Refusals(5)
    wanted = True

    def refused(error: Exception, pause: float) -> None:
        nonlocal wanted
        refusals.refused(error, pause)
        wanted = len(refusals.pauses) < 2

    assert await retrying(refusals.attempt, refused, wanted=lambda: wanted) is None
    assert len(refusals.tries) == 2  # not tried after the second pause


async def test_a_shielded_try_ends_under_a_cancel_and_its_pause_does_not(
    autojump_clock: trio.testing.MockClock,
) -> None:
    finished: list[bool] = []

    async def attempt(first: bool) -> None:
        await trio.sleep(1)  # cancelled meanwhile: shielded, it runs to its end
        finished.append(first)
        raise OSError("refused")

    start = trio.current_time()
    with trio.move_on_after(0.5) as cancelled:
        await retrying(attempt, lambda error, pause: None, shield=True)
    assert cancelled.cancelled_caught
    assert finished == [True]  # its pause was not shielded: no second try
    assert trio.current_time() - start == pytest.approx(1.0)

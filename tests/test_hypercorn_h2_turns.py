"""Whose turn it is to send on an HTTP/2 connection (a2a_trio/server/hypercorn_h2_turns.py).

:class:`SendingTurns` stands where hypercorn keeps its priority tree, so it
answers the questions hypercorn and the mends ask the tree, raising the
tree's errors where hypercorn catches them. Sans-IO: the class alone; the
connections that use it are tests/test_hypercorn_h2.py's.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from priority.priority import (
    DeadlockError,
    DuplicateStreamError,
    MissingStreamError,
    PriorityTree,
)

from a2a_trio.server.hypercorn_h2_turns import SendingTurns


def turns(sending: SendingTurns | PriorityTree, count: int) -> list[int]:
    return [next(sending) for _ in range(count)]


def test_streams_ready_to_send_take_turns_in_order() -> None:
    sending = SendingTurns()
    for stream_id in (1, 3, 5):
        sending.insert_stream(stream_id)

    assert turns(sending, 7) == [1, 3, 5, 1, 3, 5, 1]


def test_a_blocked_stream_is_skipped_until_unblocked_then_queues_last() -> None:
    sending = SendingTurns()
    for stream_id in (1, 3, 5):
        sending.insert_stream(stream_id)
    sending.block(3)

    assert turns(sending, 4) == [1, 5, 1, 5]
    sending.unblock(3)
    assert turns(sending, 3) == [1, 5, 3]


def test_no_stream_ready_is_a_deadlock_as_for_the_tree() -> None:
    sending = SendingTurns()
    with pytest.raises(DeadlockError):
        next(sending)
    sending.insert_stream(1)
    sending.block(1)
    with pytest.raises(DeadlockError):
        next(sending)


def test_unknown_and_duplicate_streams_raise_the_trees_errors() -> None:
    sending = SendingTurns()
    sending.insert_stream(1)
    with pytest.raises(DuplicateStreamError):
        sending.insert_stream(1)
    sending.block(1)
    with pytest.raises(DuplicateStreamError):  # blocked, still there
        sending.insert_stream(1)
    for change in (sending.block, sending.unblock, sending.remove_stream):
        with pytest.raises(MissingStreamError):
            change(7)
    sending.remove_stream(1)
    with pytest.raises(MissingStreamError):
        sending.remove_stream(1)
    assert len(sending) == 0


def test_blocking_and_unblocking_twice_changes_nothing() -> None:
    sending = SendingTurns()
    sending.insert_stream(1)
    sending.insert_stream(3)
    sending.block(1)
    sending.block(1)
    sending.unblock(3)  # ready already: keeps its place

    assert turns(sending, 2) == [3, 3]
    sending.unblock(1)
    sending.unblock(1)
    assert turns(sending, 2) == [3, 1]


# Operations on up to six streams, as hypercorn makes them (insert once, then
# block, unblock, a turn, removal).
operation = st.tuples(
    st.sampled_from(["insert", "block", "unblock", "remove", "next"]), st.integers(0, 5)
)


@settings(max_examples=500, deadline=None)
@given(st.lists(operation, max_size=60))
def test_it_accepts_and_refuses_what_the_tree_does_and_serves_the_same_streams(
    operations: list[tuple[str, int]],
) -> None:
    # The tree serves equal weights in its own order; what must agree is
    # every error, and that each serves only streams ready to send.
    tree, sending = PriorityTree(), SendingTurns()
    ready: set[int] = set()
    known: set[int] = set()
    for name, number in operations:
        stream_id = 2 * number + 1
        outcomes: list[type[Exception] | None] = []
        for scheduler in (tree, sending):
            try:
                if name == "insert":
                    scheduler.insert_stream(stream_id)
                elif name == "block":
                    scheduler.block(stream_id)
                elif name == "unblock":
                    scheduler.unblock(stream_id)
                elif name == "remove":
                    scheduler.remove_stream(stream_id)
                else:
                    served = next(scheduler)
                    assert served in ready, (served, ready)
            except (DeadlockError, DuplicateStreamError, MissingStreamError) as error:
                outcomes.append(type(error))
            else:
                outcomes.append(None)
        assert outcomes[0] == outcomes[1], (name, stream_id)
        if outcomes[0] is None:
            if name in ("insert", "unblock"):
                known.add(stream_id)
                ready.add(stream_id)
            elif name == "block":
                ready.discard(stream_id)
            elif name == "remove":
                known.discard(stream_id)
                ready.discard(stream_id)
    assert len(sending) == len(known)

"""The task state machine as a transition table.

Two kinds of actor move a task:

* the **executor**, through its event queue, is held to :data:`EXECUTOR_MOVES`;
  leaving an interrupted state (INPUT_REQUIRED, AUTH_REQUIRED) is allowed only
  to the execution started by the client's next message for that task;
* the **host** may end any task that is not final: CANCELED on CancelTask,
  FAILED when the executor raised, at shutdown, or after a crash.

Final states never change.
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import TaskState

__all__ = [
    "EXECUTOR_MOVES",
    "HOST_ENDINGS",
    "IllegalTransition",
    "check_executor_move",
    "check_host_ending",
]

S = TaskState

#: Moves an executor may make. ``None`` is a task that does not exist yet.
EXECUTOR_MOVES: dict[TaskState | None, frozenset[TaskState]] = {
    None: frozenset({S.SUBMITTED}),
    S.SUBMITTED: frozenset({S.WORKING, S.REJECTED}),
    # WORKING -> WORKING is a progress update carrying a new status message.
    S.WORKING: frozenset(
        {S.WORKING, S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.CANCELED}
    ),
    S.INPUT_REQUIRED: frozenset({S.WORKING}),
    S.AUTH_REQUIRED: frozenset({S.WORKING}),
}

#: Endings the host may impose on any task that is not final.
HOST_ENDINGS = frozenset({S.CANCELED, S.FAILED})


@dataclass(frozen=True, slots=True)
class IllegalTransition(Exception):
    """A move the table does not allow; the event is refused, never stored."""

    current: TaskState | None
    requested: TaskState
    reason: str

    def __str__(self) -> str:
        current = self.current.value if self.current else "(new)"
        return f"{current} -> {self.requested.value} refused: {self.reason}"


def check_executor_move(
    current: TaskState | None, requested: TaskState, *, may_resume: bool
) -> None:
    """Raise :class:`IllegalTransition` unless the executor may make this move.

    ``may_resume`` is true only for the execution started by a new client
    message while the task was interrupted, and only until that execution
    interrupts the task again.
    """
    if current is not None and current.is_final:
        raise IllegalTransition(current, requested, "the task is in a final state")
    if requested is S.UNSPECIFIED:
        raise IllegalTransition(current, requested, "UNSPECIFIED is not a state")
    if requested not in EXECUTOR_MOVES.get(current, frozenset()):
        raise IllegalTransition(current, requested, "not a transition of the task lifecycle")
    if current is not None and current.is_interrupted and not may_resume:
        raise IllegalTransition(
            current, requested, "an interrupted task resumes only on the client's next message"
        )


def check_host_ending(current: TaskState | None, requested: TaskState) -> None:
    """Raise :class:`IllegalTransition` unless the host may end the task so."""
    if requested not in HOST_ENDINGS:
        raise IllegalTransition(current, requested, "the host only cancels or fails tasks")
    if current is not None and current.is_final:
        raise IllegalTransition(current, requested, "the task is in a final state")

"""Who hears of what was committed: the one hook the console and the metrics hang on.

The recorder tells an :class:`Observer` of every share it stored, once its
transaction has committed, and the push worker of every delivery attempt
once it is stored; the executions tell it when a run starts and ends. The
default observer does nothing, so a server without a console pays one
method call per round. Observers must not block and must not raise: they
run inside the recorder's loop.
"""

from __future__ import annotations

from typing import Literal

from .records import Notification
from .rounds import Share

__all__ = ["NO_OBSERVER", "Observer"]


class Observer:
    """Told of committed writes; every method does nothing unless overridden."""

    def committed(self, agent: str, share: Share, owner: str | None, seconds: float) -> None:
        """``share`` is stored; its round's commit took ``seconds``.

        ``owner`` is the task's owner when the recorder knows it (always for
        a share that creates its task; None for a host's ending of a task no
        execution holds).
        """

    def attempted(
        self,
        notification: Notification,
        outcome: Literal["delivered", "retry", "failed", "abandoned"],
        status: int | None,
        error: str | None,
    ) -> None:
        """A delivery attempt is stored (``failed``: the notification is a dead letter now)."""

    def execution_started(self, agent: str, task_id: str, owner: str) -> None:
        """An execution of ``execute`` began on the task."""

    def execution_ended(self, agent: str, task_id: str, owner: str, error: str | None) -> None:
        """The execution is done and its events recorded (``error``: a host failure)."""


#: The observer of a host or dispatcher nobody observes.
NO_OBSERVER = Observer()

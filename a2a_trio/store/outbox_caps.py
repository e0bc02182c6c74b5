"""Caps on the pending push outbox: per webhook config of a task, and per task.

A task whose webhook never answers would otherwise queue every event it
records, without end. Past a cap the oldest pending notifications are kept
(they go first, in order) and the newer ones are stored as dead letters
(``failed``, with the reason), so an operator sees them and can requeue
them. Both backends run the same statement, in the transaction that queued
the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OutboxCaps", "cap_parameters", "cap_statement"]


@dataclass(frozen=True, slots=True)
class OutboxCaps:
    """``push.max_pending_per_webhook`` and ``push.max_pending_per_task``."""

    per_webhook: int = 100
    per_task: int = 1000

    def reasons(self) -> tuple[str, str]:
        """The dead letters' reasons: over the webhook's cap, over the task's."""
        return (
            f"outbox cap: {self.per_webhook} notifications of this webhook were pending"
            " (push.max_pending_per_webhook)",
            f"outbox cap: {self.per_task} notifications of this task were pending"
            " (push.max_pending_per_task)",
        )


def cap_statement(mark: str, now: str) -> str:
    """The statement that dead-letters one task's pending rows past the caps.

    :func:`cap_parameters` gives its parameters. A row past its webhook's
    cap is not counted against its task's, so one noisy config cannot push
    out another config's rows.
    """
    return f"""
        WITH lanes AS (
            SELECT id, row_number() OVER (PARTITION BY config_id ORDER BY id) AS in_lane
            FROM push_outbox WHERE state = 'pending' AND agent = {mark} AND task_id = {mark}
        ),
        kept AS (
            SELECT id, in_lane, row_number() OVER (ORDER BY id) AS in_task
            FROM lanes WHERE in_lane <= {mark}
        ),
        over AS (
            SELECT id, 0 AS why FROM lanes WHERE in_lane > {mark}
            UNION ALL SELECT id, 1 FROM kept WHERE in_task > {mark}
        )
        UPDATE push_outbox SET state = 'failed', updated_at = {now},
            last_error = CASE WHEN over.why = 0 THEN {mark} ELSE {mark} END
        FROM over WHERE push_outbox.id = over.id
    """


def cap_parameters(
    caps: OutboxCaps, agent: str, task_id: str, now: object | None = None
) -> list[object]:
    """The parameters of :func:`cap_statement` (``now`` only when it has a placeholder)."""
    webhook, task = caps.reasons()
    times = [] if now is None else [now]
    return [
        agent,
        task_id,
        caps.per_webhook,
        caps.per_webhook,
        caps.per_task,
        *times,
        webhook,
        task,
    ]

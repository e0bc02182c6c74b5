"""What the members of a deployment tell each other about themselves, for the operators.

Each member of a :class:`~a2a_trio.store.coordination.Coordination` reports
its role, its agents and a few counters with its heartbeat
(:meth:`~a2a_trio.store.coordination.Coordination.report`); any member
reads the whole deployment back (:meth:`~a2a_trio.store.coordination.Coordination.fleet`):
the console's members view and deployment-wide counters, and the metrics'
queue and lease gauges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FleetView", "MemberView"]


@dataclass(frozen=True, slots=True)
class MemberView:
    """One live member, as the deployment sees it."""

    id: str
    host: str
    pid: int
    #: ``web`` (serves HTTP) or ``worker`` (``a2a-trio worker``); empty until it reported.
    role: str
    agents: list[str]
    started_at: str
    heartbeat_age: float
    #: Task leases it holds now (each an execution or a cancel in progress).
    leases: int
    #: Queued executions it has claimed or runs now.
    executions: int
    #: What it reported with its last heartbeat (rates, gauges; see the console).
    stats: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FleetView:
    """The live members and the work waiting for them."""

    members: list[MemberView]
    #: Queued executions by (agent, state): ``queued``, ``claimed``, ``running``.
    queued: dict[tuple[str, str], int]
    #: Task leases held, by every member alive or not.
    leases: int

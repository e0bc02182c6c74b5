"""How 0.3 spells the enums that 1.0 spells as proto names. Pure tables.

0.3 has two wire formats: the JSON-RPC binding uses the JSON schema's
lower-case (and kebab-case) strings, the HTTP+JSON binding the ProtoJSON
names of the 0.3 proto, which writes ``TASK_STATE_CANCELLED`` with two Ls.
"""

from __future__ import annotations

from ..models import Role, TaskState

__all__ = [
    "PROTO_STATE",
    "ROLE_BY_V0_3",
    "STATE_BY_PROTO",
    "STATE_BY_V0_3",
    "V0_3_ROLE",
    "V0_3_STATE",
]

#: 1.0 state → the 0.3 JSON schema's ``TaskState`` string.
V0_3_STATE: dict[TaskState, str] = {
    TaskState.UNSPECIFIED: "unknown",
    TaskState.SUBMITTED: "submitted",
    TaskState.WORKING: "working",
    TaskState.COMPLETED: "completed",
    TaskState.FAILED: "failed",
    TaskState.CANCELED: "canceled",
    TaskState.INPUT_REQUIRED: "input-required",
    TaskState.REJECTED: "rejected",
    TaskState.AUTH_REQUIRED: "auth-required",
}
STATE_BY_V0_3 = {text: state for state, text in V0_3_STATE.items()}

#: 1.0 state → the 0.3 proto's ``TaskState`` name.
PROTO_STATE: dict[TaskState, str] = {
    state: "TASK_STATE_CANCELLED" if state is TaskState.CANCELED else state.value
    for state in TaskState
}
STATE_BY_PROTO = {name: state for state, name in PROTO_STATE.items()}

V0_3_ROLE: dict[Role, str] = {Role.USER: "user", Role.AGENT: "agent"}
ROLE_BY_V0_3 = {text: role for role, text in V0_3_ROLE.items()}

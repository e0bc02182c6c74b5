"""What a 0.3 reader gets: each operation's outcome in its binding's 0.3 shape.

The operation ran as in 1.0 (see :mod:`a2a_trio.protocol.compat_v0_3` for
the conversions); this only picks the writer that fits the outcome. The
JSON-RPC binding carries the 0.3 JSON schema's shapes, the HTTP+JSON binding
the 0.3 proto's ProtoJSON. Each result is one compact JSON text, so an SSE
frame holds it on a single ``data:`` line (@a2a-js/sdk 0.3 keeps only the
last one).
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol import (
    AgentCard,
    ListTaskPushNotificationConfigsResponse,
    ProtoModel,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
)
from ..protocol.compat_v0_3 import (
    event_to_v0_3,
    push_config_list_to_proto,
    push_config_list_to_v0_3,
    push_config_to_proto,
    push_config_to_v0_3,
    send_result_to_proto,
    send_result_to_v0_3,
    stream_response_to_proto,
    task_to_proto,
    task_to_v0_3,
)
from ..protocol.signing import CardSigner
from .cards import v0_3_card_document

__all__ = [
    "dumps",
    "jsonrpc_event_v0_3",
    "jsonrpc_result_v0_3",
    "rest_body_v0_3",
    "rest_event_v0_3",
]


def dumps(value: Any) -> str:
    """Compact JSON on one line (json.dumps escapes every newline inside strings)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def jsonrpc_result_v0_3(outcome: ProtoModel, signer: CardSigner | None) -> Any:
    """The ``result`` of a 0.3 JSON-RPC call whose operation returned ``outcome``."""
    if isinstance(outcome, SendMessageResponse):
        return send_result_to_v0_3(outcome)
    if isinstance(outcome, Task):
        return task_to_v0_3(outcome)
    if isinstance(outcome, TaskPushNotificationConfig):
        return push_config_to_v0_3(outcome)
    if isinstance(outcome, ListTaskPushNotificationConfigsResponse):
        return push_config_list_to_v0_3(outcome)
    if isinstance(outcome, AgentCard):
        return v0_3_card_document(outcome, signer)
    return None  # DeleteTaskPushNotificationConfig: 0.3 answers null


def rest_body_v0_3(outcome: ProtoModel, signer: CardSigner | None) -> Any:
    """The body of a 0.3 HTTP+JSON response whose operation returned ``outcome``."""
    if isinstance(outcome, SendMessageResponse):
        return send_result_to_proto(outcome)
    if isinstance(outcome, Task):
        return task_to_proto(outcome)
    if isinstance(outcome, TaskPushNotificationConfig):
        return push_config_to_proto(outcome)
    if isinstance(outcome, ListTaskPushNotificationConfigsResponse):
        return push_config_list_to_proto(outcome)
    if isinstance(outcome, AgentCard):
        return v0_3_card_document(outcome, signer)
    return {}  # DeleteTaskPushNotificationConfig: google.protobuf.Empty


def jsonrpc_event_v0_3(response: StreamResponse) -> str:
    """The ``result`` of one 0.3 JSON-RPC stream frame, as JSON text."""
    return dumps(event_to_v0_3(response))


def rest_event_v0_3(response: StreamResponse) -> str:
    """One 0.3 HTTP+JSON stream frame, as JSON text."""
    return dumps(stream_response_to_proto(response))

"""Protocol 0.3, as conversions to and from the 1.0 models. Pure.

A 0.3 request is read into the 1.0 request of the same operation
(:func:`resolve_v0_3_method` for JSON-RPC, :func:`parse_rest_v0_3` for
HTTP+JSON), so the server runs one operation whatever the version; a 1.0
result, event or error is written in the shape the 0.3 reader expects. 0.3
has two object shapes: the JSON schema's (``kind`` discriminators) on
JSON-RPC, and the 0.3 proto's ProtoJSON on HTTP+JSON. See
docs/compatibility.md for what is mapped and what is lost.
"""

from __future__ import annotations

from .card import card_for_both, card_v0_3_fields, declares_v0_3
from .detection import jsonrpc_version, rest_version, says_v0_3
from .errors import error_to_v0_3, rest_error_to_v0_3
from .methods import V0_3_METHODS, is_v0_3_method, resolve_v0_3_method
from .proto_objects import (
    push_config_list_to_proto,
    push_config_to_proto,
    send_result_to_proto,
    stream_response_to_proto,
    task_to_proto,
)
from .readers import event_from_v0_3
from .routes import is_v0_3_path, match_v0_3_route, parse_rest_v0_3
from .writers import (
    event_to_v0_3,
    message_to_v0_3,
    push_config_list_to_v0_3,
    push_config_to_v0_3,
    send_result_to_v0_3,
    task_to_v0_3,
)

__all__ = [
    "V0_3_METHODS",
    "card_for_both",
    "card_v0_3_fields",
    "declares_v0_3",
    "error_to_v0_3",
    "event_from_v0_3",
    "event_to_v0_3",
    "is_v0_3_method",
    "is_v0_3_path",
    "jsonrpc_version",
    "match_v0_3_route",
    "message_to_v0_3",
    "parse_rest_v0_3",
    "push_config_list_to_proto",
    "push_config_list_to_v0_3",
    "push_config_to_proto",
    "push_config_to_v0_3",
    "resolve_v0_3_method",
    "rest_error_to_v0_3",
    "rest_version",
    "says_v0_3",
    "send_result_to_proto",
    "send_result_to_v0_3",
    "stream_response_to_proto",
    "task_to_proto",
    "task_to_v0_3",
]

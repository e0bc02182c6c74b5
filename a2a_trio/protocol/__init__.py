"""The A2A 1.0 protocol, sans I/O: wire models, errors, state machine, operations.

Nothing in this package imports trio, quart or sqlite; every function is pure.
"""

from __future__ import annotations

from ._base import ProtoModel, format_timestamp, parse_timestamp, utcnow
from .errors import *  # noqa: F403
from .errors import __all__ as _errors_all
from .limits import Limits
from .models import *  # noqa: F403
from .models import __all__ as _models_all
from .models import stream_response
from .operations import Call, JsonRpcCall, Operation, match_route, parse_jsonrpc, parse_rest
from .states import IllegalTransition, check_executor_move, check_host_ending
from .versions import PROTOCOL_VERSION, negotiate_version

__all__ = [
    *_errors_all,
    *_models_all,
    "PROTOCOL_VERSION",
    "Call",
    "IllegalTransition",
    "JsonRpcCall",
    "Limits",
    "Operation",
    "ProtoModel",
    "check_executor_move",
    "check_host_ending",
    "format_timestamp",
    "match_route",
    "negotiate_version",
    "parse_jsonrpc",
    "parse_rest",
    "parse_timestamp",
    "stream_response",
    "utcnow",
]

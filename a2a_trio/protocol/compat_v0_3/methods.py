"""The 0.3 JSON-RPC methods: each names one 1.0 operation (0.3 spec section 7).

:func:`resolve_v0_3_method` is the 0.3 twin of ``operations.resolve_method``:
it takes the same checked envelope and returns the same :class:`Call`, so the
server runs one operation whichever version asked. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from .._base import ProtoModel
from ..errors import InvalidParamsError, MethodNotFoundError
from ..limits import Limits, validation_context
from ..operations import DEFAULT_LIMITS, Call, JsonRpcCall, Operation, describe_validation_error
from .params import (
    DeleteTaskPushNotificationConfigParamsV03,
    EmptyParamsV03,
    GetTaskPushNotificationConfigParamsV03,
    ListTaskPushNotificationConfigParamsV03,
    MessageSendParamsV03,
    SetTaskPushNotificationConfigParamsV03,
    TaskIdParamsV03,
    TaskQueryParamsV03,
    TaskResubscriptionParamsV03,
)

__all__ = [
    "V0_3_METHODS",
    "is_v0_3_method",
    "read_v0_3",
    "resolve_v0_3_method",
    "validate_v0_3_params",
]

M = TypeVar("M", bound=ProtoModel)
T = TypeVar("T")

#: Method name → (operation, the model of its 0.3 params). ``tasks/list`` is
#: not here: 0.3 has no ListTasks.
V0_3_METHODS: dict[str, tuple[Operation, type[ProtoModel]]] = {
    "message/send": (Operation.SEND_MESSAGE, MessageSendParamsV03),
    "message/stream": (Operation.SEND_STREAMING_MESSAGE, MessageSendParamsV03),
    "tasks/get": (Operation.GET_TASK, TaskQueryParamsV03),
    "tasks/cancel": (Operation.CANCEL_TASK, TaskIdParamsV03),
    "tasks/resubscribe": (Operation.SUBSCRIBE_TO_TASK, TaskResubscriptionParamsV03),
    "tasks/pushNotificationConfig/set": (
        Operation.CREATE_PUSH_CONFIG,
        SetTaskPushNotificationConfigParamsV03,
    ),
    "tasks/pushNotificationConfig/get": (
        Operation.GET_PUSH_CONFIG,
        GetTaskPushNotificationConfigParamsV03,
    ),
    "tasks/pushNotificationConfig/list": (
        Operation.LIST_PUSH_CONFIGS,
        ListTaskPushNotificationConfigParamsV03,
    ),
    "tasks/pushNotificationConfig/delete": (
        Operation.DELETE_PUSH_CONFIG,
        DeleteTaskPushNotificationConfigParamsV03,
    ),
    "agent/getAuthenticatedExtendedCard": (Operation.GET_EXTENDED_CARD, EmptyParamsV03),
}


def is_v0_3_method(name: str) -> bool:
    """True for a method name only 0.3 uses (1.0 names are PascalCase)."""
    return name in V0_3_METHODS


def read_v0_3(model: type[M], params: Mapping[str, Any], limits: Limits | None = None) -> M:
    """``params`` validated as the 0.3 ``model``, within ``limits``.

    InvalidParamsError names each bad field as the 0.3 client spelled it.
    """
    try:
        return model.model_validate(params, context=validation_context(limits or DEFAULT_LIMITS))
    except ValidationError as error:
        raise InvalidParamsError(describe_validation_error(error)) from None


def validate_v0_3_params(
    operation: Operation,
    model: type[ProtoModel],
    params: Mapping[str, Any],
    limits: Limits | None = None,
) -> Call:
    """Validate ``params`` as the 0.3 ``model`` and convert them to ``operation``'s request."""
    read = read_v0_3(model, params, limits)
    return Call(operation, converted(lambda: read.to_v1()))  # type: ignore[attr-defined]


def converted(convert: Callable[[], T]) -> T:
    """``convert()``: a 0.3 request in 1.0 terms; what 1.0 refuses is InvalidParamsError."""
    try:
        return convert()
    except ValidationError as error:
        raise InvalidParamsError(describe_validation_error(error)) from None


def resolve_v0_3_method(call: JsonRpcCall, limits: Limits | None = None) -> Call:
    """Map a 0.3 JSON-RPC method to its 1.0 operation and convert its params."""
    entry = V0_3_METHODS.get(call.method)
    if entry is None:
        raise MethodNotFoundError(f"Method not found: {call.method}")
    operation, model = entry
    return validate_v0_3_params(operation, model, call.params, limits)

"""The 0.3 HTTP+JSON routes, as both 0.3 SDKs call them (the 0.3 proto's http rules).

Every path starts with ``/v1/`` below the agent's mount, which no 1.0 route
does. Where the two 0.3 clients disagree both spellings are served:
``:subscribe`` is a GET from a2a-sdk 0.3 and a POST from @a2a-js/sdk 0.3,
and a push config is created with either body (see ProtoCreatePushConfigV03).
:func:`parse_rest_v0_3` is the 0.3 twin of ``operations.parse_rest`` and
returns the same :class:`Call`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..limits import Limits
from ..operations import (
    Call,
    Loads,
    Operation,
    Route,
    compile_routes,
    decode_object,
    find_route,
    strict_loads,
)
from .methods import converted, read_v0_3, validate_v0_3_params
from .params import (
    DeleteTaskPushNotificationConfigParamsV03,
    EmptyParamsV03,
    GetTaskPushNotificationConfigParamsV03,
    ListTaskPushNotificationConfigParamsV03,
    TaskIdParamsV03,
    TaskQueryParamsV03,
    TaskResubscriptionParamsV03,
)
from .proto_objects import ProtoCreatePushConfigV03, ProtoSendMessageRequestV03

__all__ = ["is_v0_3_path", "match_v0_3_route", "parse_rest_v0_3"]

_ROUTES: list[Route] = [
    *compile_routes("POST", "/v1/message:send", Operation.SEND_MESSAGE),
    *compile_routes("POST", "/v1/message:stream", Operation.SEND_STREAMING_MESSAGE),
    *compile_routes("POST", "/v1/tasks/{id}:cancel", Operation.CANCEL_TASK),
    *compile_routes("GET POST", "/v1/tasks/{id}:subscribe", Operation.SUBSCRIBE_TO_TASK),
    *compile_routes("POST", "/v1/tasks/{id}/pushNotificationConfigs", Operation.CREATE_PUSH_CONFIG),
    *compile_routes("GET", "/v1/tasks/{id}/pushNotificationConfigs", Operation.LIST_PUSH_CONFIGS),
    *compile_routes(
        "GET", "/v1/tasks/{id}/pushNotificationConfigs/{config_id}", Operation.GET_PUSH_CONFIG
    ),
    *compile_routes(
        "DELETE", "/v1/tasks/{id}/pushNotificationConfigs/{config_id}", Operation.DELETE_PUSH_CONFIG
    ),
    *compile_routes("GET", "/v1/tasks/{id}", Operation.GET_TASK),
    *compile_routes("GET", "/v1/card", Operation.GET_EXTENDED_CARD),
]


def is_v0_3_path(path: str) -> bool:
    """True for a path below the mount that only 0.3 uses (``/v1/...``)."""
    return path.strip("/").startswith("v1/")


def match_v0_3_route(method: str, path: str) -> tuple[Operation, dict[str, str]]:
    """The operation a 0.3 client reaches at ``method path``, and its path parameters."""
    return find_route(_ROUTES, method, path)


def _body(body: bytes | None, loads: Loads) -> dict[str, Any]:
    return decode_object(body, loads) if body and body.strip() else {}


def parse_rest_v0_3(
    method: str,
    path: str,
    query: Mapping[str, str],
    body: bytes | None,
    limits: Limits | None = None,
    loads: Loads = strict_loads,
) -> Call:
    """Resolve a 0.3 HTTP+JSON request to its 1.0 operation and request.

    ``path`` is below the agent's mount. Bodies are read only where 0.3 sends
    one that matters (sending a message, creating a push config): the body
    a2a-sdk 0.3 sends with ``:cancel`` repeats the path and is ignored.
    """
    operation, path_params = match_v0_3_route(method, path)
    task_id = path_params.get("id", "")
    config_id = path_params.get("config_id", "")
    if operation in (Operation.SEND_MESSAGE, Operation.SEND_STREAMING_MESSAGE):
        return validate_v0_3_params(
            operation, ProtoSendMessageRequestV03, _body(body, loads), limits
        )
    if operation is Operation.CREATE_PUSH_CONFIG:
        created = read_v0_3(ProtoCreatePushConfigV03, _body(body, loads), limits)
        return Call(operation, converted(lambda: created.to_v1(task_id)))
    params: dict[str, Any]
    model: Any
    if operation is Operation.GET_TASK:
        params = {"id": task_id, **_history_length(query)}
        model = TaskQueryParamsV03
    elif operation is Operation.CANCEL_TASK:
        params, model = {"id": task_id}, TaskIdParamsV03
    elif operation is Operation.SUBSCRIBE_TO_TASK:
        params, model = {"id": task_id}, TaskResubscriptionParamsV03
    elif operation is Operation.LIST_PUSH_CONFIGS:
        params, model = {"id": task_id}, ListTaskPushNotificationConfigParamsV03
    elif operation is Operation.GET_PUSH_CONFIG:
        params = {"id": task_id, "pushNotificationConfigId": config_id}
        model = GetTaskPushNotificationConfigParamsV03
    elif operation is Operation.DELETE_PUSH_CONFIG:
        params = {"id": task_id, "pushNotificationConfigId": config_id}
        model = DeleteTaskPushNotificationConfigParamsV03
    else:
        params, model = {}, EmptyParamsV03
    return validate_v0_3_params(operation, model, params, limits)


def _history_length(query: Mapping[str, str]) -> dict[str, str]:
    value = query.get("historyLength", query.get("history_length"))
    return {} if value is None else {"historyLength": value}

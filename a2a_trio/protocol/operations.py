"""The eleven A2A operations and how each binding names them (spec 5.3).

A JSON-RPC call and an HTTP+JSON route both resolve to one :class:`Call`: an
operation and its validated request model. Sans-IO: bytes and strings in,
models or protocol errors out.
"""

from __future__ import annotations

import enum
import json
import json.scanner
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from .errors import (
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotAllowedError,
    MethodNotFoundError,
)
from .limits import Limits, lone_surrogate_path, validation_context
from .models import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)

__all__ = [
    "Call",
    "JsonRpcCall",
    "Operation",
    "describe_problem",
    "describe_validation_error",
    "is_jsonrpc_method",
    "parse_jsonrpc",
    "parse_rest",
    "validate_params",
]

JsonRpcId = str | int | None

#: The limits a request is held to when the caller names none.
DEFAULT_LIMITS = Limits()


class Operation(enum.Enum):
    """An A2A operation; the value is its JSON-RPC method name."""

    SEND_MESSAGE = "SendMessage"
    SEND_STREAMING_MESSAGE = "SendStreamingMessage"
    GET_TASK = "GetTask"
    LIST_TASKS = "ListTasks"
    CANCEL_TASK = "CancelTask"
    SUBSCRIBE_TO_TASK = "SubscribeToTask"
    CREATE_PUSH_CONFIG = "CreateTaskPushNotificationConfig"
    GET_PUSH_CONFIG = "GetTaskPushNotificationConfig"
    LIST_PUSH_CONFIGS = "ListTaskPushNotificationConfigs"
    DELETE_PUSH_CONFIG = "DeleteTaskPushNotificationConfig"
    GET_EXTENDED_CARD = "GetExtendedAgentCard"

    @property
    def streams(self) -> bool:
        """True when the answer is an SSE stream."""
        return self in (Operation.SEND_STREAMING_MESSAGE, Operation.SUBSCRIBE_TO_TASK)

    @property
    def request_model(self) -> type[BaseModel]:
        return _REQUEST_MODELS[self]


_REQUEST_MODELS: dict[Operation, type[BaseModel]] = {
    Operation.SEND_MESSAGE: SendMessageRequest,
    Operation.SEND_STREAMING_MESSAGE: SendMessageRequest,
    Operation.GET_TASK: GetTaskRequest,
    Operation.LIST_TASKS: ListTasksRequest,
    Operation.CANCEL_TASK: CancelTaskRequest,
    Operation.SUBSCRIBE_TO_TASK: SubscribeToTaskRequest,
    Operation.CREATE_PUSH_CONFIG: TaskPushNotificationConfig,
    Operation.GET_PUSH_CONFIG: GetTaskPushNotificationConfigRequest,
    Operation.LIST_PUSH_CONFIGS: ListTaskPushNotificationConfigsRequest,
    Operation.DELETE_PUSH_CONFIG: DeleteTaskPushNotificationConfigRequest,
    Operation.GET_EXTENDED_CARD: GetExtendedAgentCardRequest,
}

#: Method names accepted besides the canonical ones (the seed's singular form).
_JSONRPC_ALIASES = {"ListTaskPushNotificationConfig": Operation.LIST_PUSH_CONFIGS}
_METHOD_NAMES = frozenset(operation.value for operation in Operation)


# Not frozen, as the records of a round are not: made for each request (see store.rounds).
@dataclass(slots=True)
class Call:
    """One resolved operation with its validated request."""

    operation: Operation
    request: Any


@dataclass(slots=True)
class JsonRpcCall:
    """A JSON-RPC request envelope that passed the 2.0 checks."""

    id: JsonRpcId
    method: str
    params: Any


def describe_validation_error(error: ValidationError, prefix: str = "") -> str:
    """One line per problem, each naming the field path as sent on the wire."""
    problems = [describe_problem(item, prefix) for item in error.errors(include_url=False)]
    return "; ".join(problems) or "invalid parameters"


def describe_problem(item: ErrorDetails, prefix: str = "") -> str:
    """One problem of a :class:`ValidationError`: ``field.path: what is wrong``."""
    location = ".".join(str(part) for part in item["loc"] if part != "function-after[...]")
    location = ".".join(filter(None, [prefix, location]))
    message = item["msg"].removeprefix("Value error, ")
    return f"{location}: {message}" if location else message


def validate_params(
    operation: Operation, params: Mapping[str, Any], limits: Limits | None = None
) -> Call:
    """Validate ``params`` as the request of ``operation``, within ``limits``."""
    try:
        request = operation.request_model.model_validate(
            params, context=validation_context(limits or DEFAULT_LIMITS)
        )
    except ValidationError as error:
        raise InvalidParamsError(describe_validation_error(error)) from None
    return Call(operation, request)


#: What a JSON text decoder is: :func:`strict_loads`, or :func:`yielding_loads`.
Loads = Callable[[bytes], Any]


def _not_json(constant: str) -> Any:
    # json.loads takes NaN and Infinity, which no JSON parser of a client does.
    raise ValueError(f"{constant} is not JSON")


class _DuplicateName(ValueError):
    """An object of the JSON text names one member twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # RFC 8259 leaves duplicate names to the parser; Python keeps the last.
    # Refused: ``"method":"GetTask","method":"SendMessage"`` would otherwise
    # send a message past whatever read the first (a proxy, a log, a filter).
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _DuplicateName(f"the member name {name!r} appears twice in one object")
            seen.add(name)
    return document


_STRICT_DECODER = json.JSONDecoder(parse_constant=_not_json, object_pairs_hook=_unique_keys)

# The pure-Python decoder: several times slower than json.loads, but it runs
# Python bytecode throughout, so on a worker thread it lets the event loop's
# thread take the GIL at every switch interval. json.loads holds it from
# start to end: ~0.2 s for a 9 MB body of tiny objects.
_YIELDING_DECODER = json.JSONDecoder(parse_constant=_not_json, object_pairs_hook=_unique_keys)
_YIELDING_DECODER.scan_once = json.scanner.py_make_scanner(_YIELDING_DECODER)  # type: ignore[attr-defined]


def _text(body: bytes) -> str:
    return body.decode(json.detect_encoding(body), "surrogatepass")  # as json.loads does


def strict_loads(body: bytes) -> Any:
    """``json.loads`` refusing ``NaN``, ``Infinity`` (not JSON) and an object's repeated names."""
    return _STRICT_DECODER.decode(_text(body))


def yielding_loads(body: bytes) -> Any:
    """:func:`strict_loads` in pure Python, for large bodies decoded on a worker thread."""
    return _YIELDING_DECODER.decode(_text(body))


def decode_json(body: bytes, loads: Loads = strict_loads) -> Any:
    """The JSON document of ``body``; JSONParseError if it is not one."""
    try:
        return loads(body)
    except RecursionError:
        raise JSONParseError("Invalid JSON payload: nested too deeply") from None
    except _DuplicateName as error:
        raise JSONParseError(f"Invalid JSON payload: {error}") from None
    except (ValueError, UnicodeDecodeError):
        raise JSONParseError() from None


def decode_object(body: bytes, loads: Loads = strict_loads) -> dict[str, Any]:
    """An HTTP+JSON request body: a JSON object whose strings are all valid Unicode."""
    document = decode_json(body, loads)
    if not isinstance(document, dict):
        raise InvalidParamsError("The request body must be a JSON object")
    refuse_lone_surrogates(body, document)
    return document


def refuse_lone_surrogates(body: bytes, document: Any, request_id: JsonRpcId = None) -> None:
    """InvalidParamsError naming a string of ``document`` that is not valid Unicode."""
    path = lone_surrogate_path(body, document)
    if path is not None:
        raise _with_id(
            InvalidParamsError(
                f"{path}: not valid Unicode (holds a lone UTF-16 surrogate)",
                metadata={"field": path},
            ),
            request_id,
        )


def parse_jsonrpc(body: bytes, loads: Loads = strict_loads) -> JsonRpcCall:
    """Decode and check a JSON-RPC 2.0 request envelope.

    Raises JSONParseError for bad JSON and InvalidRequestError for a bad
    envelope; the error carries ``request_id`` when one could be read.
    InvalidParamsError names a string in ``params`` that is not valid
    Unicode (it could never be stored).
    """
    document = decode_json(body, loads)
    if not isinstance(document, dict):
        raise InvalidRequestError(
            "A JSON-RPC request must be a JSON object (batches are not supported)"
        )
    request_id = document.get("id")
    if "id" in document and not _valid_id(request_id):
        raise _with_id(InvalidRequestError("id must be a string, a number or null"), None)
    if document.get("jsonrpc") != "2.0":
        raise _with_id(InvalidRequestError('jsonrpc must be exactly "2.0"'), request_id)
    method = document.get("method")
    if not isinstance(method, str) or not method:
        raise _with_id(InvalidRequestError("method must be a non-empty string"), request_id)
    params = document.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _with_id(InvalidRequestError("params must be an object"), request_id)
    refuse_lone_surrogates(body, params, request_id)
    return JsonRpcCall(request_id, method, params)


def is_jsonrpc_method(name: str) -> bool:
    """True for a 1.0 JSON-RPC method name (an operation, or an alias of one)."""
    return name in _METHOD_NAMES or name in _JSONRPC_ALIASES


def resolve_method(call: JsonRpcCall, limits: Limits | None = None) -> Call:
    """Map a JSON-RPC method to its operation and validate its params."""
    try:
        operation = Operation(call.method)
    except ValueError:
        operation = _JSONRPC_ALIASES.get(call.method)  # type: ignore[assignment]
        if operation is None:
            raise MethodNotFoundError(f"Method not found: {call.method}") from None
    return validate_params(operation, call.params, limits)


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def _with_id(error: Exception, request_id: JsonRpcId) -> Exception:
    error.request_id = request_id  # type: ignore[attr-defined]
    return error


# --- HTTP+JSON routes (spec 11.3) ------------------------------------------

# Ids are opaque but never hold "/" or ":", which would make "/tasks/{id}:cancel" ambiguous.
_SEGMENT = r"[^/:]+"

#: One route: (HTTP method, compiled path template, operation).
Route = tuple[str, re.Pattern[str], Operation]
_ROUTES: list[Route] = []
#: The (method, path template) a client uses for each operation: the first route.
_CLIENT_ROUTES: dict[Operation, tuple[str, str]] = {}


def compile_routes(methods: str, template: str, operation: Operation) -> list[Route]:
    """The routes serving ``operation`` at ``template`` for each of ``methods``."""
    pattern = re.sub(r"\{(\w+)\}", lambda m: f"(?P<{m.group(1)}>{_SEGMENT})", template)
    compiled = re.compile(rf"^{pattern}$")
    return [(method, compiled, operation) for method in methods.split()]


def _route(methods: str, template: str, operation: Operation) -> None:
    _ROUTES.extend(compile_routes(methods, template, operation))
    _CLIENT_ROUTES.setdefault(operation, (methods.split()[0], template))


_route("POST", "/message:send", Operation.SEND_MESSAGE)
_route("POST", "/message:stream", Operation.SEND_STREAMING_MESSAGE)
_route("GET", "/tasks", Operation.LIST_TASKS)
_route("POST", "/tasks/{id}:cancel", Operation.CANCEL_TASK)
# Spec 11.3.2 says POST; a2a.proto's http annotation says GET: serve both.
_route("POST GET", "/tasks/{id}:subscribe", Operation.SUBSCRIBE_TO_TASK)
_route("POST", "/tasks/{task_id}/pushNotificationConfigs", Operation.CREATE_PUSH_CONFIG)
_route("GET", "/tasks/{task_id}/pushNotificationConfigs", Operation.LIST_PUSH_CONFIGS)
_route("GET", "/tasks/{task_id}/pushNotificationConfigs/{id}", Operation.GET_PUSH_CONFIG)
_route("DELETE", "/tasks/{task_id}/pushNotificationConfigs/{id}", Operation.DELETE_PUSH_CONFIG)
_route("GET", "/tasks/{id}", Operation.GET_TASK)
_route("GET", "/extendedAgentCard", Operation.GET_EXTENDED_CARD)


def match_route(method: str, path: str) -> tuple[Operation, dict[str, str]]:
    """The operation served at ``method path`` and its path parameters."""
    return find_route(_ROUTES, method, path)


def find_route(routes: list[Route], method: str, path: str) -> tuple[Operation, dict[str, str]]:
    """The operation ``routes`` serve at ``method path`` and its path parameters."""
    path = "/" + path.strip("/")
    allowed: set[str] = set()
    for route_method, pattern, operation in routes:
        match = pattern.match(path)
        if match is None:
            continue
        if route_method != method:
            allowed.add(route_method)
            continue
        return operation, match.groupdict()
    if allowed:
        raise MethodNotAllowedError(
            f"{method} is not allowed on {path}; use {', '.join(sorted(allowed))}",
            allowed=sorted(allowed),
        )
    raise MethodNotFoundError(f"No A2A operation at {method} {path}")


@dataclass(slots=True)
class RestRequest:
    """How a client carries one operation on the HTTP+JSON binding."""

    method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any] | None


def rest_request(operation: Operation, request: BaseModel) -> RestRequest:
    """The HTTP+JSON request for ``request`` (the inverse of :func:`parse_rest`)."""
    method, template = _CLIENT_ROUTES[operation]
    wire: dict[str, Any] = request.model_dump(mode="json", exclude_none=True, by_alias=True)
    wire.pop("tenant", None)

    def fill(match: re.Match[str]) -> str:
        value = wire.pop(to_camel(match.group(1)))
        return quote(str(value), safe="")

    path = re.sub(r"\{(\w+)\}", fill, template)
    if method in ("GET", "DELETE"):
        query = {key: _query_value(value) for key, value in wire.items()}
        return RestRequest(method, path, query, None)
    return RestRequest(method, path, {}, wire)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_rest(
    method: str,
    path: str,
    query: Mapping[str, str],
    body: bytes | None,
    limits: Limits | None = None,
    loads: Loads = strict_loads,
) -> Call:
    """Resolve an HTTP+JSON request to its operation and validated request.

    Bodies are read only for methods that carry one; the query string fills
    the request of GET and DELETE (spec 11.5). Path parameters always win.
    """
    operation, path_params = match_route(method, path)
    params: dict[str, Any] = {}
    if method in ("POST", "PUT", "PATCH") and body and body.strip():
        params.update(decode_object(body, loads))
    else:
        params.update({key: value for key, value in query.items() if key != "A2A-Version"})
    for name, value in path_params.items():
        # The path names the resource: a body or query spelling of it must not override it.
        params.pop(to_camel(name), None)
        params[name] = value
    return validate_params(operation, params, limits)

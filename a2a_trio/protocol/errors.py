"""Every protocol error, and the one table that renders it on each binding.

Spec 3.3.2 names the A2A errors, 5.4 maps them to JSON-RPC codes, gRPC
statuses and HTTP statuses, 9.5 and 11.6 say each carries a
``google.rpc.ErrorInfo`` whose ``reason`` is the error name in UPPER_SNAKE_CASE
without the ``Error`` suffix. Bindings render from :data:`ERROR_TABLE`;
nothing else invents a status code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "ERROR_INFO_TYPE",
    "ERROR_TABLE",
    "A2AError",
    "ContentTypeNotSupportedError",
    "ErrorSpec",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "ForbiddenError",
    "InternalError",
    "InvalidAgentResponseError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONParseError",
    "MethodNotAllowedError",
    "MethodNotFoundError",
    "PayloadTooLargeError",
    "PushNotificationNotSupportedError",
    "RequestTimeoutError",
    "ServerBusyError",
    "StorageFullError",
    "StorageUnavailableError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnauthenticatedError",
    "UnsupportedOperationError",
    "VersionNotSupportedError",
    "error_from_code",
]

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
ERROR_DOMAIN = "a2a-protocol.org"


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """How one error kind appears on each binding."""

    jsonrpc_code: int
    http_status: int
    grpc_status: str
    reason: str
    message: str


class A2AError(Exception):
    """Base of every error a client can receive.

    ``metadata`` lands in the ErrorInfo detail (string values only, as
    google.rpc.ErrorInfo requires); ``data`` is extra structured context.
    """

    spec: ClassVar[ErrorSpec]

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.spec.message
        self.metadata = dict(metadata or {})
        super().__init__(self.message)

    @property
    def code(self) -> int:
        """The JSON-RPC error code (spec 5.4)."""
        return self.spec.jsonrpc_code

    @property
    def http_status(self) -> int:
        """The HTTP status of the HTTP+JSON binding (spec 5.4)."""
        return self.spec.http_status

    def error_info(self) -> dict[str, Any]:
        """The ``google.rpc.ErrorInfo`` detail in ProtoJSON form."""
        info: dict[str, Any] = {
            "@type": ERROR_INFO_TYPE,
            "reason": self.spec.reason,
            "domain": ERROR_DOMAIN,
        }
        if self.metadata:
            info["metadata"] = self.metadata
        return info

    def to_jsonrpc(self) -> dict[str, Any]:
        """The JSON-RPC 2.0 error object (spec 9.5)."""
        return {"code": self.code, "message": self.message, "data": [self.error_info()]}

    def to_http(self) -> dict[str, Any]:
        """The AIP-193 error body of the HTTP+JSON binding (spec 11.6)."""
        return {
            "error": {
                "code": self.http_status,
                "status": self.spec.grpc_status,
                "message": self.message,
                "details": [self.error_info()],
            }
        }


# JSON-RPC 2.0 standard errors.
class JSONParseError(A2AError):
    """The body is not valid JSON."""

    spec = ErrorSpec(-32700, 400, "INVALID_ARGUMENT", "PARSE_ERROR", "Invalid JSON payload")


class InvalidRequestError(A2AError):
    """The JSON is not a valid request object."""

    spec = ErrorSpec(
        -32600, 400, "INVALID_ARGUMENT", "INVALID_REQUEST", "Request payload validation error"
    )


class MethodNotFoundError(A2AError):
    """The method (or route) does not exist."""

    spec = ErrorSpec(-32601, 404, "NOT_FOUND", "METHOD_NOT_FOUND", "Method not found")


class InvalidParamsError(A2AError):
    """The parameters do not validate."""

    spec = ErrorSpec(-32602, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", "Invalid parameters")


class InternalError(A2AError):
    """The server failed; the details are in its log, never in the response."""

    spec = ErrorSpec(-32603, 500, "INTERNAL", "INTERNAL", "Internal error")


class MethodNotAllowedError(A2AError):
    """The route exists but not for this HTTP method (HTTP+JSON only)."""

    spec = ErrorSpec(-32601, 405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED", "Method not allowed")

    def __init__(self, message: str | None = None, *, allowed: list[str] | None = None) -> None:
        super().__init__(message)
        self.allowed = list(allowed or [])


# A2A errors (spec 3.3.2 and 5.4).
class TaskNotFoundError(A2AError):
    """The task does not exist or is not visible to the caller."""

    spec = ErrorSpec(-32001, 404, "NOT_FOUND", "TASK_NOT_FOUND", "Task not found")


class TaskNotCancelableError(A2AError):
    """The task is in a final state."""

    # HTTP 400, as spec v1.0.1's table has it (v1.0.0: 409): the kit accepts either.
    spec = ErrorSpec(
        -32002, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE", "Task cannot be canceled"
    )


class PushNotificationNotSupportedError(A2AError):
    """The agent does not declare push notifications, or push is switched off."""

    spec = ErrorSpec(
        -32003,
        400,
        "UNIMPLEMENTED",
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        "Push notifications are not supported",
    )


class UnsupportedOperationError(A2AError):
    """The operation, or this use of it, is not supported."""

    spec = ErrorSpec(
        -32004, 400, "UNIMPLEMENTED", "UNSUPPORTED_OPERATION", "Operation not supported"
    )


class ContentTypeNotSupportedError(A2AError):
    """A media type in the message is not accepted by the agent."""

    spec = ErrorSpec(
        -32005,
        415,
        "INVALID_ARGUMENT",
        "CONTENT_TYPE_NOT_SUPPORTED",
        "Content type not supported",
    )


class InvalidAgentResponseError(A2AError):
    """The agent produced a response that does not fit the operation."""

    # HTTP 500, as spec v1.0.1's table has it (v1.0.0: 502).
    spec = ErrorSpec(-32006, 500, "INTERNAL", "INVALID_AGENT_RESPONSE", "Invalid agent response")


class ExtendedAgentCardNotConfiguredError(A2AError):
    """The card declares an extended card but none is configured."""

    spec = ErrorSpec(
        -32007,
        400,
        "FAILED_PRECONDITION",
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        "Extended agent card not configured",
    )


class ExtensionSupportRequiredError(A2AError):
    """The card marks an extension required and the client did not request it."""

    spec = ErrorSpec(
        -32008,
        400,
        "FAILED_PRECONDITION",
        "EXTENSION_SUPPORT_REQUIRED",
        "Extension support required",
    )


class VersionNotSupportedError(A2AError):
    """The A2A-Version of the request is not served here."""

    spec = ErrorSpec(
        -32009, 400, "UNIMPLEMENTED", "VERSION_NOT_SUPPORTED", "Protocol version not supported"
    )


# Transport-level errors the spec describes by category (3.3.2) without codes.
class UnauthenticatedError(A2AError):
    """Credentials are missing or invalid."""

    spec = ErrorSpec(-32010, 401, "UNAUTHENTICATED", "UNAUTHENTICATED", "Authentication required")


class ForbiddenError(A2AError):
    """The caller is authenticated but lacks a required scope."""

    spec = ErrorSpec(-32011, 403, "PERMISSION_DENIED", "PERMISSION_DENIED", "Permission denied")


class PayloadTooLargeError(A2AError):
    """The body exceeds the configured limit."""

    spec = ErrorSpec(-32600, 413, "INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE", "Request body too large")


class RequestTimeoutError(A2AError):
    """The body did not arrive within the configured time."""

    spec = ErrorSpec(
        -32600, 408, "DEADLINE_EXCEEDED", "REQUEST_TIMEOUT", "Request body not received in time"
    )


class ServerBusyError(A2AError):
    """The server holds as many request bodies as its memory budget allows: retry later.

    ``retry_after`` is the number of seconds the client is asked to wait
    (HTTP ``Retry-After``, 1 when unset; ``retryAfterSeconds`` in the
    ErrorInfo metadata when set).
    """

    spec = ErrorSpec(
        -32603, 503, "RESOURCE_EXHAUSTED", "SERVER_BUSY", "The server is busy: retry later"
    )

    def __init__(self, message: str | None = None, *, retry_after: int | None = None) -> None:
        metadata = {"retryAfterSeconds": str(retry_after)} if retry_after is not None else None
        super().__init__(message, metadata=metadata)
        self.retry_after = retry_after if retry_after is not None else 1


class StorageFullError(A2AError):
    """The database has no space left for a write; nothing of it was stored.

    Retryable: the same request succeeds once space is freed. JSON-RPC keeps
    -32603 (the standard code of a server-side failure) and says which one in
    the ErrorInfo reason. HTTP answers 503 with ``Retry-After`` rather than
    507: 507 is WebDAV's, and load balancers, proxies and client retry
    policies (urllib3's among them) know 503 + Retry-After as "try again later",
    which is what the client should do. gRPC answers RESOURCE_EXHAUSTED,
    which its documentation names for a full file system.
    """

    spec = ErrorSpec(
        -32603,
        503,
        "RESOURCE_EXHAUSTED",
        "STORAGE_FULL",
        "The server's storage is full; nothing was stored. Try again later.",
    )
    #: Seconds a client should wait before trying again (HTTP ``Retry-After``).
    retry_after = 10


class StorageUnavailableError(A2AError):
    """The database could not be reached (a restart, a failover, a network cut).

    Retryable, as :class:`StorageFullError` is, and answered the same way on
    each binding but for gRPC, whose UNAVAILABLE names "most likely a
    transient condition, which can be corrected by retrying". A message sent
    again with its ``messageId`` is not run twice.
    """

    spec = ErrorSpec(
        -32603,
        503,
        "UNAVAILABLE",
        "STORAGE_UNAVAILABLE",
        "The server's storage cannot be reached. Try again later.",
    )
    #: Seconds a client should wait before trying again (HTTP ``Retry-After``).
    retry_after = 2


ERROR_TABLE: dict[str, type[A2AError]] = {
    cls.__name__: cls
    for cls in (
        JSONParseError,
        InvalidRequestError,
        MethodNotFoundError,
        MethodNotAllowedError,
        InvalidParamsError,
        InternalError,
        TaskNotFoundError,
        TaskNotCancelableError,
        PushNotificationNotSupportedError,
        UnsupportedOperationError,
        ContentTypeNotSupportedError,
        InvalidAgentResponseError,
        ExtendedAgentCardNotConfiguredError,
        ExtensionSupportRequiredError,
        VersionNotSupportedError,
        UnauthenticatedError,
        ForbiddenError,
        PayloadTooLargeError,
        RequestTimeoutError,
        ServerBusyError,
        StorageFullError,
        StorageUnavailableError,
    )
}

_BY_CODE: dict[int, type[A2AError]] = {}
for _cls in ERROR_TABLE.values():
    _BY_CODE.setdefault(_cls.spec.jsonrpc_code, _cls)
_BY_REASON: dict[str, type[A2AError]] = {cls.spec.reason: cls for cls in ERROR_TABLE.values()}


def error_from_code(
    code: int | None = None, message: str | None = None, *, reason: str | None = None
) -> A2AError:
    """Rebuild a typed error from what a peer sent (reason wins over code)."""
    cls = _BY_REASON.get(reason or "") or _BY_CODE.get(code if code is not None else 0)
    if cls is None:
        cls = InternalError
    return cls(message)

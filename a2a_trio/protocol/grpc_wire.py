"""The gRPC binding on the wire (spec 10; gRPC over HTTP/2): pure, no I/O.

What a gRPC call is made of, below the HTTP/2 stream that carries it: the
method path (``/lf.a2a.v1.A2AService/SendMessage``), messages framed with a
compressed flag and a length, the ``grpc-timeout`` deadline, and the status
that ends every call in the ``grpc-status``, ``grpc-message`` and
``grpc-status-details-bin`` trailers (a ``google.rpc.Status`` whose details
hold the A2A error's ``google.rpc.ErrorInfo``, spec 10.6).
"""

from __future__ import annotations

import base64
import enum
import re
import struct
from dataclasses import dataclass
from urllib.parse import quote, unquote

from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from .errors import ERROR_DOMAIN, A2AError
from .operations import Operation
from .proto import a2a_pb2

__all__ = [
    "GRPC_CONTENT_TYPES",
    "SERVICE",
    "FrameError",
    "GrpcError",
    "GrpcMethod",
    "GrpcStatus",
    "error_status",
    "frame",
    "method_at",
    "parse_timeout",
    "read_frames",
    "status_trailers",
    "take_frames",
]

SERVICE = "lf.a2a.v1.A2AService"
#: The content types a gRPC request carries (``+json`` is not offered).
GRPC_CONTENT_TYPES = ("application/grpc", "application/grpc+proto")
#: The only message encoding served: frames with the compressed flag are refused.
ACCEPT_ENCODING = "identity"
_HEADER = struct.Struct(">BI")


class GrpcStatus(enum.IntEnum):
    """The gRPC status codes (grpc/status.h)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


@dataclass(frozen=True, slots=True)
class GrpcMethod:
    """One method of A2AService: its operation and its message types."""

    operation: Operation
    request: str
    response: str
    server_streaming: bool

    @property
    def path(self) -> str:
        return f"/{SERVICE}/{self.operation.value}"


def _methods() -> dict[str, GrpcMethod]:
    service = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    methods = {}
    for method in service.methods:
        grpc_method = GrpcMethod(
            Operation(method.name),
            method.input_type.name,
            method.output_type.name,
            method.server_streaming,
        )
        methods[grpc_method.path] = grpc_method
    return methods


#: Every method of A2AService by its HTTP/2 path; each is an A2A operation.
METHODS = _methods()


class GrpcError(Exception):
    """A call that ends with a status of its own (not an A2A error)."""

    def __init__(self, status: GrpcStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class FrameError(GrpcError):
    """The request body is not a sequence of gRPC messages we can read."""


def method_at(path: str) -> GrpcMethod:
    """The method served at ``path``; UNIMPLEMENTED for any other path."""
    method = METHODS.get(path)
    if method is None:
        raise GrpcError(GrpcStatus.UNIMPLEMENTED, f"Method not found: {path}")
    return method


def frame(message: bytes) -> bytes:
    """One length-prefixed message, uncompressed."""
    return _HEADER.pack(0, len(message)) + message


def read_frames(body: bytes) -> list[bytes]:
    """The messages of a request body; FrameError for a truncated or compressed one.

    A compressed message is UNIMPLEMENTED (we accept identity only, and say so
    in ``grpc-accept-encoding``); a body cut short is INTERNAL, as the gRPC
    libraries answer it.
    """
    messages = []
    offset = 0
    while offset < len(body):
        if len(body) - offset < _HEADER.size:
            raise FrameError(GrpcStatus.INTERNAL, "Truncated gRPC message header")
        flag, length = _HEADER.unpack_from(body, offset)
        offset += _HEADER.size
        if flag == 1:
            raise FrameError(
                GrpcStatus.UNIMPLEMENTED,
                "Compressed messages are not supported (grpc-accept-encoding: identity)",
            )
        if flag != 0:
            raise FrameError(GrpcStatus.INTERNAL, f"Invalid gRPC message flag {flag}")
        if len(body) - offset < length:
            raise FrameError(GrpcStatus.INTERNAL, "Truncated gRPC message")
        messages.append(body[offset : offset + length])
        offset += length
    return messages


def take_frames(buffer: bytearray) -> list[bytes]:
    """The whole messages at the front of ``buffer``, removed from it; a partial one stays.

    For a request read as it arrives (a client-streaming call): each message
    is checked as :func:`read_frames` checks it.
    """
    end = 0
    while len(buffer) - end >= _HEADER.size:
        _, length = _HEADER.unpack_from(buffer, end)
        if len(buffer) - end - _HEADER.size < length:
            break
        end += _HEADER.size + length
    messages = read_frames(bytes(buffer[:end]))
    del buffer[:end]
    return messages


_TIMEOUT = re.compile(r"^(\d{1,8})([HMSmun])$")
_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def parse_timeout(value: str | None) -> float | None:
    """Seconds of a ``grpc-timeout`` header (``"250m"`` is 0.25); None when absent."""
    if value is None:
        return None
    match = _TIMEOUT.match(value.strip())
    if match is None:
        raise GrpcError(GrpcStatus.INTERNAL, f"Invalid grpc-timeout: {value!r}")
    return int(match.group(1)) * _UNITS[match.group(2)]


def error_status(error: A2AError) -> tuple[GrpcStatus, status_pb2.Status]:
    """The status of an A2A error: its code from the error table, its ErrorInfo detail."""
    code = GrpcStatus[error.spec.grpc_status]
    info = error_details_pb2.ErrorInfo(
        reason=error.spec.reason, domain=ERROR_DOMAIN, metadata=error.metadata
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    return code, status_pb2.Status(code=code, message=error.message, details=[detail])


def status_trailers(
    code: GrpcStatus, message: str = "", details: status_pb2.Status | None = None
) -> list[tuple[bytes, bytes]]:
    """The trailers that end a call: status, message, and the rich status when there is one."""
    trailers = [(b"grpc-status", str(int(code)).encode())]
    if message:
        trailers.append((b"grpc-message", quote_message(message).encode("ascii")))
    if details is not None:
        encoded = base64.b64encode(details.SerializeToString()).rstrip(b"=")
        trailers.append((b"grpc-status-details-bin", encoded))
    return trailers


def quote_message(message: str) -> str:
    """``grpc-message`` is percent-encoded UTF-8 (the gRPC HTTP/2 protocol)."""
    return quote(message, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")


def unquote_message(value: str) -> str:
    return unquote(value)


def decode_status_details(value: str) -> status_pb2.Status:
    """The ``google.rpc.Status`` of a ``grpc-status-details-bin`` trailer."""
    status = status_pb2.Status()
    status.ParseFromString(base64.b64decode(value + "=" * (-len(value) % 4)))
    return status


def error_from_status(status: status_pb2.Status) -> tuple[str | None, dict[str, str]]:
    """The A2A reason and metadata in a status's ErrorInfo detail, if it has one."""
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            return info.reason, dict(info.metadata)
    return None, {}

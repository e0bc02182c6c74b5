"""The standard gRPC services served beside A2AService: health and reflection. Pure.

``grpc.health.v1.Health`` (Check, Watch) lets load balancers ask whether the
server takes work; ``grpc.reflection.v1.ServerReflection`` (and its v1alpha
twin, which older tools such as grpcurl still call) lets tools and gateways
discover A2AService and its messages without a copy of a2a.proto.

Their messages are declared here, from the gRPC project's .proto files
(grpc/health/v1/health.proto, grpc/reflection/v1/reflection.proto), into a
descriptor pool of their own, as a2a.proto's messages are (protocol.proto):
a process that also imports grpcio's generated modules (grpcio-health-checking,
grpcio-reflection) holds both without clashing in the default pool.
Reflection describes both pools.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import DecodeError, Message

from .grpc_wire import SERVICE, GrpcStatus
from .proto import a2a_pb2

__all__ = [
    "HEALTH_SERVICE",
    "REFLECTION_SERVICES",
    "STANDARD_SERVICES",
    "ReflectionSession",
    "ServingStatus",
    "health_request_service",
    "health_response",
    "served_services",
]

HEALTH_SERVICE = "grpc.health.v1.Health"
REFLECTION_SERVICES = (
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
)
#: The services this module answers, by name.
STANDARD_SERVICES = (HEALTH_SERVICE, *REFLECTION_SERVICES)

_FieldType = descriptor_pb2.FieldDescriptorProto.Type
_Label = descriptor_pb2.FieldDescriptorProto.Label
_STRING, _INT32, _BYTES = _FieldType.TYPE_STRING, _FieldType.TYPE_INT32, _FieldType.TYPE_BYTES
_MESSAGE, _ENUM = _FieldType.TYPE_MESSAGE, _FieldType.TYPE_ENUM
_REPEATED = _Label.LABEL_REPEATED


class ServingStatus(enum.IntEnum):
    """``HealthCheckResponse.ServingStatus``."""

    UNKNOWN = 0
    SERVING = 1
    NOT_SERVING = 2
    SERVICE_UNKNOWN = 3


def _message(
    file: descriptor_pb2.FileDescriptorProto,
    name: str,
    fields: Iterable[tuple[str, int, Any, str | None, int | None]],
    *,
    oneof: str | None = None,
    repeated: Iterable[str] = (),
) -> descriptor_pb2.DescriptorProto:
    """One message: fields as (name, number, type, type name, oneof index)."""
    message = file.message_type.add(name=name)
    if oneof is not None:
        message.oneof_decl.add(name=oneof)
    for field_name, number, kind, type_name, oneof_index in fields:
        field = message.field.add(name=field_name, number=number, type=kind)
        field.label = _REPEATED if field_name in repeated else _Label.LABEL_OPTIONAL
        if type_name is not None:
            field.type_name = type_name
        if oneof_index is not None:
            field.oneof_index = oneof_index
    return message


def _health_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="grpc/health/v1/health.proto", package="grpc.health.v1", syntax="proto3"
    )
    _message(file, "HealthCheckRequest", [("service", 1, _STRING, None, None)])
    response = _message(
        file,
        "HealthCheckResponse",
        [("status", 1, _ENUM, ".grpc.health.v1.HealthCheckResponse.ServingStatus", None)],
    )
    statuses = response.enum_type.add(name="ServingStatus")
    for status in ServingStatus:
        statuses.value.add(name=status.name, number=status.value)
    service = file.service.add(name="Health")
    request, answer = ".grpc.health.v1.HealthCheckRequest", ".grpc.health.v1.HealthCheckResponse"
    service.method.add(name="Check", input_type=request, output_type=answer)
    service.method.add(name="Watch", input_type=request, output_type=answer, server_streaming=True)
    return file


def _reflection_file(version: str) -> descriptor_pb2.FileDescriptorProto:
    package = f"grpc.reflection.{version}"
    file = descriptor_pb2.FileDescriptorProto(
        name=f"grpc/reflection/{version}/reflection.proto", package=package, syntax="proto3"
    )
    own = f".{package}."
    _message(
        file,
        "ServerReflectionRequest",
        [
            ("host", 1, _STRING, None, None),
            ("file_by_filename", 3, _STRING, None, 0),
            ("file_containing_symbol", 4, _STRING, None, 0),
            ("file_containing_extension", 5, _MESSAGE, own + "ExtensionRequest", 0),
            ("all_extension_numbers_of_type", 6, _STRING, None, 0),
            ("list_services", 7, _STRING, None, 0),
        ],
        oneof="message_request",
    )
    _message(
        file,
        "ExtensionRequest",
        [("containing_type", 1, _STRING, None, None), ("extension_number", 2, _INT32, None, None)],
    )
    _message(
        file,
        "ServerReflectionResponse",
        [
            ("valid_host", 1, _STRING, None, None),
            ("original_request", 2, _MESSAGE, own + "ServerReflectionRequest", None),
            ("file_descriptor_response", 4, _MESSAGE, own + "FileDescriptorResponse", 0),
            ("all_extension_numbers_response", 5, _MESSAGE, own + "ExtensionNumberResponse", 0),
            ("list_services_response", 6, _MESSAGE, own + "ListServiceResponse", 0),
            ("error_response", 7, _MESSAGE, own + "ErrorResponse", 0),
        ],
        oneof="message_response",
    )
    _message(
        file,
        "FileDescriptorResponse",
        [("file_descriptor_proto", 1, _BYTES, None, None)],
        repeated=["file_descriptor_proto"],
    )
    _message(
        file,
        "ExtensionNumberResponse",
        [("base_type_name", 1, _STRING, None, None), ("extension_number", 2, _INT32, None, None)],
        repeated=["extension_number"],
    )
    _message(
        file,
        "ListServiceResponse",
        [("service", 1, _MESSAGE, own + "ServiceResponse", None)],
        repeated=["service"],
    )
    _message(file, "ServiceResponse", [("name", 1, _STRING, None, None)])
    _message(
        file,
        "ErrorResponse",
        [("error_code", 1, _INT32, None, None), ("error_message", 2, _STRING, None, None)],
    )
    file.service.add(name="ServerReflection").method.add(
        name="ServerReflectionInfo",
        input_type=own + "ServerReflectionRequest",
        output_type=own + "ServerReflectionResponse",
        client_streaming=True,
        server_streaming=True,
    )
    return file


_POOL = descriptor_pool.DescriptorPool()
for _file in (_health_file(), _reflection_file("v1"), _reflection_file("v1alpha")):
    _POOL.Add(_file)


def _message_class(full_name: str) -> type[Message]:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(full_name))


_HealthCheckRequest = _message_class("grpc.health.v1.HealthCheckRequest")
_HealthCheckResponse = _message_class("grpc.health.v1.HealthCheckResponse")


def health_request_service(body: bytes) -> str:
    """The ``service`` a HealthCheckRequest asks about ("" is the server as a whole)."""
    request = _HealthCheckRequest()
    request.ParseFromString(body)
    service: str = request.service  # type: ignore[attr-defined]
    return service


def health_response(status: ServingStatus) -> Message:
    """A HealthCheckResponse."""
    return _HealthCheckResponse(status=int(status))


def served_services() -> list[str]:
    """What reflection lists: A2AService first, then the standard services."""
    return [SERVICE, *STANDARD_SERVICES]


class ReflectionSession:
    """One ServerReflectionInfo stream: each request answered in turn.

    A file goes out with its dependencies, each file once per stream (as
    grpc-go answers), so a client resolves a symbol in one round trip.
    """

    def __init__(self, version: str) -> None:
        self._request_class = _message_class(f"grpc.reflection.{version}.ServerReflectionRequest")
        self._response_class = _message_class(f"grpc.reflection.{version}.ServerReflectionResponse")
        self._sent: set[str] = set()

    def answer(self, body: bytes) -> Message:
        """The response to one serialised request."""
        request: Any = self._request_class()
        try:
            request.ParseFromString(body)
        except DecodeError:
            return self._error(request, GrpcStatus.INVALID_ARGUMENT, "not a reflection request")
        response: Any = self._response_class(original_request=request)
        kind = request.WhichOneof("message_request")
        if kind == "list_services":
            for name in served_services():
                response.list_services_response.service.add(name=name)
        elif kind == "file_by_filename":
            filename = request.file_by_filename
            return self._files(request, response, lambda pool: pool.FindFileByName(filename))
        elif kind == "file_containing_symbol":
            symbol = request.file_containing_symbol
            return self._files(request, response, lambda p: p.FindFileContainingSymbol(symbol))
        elif kind == "file_containing_extension":
            wanted = request.file_containing_extension

            def extension_file(pool: Any) -> FileDescriptor:
                extended = pool.FindMessageTypeByName(wanted.containing_type)
                found: FileDescriptor = pool.FindExtensionByNumber(
                    extended, wanted.extension_number
                ).file
                return found

            return self._files(request, response, extension_file)
        elif kind == "all_extension_numbers_of_type":
            name = request.all_extension_numbers_of_type
            pool = _pool_holding(lambda p: p.FindMessageTypeByName(name))
            if pool is None:
                return self._error(request, GrpcStatus.NOT_FOUND, f"Type not found: {name}")
            numbers = response.all_extension_numbers_response
            numbers.base_type_name = name
            extended = pool.FindMessageTypeByName(name)
            numbers.extension_number.extend(
                sorted(ext.number for ext in pool.FindAllExtensions(extended))
            )
        else:
            return self._error(request, GrpcStatus.INVALID_ARGUMENT, "the request names nothing")
        return response  # type: ignore[no-any-return]

    def _files(self, request: Any, response: Any, find: Any) -> Message:
        pool = _pool_holding(find)
        if pool is None:
            return self._error(request, GrpcStatus.NOT_FOUND, "not found")
        files = response.file_descriptor_response.file_descriptor_proto
        for file in _with_dependencies(find(pool)):
            if file.name in self._sent and files:
                continue
            self._sent.add(file.name)
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            files.append(proto.SerializeToString())
        return response  # type: ignore[no-any-return]

    def _error(self, request: Any, code: GrpcStatus, text: str) -> Message:
        response: Any = self._response_class(original_request=request)
        response.error_response.error_code = int(code)
        response.error_response.error_message = text
        return response  # type: ignore[no-any-return]


def _pool_holding(find: Any) -> Any:
    """The first pool (a2a.proto's, then this module's) where ``find`` finds something."""
    for pool in (a2a_pb2.DESCRIPTOR.pool, _POOL):
        try:
            find(pool)
        except KeyError:
            continue
        return pool
    return None


def _with_dependencies(file: FileDescriptor) -> Iterator[FileDescriptor]:
    """``file`` first, then every file it imports, directly or not, each once."""
    seen: set[str] = set()
    pending = [file]
    while pending:
        current = pending.pop(0)
        if current.name in seen:
            continue
        seen.add(current.name)
        yield current
        pending.extend(current.dependencies)

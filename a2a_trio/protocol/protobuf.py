"""Our wire models as protobuf messages of a2a.proto, and back: the gRPC binding's codec.

Every model of :mod:`.models` is the message of a2a.proto with the same name,
so the conversion is generic. To protobuf, a model's ProtoJSON goes through
protobuf's own JSON parser (one mapping, the one every SDK uses). From
protobuf, the fields a message has set become the model's fields, and proto3's
"unset" (an empty string, zero, an empty list in a field without presence)
stays unset, as it is on the JSON bindings, unless the model requires the
field: a ``ListTasksResponse`` with no tasks still has ``tasks: []``.

Sans-IO and pure, as the rest of the protocol package.
"""

from __future__ import annotations

from datetime import UTC
from functools import cache
from typing import Any, TypeVar

from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from pydantic import BaseModel

from . import models
from ._base import ProtoModel
from .errors import InvalidParamsError
from .proto import a2a_pb2
from .proto._pool import POOL

__all__ = [
    "decode_message",
    "from_proto",
    "proto_class",
    "proto_fields",
    "to_proto",
]

PACKAGE = "lf.a2a.v1"
#: Models whose message lives outside lf.a2a.v1 (by model class name).
_WELL_KNOWN = {"Empty": "google.protobuf.Empty"}

M = TypeVar("M", bound=BaseModel)

#: The pydantic model of each message of a2a.proto, by message name.
MODELS: dict[str, type[ProtoModel]] = {
    name: value
    for name in models.__all__
    if isinstance(value := getattr(models, name), type) and issubclass(value, ProtoModel)
}


@cache
def proto_class(name: str) -> type[Message]:
    """The generated message class of a2a.proto named ``name`` (``Task``, ``Empty``)."""
    full_name = _WELL_KNOWN.get(name, f"{PACKAGE}.{name}")
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(full_name))


def to_proto(model: BaseModel) -> Message:
    """The protobuf message of ``model`` (a model of :mod:`.models`, or ``Empty``)."""
    wire = model.model_dump(mode="json", exclude_none=True, by_alias=True)
    return json_format.ParseDict(wire, proto_class(type(model).__name__)())


def from_proto(message: Message, model: type[M]) -> M:
    """``message`` as ``model`` (raises pydantic's ValidationError when it is not one)."""
    return model.model_validate(proto_fields(message))


def decode_message(data: bytes, name: str) -> Message:
    """Parse the serialised message ``name``; InvalidParamsError when it is not one."""
    message = proto_class(name)()
    try:
        message.ParseFromString(data)
    except DecodeError as error:
        raise InvalidParamsError(f"The request is not a valid {name} message: {error}") from None
    return message


def proto_fields(message: Message) -> dict[str, Any]:
    """The fields of ``message`` as a model of the same name validates them.

    Keys are the proto field names (the models take them as well as the
    camelCase ones); values are Python values the models accept.
    """
    descriptor = message.DESCRIPTOR
    data: dict[str, Any] = {
        field.name: _value(field, value) for field, value in message.ListFields()
    }
    for name, default in _required_defaults(descriptor).items():
        data.setdefault(name, default)
    return data


def _value(field: FieldDescriptor, value: Any) -> Any:
    if _is_map(field):
        value_field = _message_type(field).fields_by_name["value"]
        return {key: _single(value_field, item) for key, item in value.items()}
    if _is_repeated(field):
        return [_single(field, item) for item in value]
    return _single(field, value)


def _single(field: FieldDescriptor, value: Any) -> Any:
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        return value  # strings, numbers, bools; enums as numbers; bytes as bytes
    full_name = _message_type(field).full_name
    if full_name == "google.protobuf.Timestamp":
        return value.ToDatetime(tzinfo=UTC)
    if full_name in ("google.protobuf.Struct", "google.protobuf.Value"):
        return _integral(json_format.MessageToDict(value))
    return proto_fields(value)


def _integral(value: Any) -> Any:
    """JSON numbers as JSON-RPC carries them: protobuf holds every number as a double."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _is_map(field: FieldDescriptor) -> bool:
    return (
        _is_repeated(field)
        and field.type == FieldDescriptor.TYPE_MESSAGE
        and _message_type(field).GetOptions().map_entry
    )


def _message_type(field: FieldDescriptor) -> Descriptor:
    assert field.message_type is not None, f"{field.full_name} is not a message field"
    return field.message_type


@cache
def _required_defaults(descriptor: Descriptor) -> dict[str, Any]:
    """What proto3 leaves unsaid of the fields ``descriptor``'s model requires.

    A field without presence that holds its default is not sent, but the
    model may require it (``ListTasksResponse.nextPageToken`` is ``""`` on
    the last page): it gets that default back.
    """
    model = MODELS.get(descriptor.name)
    if model is None:
        return {}
    required = {name for name, info in model.model_fields.items() if info.is_required()} | {
        info.alias for info in model.model_fields.values() if info.is_required() and info.alias
    }
    defaults: dict[str, Any] = {}
    for field in descriptor.fields:
        if field.name not in required or (field.has_presence and not _is_repeated(field)):
            continue
        if _is_map(field):
            defaults[field.name] = {}
        elif _is_repeated(field):
            defaults[field.name] = []
        elif field.type != FieldDescriptor.TYPE_MESSAGE:
            defaults[field.name] = field.default_value
    return defaults


# The generated module is imported for its registration of a2a.proto in POOL.
_ = a2a_pb2

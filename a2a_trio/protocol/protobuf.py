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

from datetime import UTC, datetime
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
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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
    """The protobuf message of ``model`` (a model of :mod:`.models`, or ``Empty``).

    Built by the message's constructor, in protobuf's C code, from the
    model's Python values (field names are the proto's; enums, bytes and
    datetimes as they are): only the JSON-valued fields (``Struct``,
    ``Value``) are turned into messages here. protobuf's own JSON parser did
    the same from the model's ProtoJSON some 20 times slower, in Python.
    """
    name = type(model).__name__
    data = model.model_dump(exclude_none=True, by_alias=False)
    fields = _constructor_fields(data, _descriptor(name))
    return proto_class(name)(**fields)


#: How a field's Python value becomes what the message's constructor takes.
_AS_IS, _MESSAGE, _MESSAGES, _MESSAGE_MAP, _JSON, _JSONS, _JSON_MAP, _TIME = range(8)
_JSON_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)


@cache
def _plan(descriptor: Descriptor) -> dict[str, tuple[str, int, Descriptor]]:
    """The fields of ``descriptor``'s model that need converting: their proto names, and how."""
    plan: dict[str, tuple[str, int, Descriptor]] = {}
    for field in descriptor.fields:
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        target = _message_type(field)
        if _is_map(field):
            value_field = target.fields_by_name["value"]
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                value_type = _message_type(value_field)
                how = _JSON_MAP if value_type.full_name in _JSON_TYPES else _MESSAGE_MAP
                plan[field.name] = (field.name, how, value_type)
        elif target.full_name in _JSON_TYPES:
            plan[field.name] = (field.name, _JSONS if _is_repeated(field) else _JSON, target)
        elif target.full_name == "google.protobuf.Timestamp":
            plan[field.name] = (field.name, _TIME, target)
        else:
            plan[field.name] = (field.name, _MESSAGES if _is_repeated(field) else _MESSAGE, target)
    model = MODELS.get(descriptor.name)
    for name, info in model.model_fields.items() if model is not None else ():
        if name in descriptor.fields_by_name or info.alias is None:
            continue
        # A model field named apart from its proto field (StringList.values is ``list``).
        field = descriptor.fields_by_name.get(info.alias) or next(
            f for f in descriptor.fields if f.json_name == info.alias
        )
        _, how, target = plan.pop(field.name, (field.name, _AS_IS, descriptor))
        plan[name] = (field.name, how, target)
    return plan


def _constructor_fields(data: dict[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    plan = _plan(descriptor)
    if not plan:
        return data
    for name, (proto_name, how, target) in plan.items():
        if name not in data:
            continue
        value = data.pop(name) if proto_name != name else data[name]
        if value is None:
            if how == _JSON:  # JSON null, which the model keeps
                value = _json_message(None, target)
        elif how == _MESSAGE:
            value = _constructor_fields(value, target)
        elif how == _MESSAGES:
            value = [_constructor_fields(item, target) for item in value]
        elif how == _MESSAGE_MAP:
            value = {key: _constructor_fields(item, target) for key, item in value.items()}
        elif how == _JSON:
            value = _json_message(value, target)
        elif how == _JSONS:
            value = [_json_message(item, target) for item in value]
        elif how == _JSON_MAP:
            value = {key: _json_message(item, target) for key, item in value.items()}
        elif how == _TIME:
            value = _timestamp(value)
        data[proto_name] = value
    return data


def _timestamp(value: datetime) -> dict[str, int]:
    """A ``Timestamp``'s fields for ``value`` (naive: UTC), in milliseconds as the JSON
    bindings send it; protobuf's own conversion of a datetime, in Python, cost a gRPC
    answer ~1 % of its CPU."""
    since = value - (_EPOCH if value.tzinfo is not None else _EPOCH.replace(tzinfo=None))
    seconds = since.days * 86_400 + since.seconds
    return {"seconds": seconds, "nanos": since.microseconds // 1000 * 1_000_000}


def _json_message(value: Any, descriptor: Descriptor) -> Message:
    """A ``Struct``, ``Value`` or ``ListValue`` (of a2a.proto's pool) holding ``value``."""
    message: Any = _class_of(descriptor)()
    name = descriptor.full_name
    if name == "google.protobuf.Struct":
        message.update(value)
    elif name == "google.protobuf.ListValue":
        message.extend(value)
    else:
        holder: Any = _class_of(descriptor.fields_by_name["struct_value"].message_type)()
        holder.update({"value": value})
        message.CopyFrom(holder.fields["value"])
    return message  # type: ignore[no-any-return]


@cache
def _descriptor(name: str) -> Descriptor:
    return POOL.FindMessageTypeByName(_WELL_KNOWN.get(name, f"{PACKAGE}.{name}"))


@cache
def _class_of(descriptor: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


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

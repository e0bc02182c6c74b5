"""ProtoJSON conventions shared by every wire model.

A2A 1.0 is defined in protobuf and carried as ProtoJSON: camelCase field names
(snake_case also accepted on input), unset fields omitted, enums as their
names, timestamps as RFC 3339 UTC strings, bytes as base64, unknown fields
ignored. Everything here is pure.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import repeat
from operator import is_not
from typing import Annotated, Any, Self, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer
from pydantic.alias_generators import to_camel

__all__ = [
    "Base64Bytes",
    "ProtoBool",
    "ProtoEnum",
    "ProtoInt",
    "ProtoModel",
    "Timestamp",
    "format_timestamp",
    "parse_timestamp",
    "utcnow",
]


class ProtoModel(BaseModel):
    """Base of every wire object: ProtoJSON in, ProtoJSON out."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        use_enum_values=False,
    )

    def __copy__(self) -> Self:
        # BaseModel.__copy__ without copy.copy() of each part (three dispatches
        # through the copy module): wire models keep no extra fields and no
        # private attributes. A SendMessage copies about seven models.
        if self.__pydantic_extra__ is not None or self.__pydantic_private__ is not None:
            return super().__copy__()
        cls = type(self)
        copied = cls.__new__(cls)
        _set = object.__setattr__
        _set(copied, "__dict__", self.__dict__.copy())
        _set(copied, "__pydantic_extra__", None)
        _set(copied, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        _set(copied, "__pydantic_private__", None)
        return copied

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy, with ``update``'s fields replaced (not validated), as pydantic's."""
        if deep or self.__pydantic_extra__ is not None:
            return super().model_copy(update=update, deep=deep)
        copied = self.__copy__()
        if update:
            copied.__dict__.update(update)
            copied.__pydantic_fields_set__.update(update.keys())
        return copied

    def to_wire(self) -> dict[str, Any]:
        """The ProtoJSON object: camelCase keys, unset fields omitted."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_json(self) -> str:
        """The ProtoJSON text of :meth:`to_wire`, compact."""
        # model_dump_json(exclude_none=True) without its Python wrapper: this
        # runs for every event recorded and every answer.
        text: bytes = self.__pydantic_serializer__.to_json(self, exclude_none=True)
        return text.decode()

    @classmethod
    def from_wire(cls, data: Any) -> Self:
        """Validate a decoded ProtoJSON value (raises pydantic.ValidationError)."""
        return cls.model_validate(data)


def oneof_count(model: BaseModel) -> int:
    """How many fields of ``model`` are set: a protobuf oneof wants exactly one."""
    # The loop in C (each server event is wrapped in a StreamResponse, a oneof):
    # a generator's frame resumed per field costs four times as much.
    return sum(map(is_not, model.__dict__.values(), _NONES))


_NONES = repeat(None)


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with millisecond precision: ``2025-10-28T10:30:00.000Z``."""
    if value.tzinfo is UTC:  # what utcnow() gives: see iso_utc
        return _fields(_MILLISECONDS, value, value.microsecond // 1000)
    return iso_utc(value, "milliseconds")


# What isoformat() writes, for the two precisions used, without its keyword
# argument: isoformat(timespec=...) costs about ten times as many instructions
# (and a status's timestamp is written several times per SendMessage).
_MILLISECONDS = "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ"
_MICROSECONDS = "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ"


def _fields(pattern: str, value: datetime, fraction: int) -> str:
    date, time = (value.year, value.month, value.day), (value.hour, value.minute, value.second)
    return pattern % (*date, *time, fraction)


def iso_utc(value: datetime, timespec: str) -> str:
    """``value`` in UTC as ISO 8601 with a ``Z``; naive values are taken as UTC."""
    if value.tzinfo is UTC and timespec == "microseconds":  # utcnow()'s, as stored
        return _fields(_MICROSECONDS, value, value.microsecond)
    if value.tzinfo is UTC:  # what utcnow() gives: no conversion needed
        return value.isoformat(timespec=timespec)[:-6] + "Z"
    return utc_naive(value).isoformat(timespec=timespec) + "Z"


def utc_naive(value: datetime) -> datetime:
    """``value`` in UTC without its zone (naive values are taken as UTC already)."""
    if value.tzinfo is not None and value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None)


def parse_timestamp(value: Any) -> datetime:
    """Parse an RFC 3339 / ISO 8601 timestamp; naive values are taken as UTC."""
    if isinstance(value, datetime) and value.tzinfo is UTC:
        return value  # what utcnow() gives, as every event the server makes has
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"not an RFC 3339 timestamp: {value!r}") from None
    else:
        raise ValueError(f"expected an RFC 3339 timestamp string, got {type(value).__name__}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


Timestamp = Annotated[
    datetime,
    BeforeValidator(parse_timestamp),
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
]


#: The text of an integer in JSON or a query string: ASCII digits, a minus at most.
_INTEGER_TEXT = re.compile(r"-?[0-9]+(\.0*)?")
_INT32 = range(-(2**31), 2**31)


def _int32(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected an integer, got {str(value).lower()}")
    if isinstance(value, str):
        # Python's int() would also take " 5", "+5", "5_0" and "\u0665" (an Arabic-Indic
        # five); no ProtoJSON parser does, so neither does this one.
        if not _INTEGER_TEXT.fullmatch(value):
            raise ValueError(f"expected an integer, got {_shown(value)}")
        whole = value.partition(".")[0]
        if len(whole.lstrip("-").lstrip("0")) > len(str(2**31)):
            # Past int32 whatever it is; and int() refuses texts past 4,300 digits
            # with a message naming sys.set_int_max_str_digits.
            raise ValueError(f"out of range for an int32: {_shown(value)}")
        value = int(whole)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and value not in _INT32:
        raise ValueError(f"out of range for an int32: {_shown(str(value))}")
    return value


def _shown(text: str) -> str:
    return repr(text if len(text) <= 24 else text[:21] + "...")


#: A protobuf int32 field: a JSON number, or a string of one (ProtoJSON takes
#: both), never ``true`` or ``false``. Python's bool is an int, so pydantic's
#: lax mode would read ``true`` as 1 (protobuf's own parser refuses it); a value
#: outside int32's range is refused as protobuf refuses it, rather than read.
ProtoInt = Annotated[int, BeforeValidator(_int32)]


def _true_or_false(value: Any) -> Any:
    # A query string carries every value as text: there, "true" and "false" are the
    # booleans (both bindings of a client write them so); nothing else is one.
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


#: A protobuf bool field: ``true`` or ``false`` (or those words in a query string),
#: never 1, 0, "yes" or "on", which pydantic's lax mode would read as booleans.
ProtoBool = Annotated[bool, BeforeValidator(_true_or_false)]


def _decode_base64(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if not isinstance(value, str):
        raise ValueError("expected a base64 string")
    # ProtoJSON accepts standard or URL-safe alphabets, with or without padding.
    text = value.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("invalid base64 data") from None


def _encode_base64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


Base64Bytes = Annotated[
    bytes,
    BeforeValidator(_decode_base64),
    PlainSerializer(_encode_base64, return_type=str, when_used="json"),
]


E = TypeVar("E", bound="ProtoEnum")


class ProtoEnum(enum.StrEnum):
    """A protobuf enum: serialised by name, parsed from name or number.

    ``_short`` lets a lenient parser accept the legacy lowercase spellings
    (``working``, ``input-required``) that appear in query strings.
    """

    @classmethod
    def _prefix(cls) -> str:
        return ""

    @classmethod
    def parse(cls, value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):
            raise ValueError(f"invalid {cls.__name__}: {value!r}")
        if isinstance(value, int):
            members = list(cls)
            if 0 <= value < len(members):
                return members[value]
            raise ValueError(f"invalid {cls.__name__} number: {value}")
        if isinstance(value, str):
            text = value.strip()
            try:
                return cls(text)
            except ValueError:
                pass
            candidate = cls._prefix() + text.upper().replace("-", "_")
            try:
                return cls(candidate)
            except ValueError:
                pass
        allowed = ", ".join(member.value for member in cls)
        raise ValueError(f"invalid {cls.__name__} {value!r}; expected one of {allowed}")

    def __str__(self) -> str:
        return str(self.value)

"""The field types the models share: bounded JSON, identifiers, parts, header values."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
)

from ..limits import bounded_id, bounded_json

__all__ = ["HeaderValue", "Id", "JsonValue", "OptionalId", "Struct"]

#: A google.protobuf.Struct: free-form JSON, bounded (see limits.py).
Struct = Annotated[dict[str, Any], BeforeValidator(bounded_json)]
#: An identifier a client sends (see limits.bounded_id).
Id = Annotated[str, Field(min_length=1), AfterValidator(bounded_id)]
OptionalId = Annotated[str | None, AfterValidator(bounded_id)]
#: A google.protobuf.Value (a data part's content), bounded the same way.
JsonValue = Annotated[Any, BeforeValidator(bounded_json)]


def _header_value(value: str | None) -> str | None:
    if value is not None and not _HEADER_VALUE.fullmatch(value):
        raise ValueError("must be printable ASCII: it is sent in an HTTP header of each webhook")
    return value


_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]*")
#: A value the push worker sends as an HTTP header (a token, credentials).
HeaderValue = Annotated[str | None, AfterValidator(_header_value)]

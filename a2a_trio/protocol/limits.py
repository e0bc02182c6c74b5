"""Bounds on what a request may carry: whatever is accepted can be stored and read back.

A2A leaves metadata, data parts and extension params free-form JSON. Without
bounds a client can send a value the server accepts but cannot store (too
deep for the serialiser) or cannot read back (too deep for the JSON parser,
which stops at about 200 levels for a whole stored task), or so many parts
that handling one message stalls every other client. Pure: the checks run
while a request is validated, before any executor starts.

Request models are validated with ``context={"limits": limits}``
(:func:`validation_context`); without a context (an executor building its
events, the store reading a task back) only :data:`DEPTH_CEILING` applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationInfo

__all__ = [
    "DEPTH_CEILING",
    "Limits",
    "bounded_id",
    "bounded_json",
    "bounded_parts",
    "lone_surrogate_path",
    "validation_context",
]

#: The deepest free-form value any model accepts, whatever the settings say:
#: a stored task nests it a few levels further, and the JSON parser reading
#: the task back gives up near 200.
DEPTH_CEILING = 100


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request may carry (``[limits]`` in a2a.toml)."""

    #: Deepest nesting of one free-form JSON value (metadata, a data part,
    #: extension params): ``{"a": {"b": 1}}`` is 2 levels. At most DEPTH_CEILING.
    json_depth: int = 32
    #: Most values (objects, arrays and scalars together) in one free-form value.
    json_items: int = 100_000
    #: Most parts in one message, or in one artifact (appended chunks included).
    parts: int = 1_000
    #: Most artifacts one task holds.
    artifacts: int = 1_000
    #: Longest identifier a client may send (messageId, taskId, contextId, a
    #: push config id), in bytes of UTF-8: PostgreSQL indexes hold about 2.7 kB.
    id_bytes: int = 1_024
    #: Most messages a task's history shows: the oldest leave it as new ones
    #: join (the task's event log keeps every one, and responses read the
    #: window from there; no write stores it).
    history_messages: int = 1_000
    #: Most bytes (of JSON) the messages a task's history shows may take
    #: together; the newest message is shown whatever its size.
    history_bytes: int = 1024 * 1024

    def __post_init__(self) -> None:
        if not 1 <= self.json_depth <= DEPTH_CEILING:
            raise ValueError(f"json_depth must be between 1 and {DEPTH_CEILING}")
        for name in (
            "json_items",
            "parts",
            "artifacts",
            "id_bytes",
            "history_messages",
            "history_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def validation_context(limits: Limits) -> dict[str, Any]:
    """The pydantic validation context that applies ``limits``."""
    return {"limits": limits}


def _limits(info: ValidationInfo) -> Limits | None:
    context = info.context
    if isinstance(context, dict):
        limits = context.get("limits")
        if isinstance(limits, Limits):
            return limits
    return None


def bounded_json(value: Any, info: ValidationInfo) -> Any:
    """Validator of a free-form JSON value: refuse one nested or sized past the limits."""
    limits = _limits(info)
    max_depth = limits.json_depth if limits else DEPTH_CEILING
    max_items = limits.json_items if limits else None
    items = 1
    # Iterative, and never deeper than the limit plus one: the input itself
    # may be nested far past what recursion would survive.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: Any = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        depth += 1
        if depth > max_depth:
            raise ValueError(f"nested deeper than the limit of {max_depth} levels")
        items += len(children)
        if max_items is not None and items > max_items:
            raise ValueError(f"holds more than the limit of {max_items} values")
        stack.extend((child, depth) for child in children)
    return value


def bounded_parts(value: Any, info: ValidationInfo) -> Any:
    """Validator (before the parts themselves) of a message's or artifact's parts."""
    limits = _limits(info)
    if limits is not None and isinstance(value, list) and len(value) > limits.parts:
        # Checked before any part is validated: a body of 600,000 parts costs
        # one length check, not 600,000 validations.
        raise ValueError(f"{len(value)} parts exceed the limit of {limits.parts}")
    return value


def bounded_id(value: str | None, info: ValidationInfo) -> str | None:
    """Validator of an identifier a client sends: one every backend can store and index.

    Refuses U+0000 (PostgreSQL text cannot hold it) and ids longer than
    ``Limits.id_bytes``. Only where limits apply (requests); what an
    executor or the store builds is taken as it is.
    """
    limits = _limits(info)
    if value is None or limits is None:
        return value
    if "\x00" in value:
        raise ValueError("must not contain U+0000")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limits.id_bytes:
        raise ValueError(f"{size} bytes exceed the limit of {limits.id_bytes} for an identifier")
    return value


# A UTF-16 surrogate escaped in JSON text, or encoded in raw UTF-8 bytes
# (which json.loads decodes with "surrogatepass"). Pairs are fine (emoji
# from an ASCII-only encoder); only a lone one cannot be stored as UTF-8.
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\xed[\xa0-\xbf]")


def lone_surrogate_path(body: bytes, document: Any) -> str | None:
    """The wire path of a string in ``document`` that is not valid Unicode, if any.

    ``document`` is ``body`` decoded. The body is searched first (in C), so
    the walk over the document is paid only by bodies holding surrogates.
    """
    # Two substring searches first: far quicker than the regex over 10 MiB.
    if (b"\\u" not in body and b"\xed" not in body) or _SURROGATE_HINT.search(body) is None:
        return None
    for path, text in _strings(document, ""):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # The path may hold the bad key itself: show it escaped.
            return path.encode("utf-8", "backslashreplace").decode() or "(the request)"
    return None


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            yield where, current
        elif isinstance(current, dict):
            for key, child in current.items():
                child_path = f"{where}.{key}" if where else str(key)
                yield child_path, key  # keys are stored too
                stack.append((child, child_path))
        elif isinstance(current, list):
            stack.extend((child, f"{where}.{index}") for index, child in enumerate(current))

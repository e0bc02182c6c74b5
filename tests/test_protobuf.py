"""The protobuf codec of the gRPC binding: every message of a2a.proto, both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from a2a_trio.protocol import models
from a2a_trio.protocol.errors import InvalidParamsError
from a2a_trio.protocol.proto import a2a_pb2
from a2a_trio.protocol.protobuf import (
    MODELS,
    decode_message,
    from_proto,
    proto_class,
    to_proto,
)
from a2a_trio.server.mount import Empty

MESSAGES = sorted(
    name
    for name, descriptor in a2a_pb2.DESCRIPTOR.message_types_by_name.items()
    if not descriptor.GetOptions().map_entry
)


def _sample_scalar(field: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_STRING:
        return f"{field.name}-value"
    if field.type == FieldDescriptor.TYPE_BYTES:
        return b"\x00\xffbytes"
    if field.type == FieldDescriptor.TYPE_BOOL:
        return True
    if field.type == FieldDescriptor.TYPE_ENUM:
        return 1
    return 7  # int32: within every model's bounds (page sizes, history lengths)


def _fill(message: Message, depth: int = 0) -> Message:
    """Set every field of ``message``, the first member of each oneof."""
    descriptor = message.DESCRIPTOR
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and not oneof.name.startswith("_") and oneof.fields[0] is not field:
            continue
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            value = _sample_scalar(field)
            if field.is_repeated:
                getattr(message, field.name).extend([value, value])
            else:
                setattr(message, field.name, value)
            continue
        message_type = field.message_type
        assert message_type is not None
        type_name = message_type.full_name
        if message_type.GetOptions().map_entry:
            value_field = message_type.fields_by_name["value"]
            target = getattr(message, field.name)
            if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                _fill(target["key-one"], depth + 1)
            else:
                target["key-one"] = _sample_scalar(value_field)
        elif type_name == "google.protobuf.Timestamp":
            getattr(message, field.name).FromDatetime(datetime(2026, 1, 2, 3, 4, 5, 678000))
        elif type_name == "google.protobuf.Struct":
            getattr(message, field.name).update({"k": "v", "n": 3, "list": [1, "two", None]})
        elif type_name == "google.protobuf.Value":
            getattr(message, field.name).string_value = "a value"
        elif field.is_repeated:
            _fill(getattr(message, field.name).add(), depth + 1)
        elif depth < 6:
            _fill(getattr(message, field.name), depth + 1)
    return message


def test_every_message_of_a2a_proto_has_its_model() -> None:
    assert set(MESSAGES) <= set(MODELS)


@pytest.mark.parametrize("name", MESSAGES)
def test_a_full_message_survives_the_model_and_back(name: str) -> None:
    sent = _fill(proto_class(name)())
    model = from_proto(sent, MODELS[name])
    assert to_proto(model) == sent


@pytest.mark.parametrize("name", MESSAGES)
def test_a_model_survives_protobuf_and_back(name: str) -> None:
    model = from_proto(_fill(proto_class(name)()), MODELS[name])
    assert from_proto(to_proto(model), MODELS[name]) == model


def test_unset_scalars_stay_unset_as_on_the_json_bindings() -> None:
    message = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER)
    message.parts.add(text="hi")
    model = from_proto(message, models.Message)
    assert model.context_id is None and model.task_id is None and model.extensions is None


def test_required_fields_keep_their_proto3_defaults() -> None:
    model = from_proto(a2a_pb2.ListTasksResponse(), models.ListTasksResponse)
    assert model == models.ListTasksResponse(
        tasks=[], next_page_token="", page_size=0, total_size=0
    )


def test_an_explicit_zero_is_kept_where_the_field_has_presence() -> None:
    request = from_proto(a2a_pb2.GetTaskRequest(id="t", history_length=0), models.GetTaskRequest)
    assert request.history_length == 0


def test_a_message_without_role_is_refused_by_the_model() -> None:
    message = a2a_pb2.Message(message_id="m")
    message.parts.add(text="hi")
    with pytest.raises(ValidationError, match="role"):
        from_proto(message, models.Message)


def test_integral_numbers_in_metadata_come_back_as_integers() -> None:
    task = from_proto(
        _fill(a2a_pb2.Task()), models.Task
    )  # metadata {"n": 3} travels as the double 3.0
    assert task.metadata is not None and task.metadata["n"] == 3
    assert isinstance(task.metadata["n"], int)


def test_empty_is_google_protobuf_empty() -> None:
    assert to_proto(Empty()).SerializeToString() == b""


def test_bytes_that_are_not_the_message_are_invalid_params() -> None:
    with pytest.raises(InvalidParamsError, match="GetTaskRequest"):
        decode_message(b"\xff\xff\xff", "GetTaskRequest")


def test_a_task_round_trips_through_the_wire_bytes() -> None:
    task = models.Task.model_validate(
        {
            "id": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-24T10:00:00.125Z"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": None}, {"raw": "AAE="}]}],
        }
    )
    data = to_proto(task).SerializeToString()
    assert from_proto(decode_message(data, "Task"), models.Task) == task


# --- properties -------------------------------------------------------------------

_json_scalars = st.none() | st.booleans() | st.text(max_size=20) | st.integers(-(2**53), 2**53)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
_ids = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=30
)
_parts = st.one_of(
    st.builds(lambda text: {"text": text}, st.text(max_size=50)),
    st.builds(lambda raw: {"raw": raw}, st.binary(max_size=30)),
    st.builds(lambda url: {"url": url, "mediaType": "text/plain"}, _ids),
    st.builds(lambda data: {"data": data}, _json),
)
_messages = st.fixed_dictionaries(
    {
        "messageId": _ids,
        "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT"]),
        "parts": st.lists(_parts, min_size=1, max_size=4),
    },
    optional={
        "contextId": _ids,
        "taskId": _ids,
        "metadata": st.dictionaries(st.text(max_size=8), _json, max_size=3),
        "extensions": st.lists(_ids, min_size=1, max_size=2),
    },
)
_timestamps = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2999, 1, 1), timezones=st.just(UTC)
).map(lambda value: value.replace(microsecond=value.microsecond // 1000 * 1000))


@settings(max_examples=60, deadline=None)
@given(_messages)
def test_any_message_round_trips(wire: dict[str, Any]) -> None:
    message = models.Message.model_validate(wire)
    assert from_proto(to_proto(message), models.Message) == message


@settings(max_examples=40, deadline=None)
@given(
    _ids,
    st.sampled_from([state.value for state in models.TaskState][1:]),
    _timestamps,
    st.lists(_messages, max_size=3),
)
def test_any_task_round_trips(
    task_id: str, state: str, when: datetime, history: list[dict[str, Any]]
) -> None:
    task = models.Task.model_validate(
        {
            "id": task_id,
            "status": {"state": state, "timestamp": when},
            "history": history or None,
        }
    )
    assert from_proto(to_proto(task), models.Task) == task


@settings(max_examples=200, deadline=None)
@given(
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=11))]
        ),
    )
)
def test_a_timestamp_is_protobufs_own_to_the_millisecond(when: datetime) -> None:
    status = models.TaskStatus.model_validate({"state": "TASK_STATE_WORKING", "timestamp": when})
    expected = Timestamp()
    expected.FromDatetime(when.replace(microsecond=when.microsecond // 1000 * 1000))
    proto: Any = to_proto(status)
    stamp = proto.timestamp
    assert (stamp.seconds, stamp.nanos) == (expected.seconds, expected.nanos)

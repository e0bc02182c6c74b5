"""The wire models speak ProtoJSON (spec 5.5, 5.6 and a2a.proto), with no I/O involved.

camelCase out and either spelling in, unset fields left out, enums by name,
timestamps as UTC with a literal ``Z``, bytes as base64, unknown fields ignored.
"""

from __future__ import annotations

import base64
import copy
import inspect
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from a2a_trio.protocol import ProtoModel, format_timestamp, models, stream_response
from a2a_trio.protocol.models import (
    AgentCard,
    Artifact,
    Message,
    Part,
    Role,
    SecurityScheme,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

# --- fully populated wire objects --------------------------------------------------

USER_MESSAGE: dict[str, Any] = {
    "messageId": "msg-user-1",
    "contextId": "ctx-1",
    "taskId": "task-1",
    "role": "ROLE_USER",
    "parts": [{"text": "Hello", "mediaType": "text/plain", "metadata": {"lang": "en"}}],
    "metadata": {"source": "tests"},
    "extensions": ["https://example.com/ext/citations/v1"],
    "referenceTaskIds": ["task-0"],
}

AGENT_MESSAGE: dict[str, Any] = {
    "messageId": "msg-agent-1",
    "contextId": "ctx-1",
    "taskId": "task-1",
    "role": "ROLE_AGENT",
    "parts": [{"text": "What is your name?"}],
}

ARTIFACT: dict[str, Any] = {
    "artifactId": "artifact-1",
    "name": "report",
    "description": "Everything a part can hold.",
    "parts": [
        {"text": "plain words", "mediaType": "text/plain"},
        {"raw": "aGVsbG8=", "filename": "hello.bin", "mediaType": "application/octet-stream"},
        {"url": "https://files.example.com/report.pdf", "filename": "report.pdf"},
        {"data": {"key": "value", "count": 42}, "mediaType": "application/json"},
    ],
    "metadata": {"origin": "generator"},
    "extensions": ["https://example.com/ext/citations/v1"],
}

FULL_TASK: dict[str, Any] = {
    "id": "task-1",
    "contextId": "ctx-1",
    "status": {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "message": AGENT_MESSAGE,
        "timestamp": "2025-10-28T10:30:00.000Z",
    },
    "artifacts": [ARTIFACT],
    "history": [USER_MESSAGE, AGENT_MESSAGE],
    "metadata": {"priority": "high", "nested": {"depth": 2}},
}

STATUS_UPDATE: dict[str, Any] = {
    "taskId": "task-1",
    "contextId": "ctx-1",
    "status": {"state": "TASK_STATE_WORKING", "timestamp": "2025-10-28T10:30:01.250Z"},
    "metadata": {"step": 1},
}

ARTIFACT_UPDATE: dict[str, Any] = {
    "taskId": "task-1",
    "contextId": "ctx-1",
    "artifact": ARTIFACT,
    "append": True,
    "lastChunk": False,
    "metadata": {"chunk": 3},
}

PUSH_CONFIG: dict[str, Any] = {
    "tenant": "acme",
    "id": "push-1",
    "taskId": "task-1",
    "url": "https://hooks.example.com/a2a",
    "token": "opaque-token",
    "authentication": {"scheme": "Bearer", "credentials": "secret"},
}

FULL_CARD: dict[str, Any] = {
    "name": "Full Agent",
    "description": "A card with every field set.",
    "supportedInterfaces": [
        {
            "url": "https://agent.example.com/a2a/jsonrpc",
            "protocolBinding": "JSONRPC",
            "tenant": "acme",
            "protocolVersion": "1.0",
        },
        {
            "url": "https://agent.example.com/a2a/rest",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
    ],
    "provider": {"url": "https://example.com", "organization": "Example Org"},
    "version": "2.1.0",
    "documentationUrl": "https://agent.example.com/docs",
    "capabilities": {
        "streaming": True,
        "pushNotifications": False,
        "extensions": [
            {
                "uri": "https://example.com/ext/citations/v1",
                "description": "Cites its sources.",
                "required": False,
                "params": {"style": "apa"},
            }
        ],
        "extendedAgentCard": True,
    },
    "securitySchemes": {
        "apiKey": {
            "apiKeySecurityScheme": {
                "description": "A key in a header.",
                "location": "header",
                "name": "X-API-Key",
            }
        },
        "bearer": {
            "httpAuthSecurityScheme": {
                "description": "A JWT.",
                "scheme": "Bearer",
                "bearerFormat": "JWT",
            }
        },
        "oauth": {
            "oauth2SecurityScheme": {
                "description": "Sign in with Example.",
                "flows": {
                    "authorizationCode": {
                        "authorizationUrl": "https://auth.example.com/authorize",
                        "tokenUrl": "https://auth.example.com/token",
                        "refreshUrl": "https://auth.example.com/refresh",
                        "scopes": {"tasks:read": "Read tasks", "tasks:write": "Write tasks"},
                        "pkceRequired": True,
                    }
                },
                "oauth2MetadataUrl": "https://auth.example.com/.well-known/oauth-authorization-server",
            }
        },
        "machines": {
            "oauth2SecurityScheme": {
                "flows": {
                    "clientCredentials": {
                        "tokenUrl": "https://auth.example.com/token",
                        "refreshUrl": "https://auth.example.com/refresh",
                        "scopes": {"tasks:read": "Read tasks"},
                    }
                }
            }
        },
        "devices": {
            "oauth2SecurityScheme": {
                "flows": {
                    "deviceCode": {
                        "deviceAuthorizationUrl": "https://auth.example.com/device",
                        "tokenUrl": "https://auth.example.com/token",
                        "refreshUrl": "https://auth.example.com/refresh",
                        "scopes": {"tasks:read": "Read tasks"},
                    }
                }
            }
        },
        "legacyImplicit": {
            "oauth2SecurityScheme": {
                "flows": {
                    "implicit": {
                        "authorizationUrl": "https://auth.example.com/authorize",
                        "refreshUrl": "https://auth.example.com/refresh",
                        "scopes": {"tasks:read": "Read tasks"},
                    }
                }
            }
        },
        "legacyPassword": {
            "oauth2SecurityScheme": {
                "flows": {
                    "password": {
                        "tokenUrl": "https://auth.example.com/token",
                        "refreshUrl": "https://auth.example.com/refresh",
                        "scopes": {"tasks:read": "Read tasks"},
                    }
                }
            }
        },
        "oidc": {
            "openIdConnectSecurityScheme": {
                "description": "OpenID Connect.",
                "openIdConnectUrl": "https://auth.example.com/.well-known/openid-configuration",
            }
        },
        "mtls": {"mtlsSecurityScheme": {"description": "Client certificates."}},
    },
    "securityRequirements": [
        {"schemes": {"oauth": {"list": ["tasks:read", "tasks:write"]}}},
        {"schemes": {"apiKey": {"list": []}, "mtls": {"list": []}}},
    ],
    "defaultInputModes": ["text/plain", "application/json"],
    "defaultOutputModes": ["text/plain"],
    "skills": [
        {
            "id": "summarise",
            "name": "Summarise",
            "description": "Summarises a document.",
            "tags": ["text", "summary"],
            "examples": ["Summarise this report"],
            "inputModes": ["text/plain", "application/pdf"],
            "outputModes": ["text/plain"],
            "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        }
    ],
    "signatures": [
        {"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2lnbmF0dXJl", "header": {"kid": "k1"}}
    ],
    "iconUrl": "https://agent.example.com/icon.png",
}

SNAKE_CASE_KEY = re.compile(r"^[a-z]+(_[a-z]+)+$")


def all_keys(value: Any) -> list[str]:
    """Every object key anywhere in a decoded JSON value."""
    if isinstance(value, dict):
        return [key for k, v in value.items() for key in (k, *all_keys(v))]
    if isinstance(value, list):
        return [key for item in value for key in all_keys(item)]
    return []


def proto_json_name(field: str) -> str:
    """protoc's lowerCamelCase JSON name of a proto field."""
    head, *rest = field.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def text_message(**fields: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    message.update(fields)
    return message


# --- field names ---------------------------------------------------------------------


WIRE_MODELS = [
    cls
    for _, cls in inspect.getmembers(models, inspect.isclass)
    if issubclass(cls, ProtoModel) and cls is not ProtoModel
]


@pytest.mark.parametrize("model", WIRE_MODELS, ids=lambda cls: cls.__name__)
def test_every_field_is_named_on_the_wire_by_its_proto_json_name(model: type[ProtoModel]) -> None:
    expected = {
        name: "list"
        if (model.__name__, name) == ("StringList", "values")
        else proto_json_name(name)
        for name in model.model_fields
    }
    actual = {name: field.alias or name for name, field in model.model_fields.items()}
    assert actual == expected


def test_output_uses_camel_case_names() -> None:
    message = Message(
        message_id="m-1",
        context_id="ctx-1",
        role=Role.USER,
        parts=[Part(text="hi", media_type="text/plain")],
        reference_task_ids=["t-0"],
    )
    assert message.to_wire() == {
        "messageId": "m-1",
        "contextId": "ctx-1",
        "role": "ROLE_USER",
        "parts": [{"text": "hi", "mediaType": "text/plain"}],
        "referenceTaskIds": ["t-0"],
    }


def test_snake_case_names_are_accepted_on_input() -> None:
    message = Message.from_wire(
        {
            "message_id": "m-1",
            "context_id": "ctx-1",
            "task_id": "task-1",
            "role": "ROLE_USER",
            "parts": [{"text": "hi", "media_type": "text/plain"}],
            "reference_task_ids": ["t-0"],
        }
    )
    assert message.to_wire() == {
        "messageId": "m-1",
        "contextId": "ctx-1",
        "taskId": "task-1",
        "role": "ROLE_USER",
        "parts": [{"text": "hi", "mediaType": "text/plain"}],
        "referenceTaskIds": ["t-0"],
    }


def test_snake_case_names_are_accepted_in_nested_card_objects() -> None:
    card = AgentCard.from_wire(
        {
            "name": "A",
            "description": "B",
            "version": "1",
            "supported_interfaces": [
                {"url": "http://h", "protocol_binding": "JSONRPC", "protocol_version": "1.0"}
            ],
            "capabilities": {"push_notifications": True, "extended_agent_card": False},
            "security_schemes": {
                "key": {"api_key_security_scheme": {"location": "query", "name": "k"}}
            },
            "default_input_modes": ["text/plain"],
            "default_output_modes": ["text/plain"],
            "skills": [],
        }
    )
    wire = card.to_wire()
    assert wire["supportedInterfaces"] == [
        {"url": "http://h", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert wire["capabilities"] == {"pushNotifications": True, "extendedAgentCard": False}
    assert wire["securitySchemes"] == {
        "key": {"apiKeySecurityScheme": {"location": "query", "name": "k"}}
    }


@pytest.mark.parametrize(
    ("model", "document"),
    [
        (Task, FULL_TASK),
        (Message, USER_MESSAGE),
        (AgentCard, FULL_CARD),
        (TaskStatusUpdateEvent, STATUS_UPDATE),
        (TaskArtifactUpdateEvent, ARTIFACT_UPDATE),
        (TaskPushNotificationConfig, PUSH_CONFIG),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else "",
)
def test_no_key_of_a_fully_populated_object_is_snake_case(
    model: type[ProtoModel], document: dict[str, Any]
) -> None:
    keys = set(all_keys(model.from_wire(document).to_wire()))
    assert keys >= set(all_keys(document))  # every field made it out, so every key was looked at
    assert sorted(key for key in keys if SNAKE_CASE_KEY.match(key)) == []


# --- unset fields --------------------------------------------------------------------


def test_unset_fields_are_omitted_from_the_wire_form() -> None:
    task = Task(id="t-1", status=TaskStatus(state=TaskState.SUBMITTED))
    assert task.to_wire() == {"id": "t-1", "status": {"state": "TASK_STATE_SUBMITTED"}}


def test_unset_fields_are_omitted_from_the_json_text() -> None:
    task = Task(id="t-1", status=TaskStatus(state=TaskState.SUBMITTED))
    assert json.loads(task.to_json()) == {"id": "t-1", "status": {"state": "TASK_STATE_SUBMITTED"}}


def test_json_text_and_wire_form_agree_on_a_full_task() -> None:
    task = Task.from_wire(FULL_TASK)
    assert json.loads(task.to_json()) == task.to_wire()


def test_false_and_zero_like_values_that_were_set_are_kept() -> None:
    event = TaskArtifactUpdateEvent.from_wire(
        {
            "taskId": "t",
            "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": ""}]},
            "append": False,
            "lastChunk": False,
        }
    )
    wire = event.to_wire()
    assert wire["append"] is False
    assert wire["lastChunk"] is False
    assert wire["artifact"]["parts"] == [{"text": ""}]


def test_null_values_inside_metadata_are_kept() -> None:
    message = Message.from_wire(text_message(metadata={"cleared": None, "kept": 1}))
    assert message.to_wire()["metadata"] == {"cleared": None, "kept": 1}


# --- enums ---------------------------------------------------------------------------

TASK_STATE_NAMES = [
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
]


@pytest.mark.parametrize(("number", "name"), list(enumerate(TASK_STATE_NAMES)))
def test_task_state_numbers_follow_the_proto(number: int, name: str) -> None:
    assert TaskState.parse(number) is TaskState(name)


@pytest.mark.parametrize("name", TASK_STATE_NAMES)
def test_task_state_is_serialised_by_its_proto_name(name: str) -> None:
    status = TaskStatus.from_wire({"state": name})
    assert status.to_wire() == {"state": name}


@pytest.mark.parametrize(
    ("spelling", "state"),
    [
        ("submitted", TaskState.SUBMITTED),
        ("working", TaskState.WORKING),
        ("completed", TaskState.COMPLETED),
        ("failed", TaskState.FAILED),
        ("canceled", TaskState.CANCELED),
        ("input-required", TaskState.INPUT_REQUIRED),
        ("rejected", TaskState.REJECTED),
        ("auth-required", TaskState.AUTH_REQUIRED),
        ("input_required", TaskState.INPUT_REQUIRED),
        ("WORKING", TaskState.WORKING),
    ],
)
def test_task_state_is_parsed_from_short_forms(spelling: str, state: TaskState) -> None:
    assert TaskStatus.from_wire({"state": spelling}).state is state


@pytest.mark.parametrize("value", ["done", "TASK_STATE_DONE", 9, -1, True, None, 2.0])
def test_an_unknown_task_state_is_rejected(value: Any) -> None:
    with pytest.raises(ValidationError):
        TaskStatus.from_wire({"state": value})


def test_task_state_parsed_from_a_number_is_serialised_by_name() -> None:
    assert TaskStatus.from_wire({"state": 6}).to_wire() == {"state": "TASK_STATE_INPUT_REQUIRED"}


@pytest.mark.parametrize(
    ("spelling", "role"),
    [
        ("ROLE_USER", Role.USER),
        ("ROLE_AGENT", Role.AGENT),
        (1, Role.USER),
        (2, Role.AGENT),
        ("user", Role.USER),
        ("agent", Role.AGENT),
    ],
)
def test_role_is_parsed_from_name_number_or_short_form(spelling: Any, role: Role) -> None:
    assert Message.from_wire(text_message(role=spelling)).role is role


def test_role_is_serialised_by_its_proto_name() -> None:
    assert Message.from_wire(text_message(role=2)).to_wire()["role"] == "ROLE_AGENT"


@pytest.mark.parametrize("role", ["ROLE_UNSPECIFIED", 0, "unspecified"])
def test_message_with_unspecified_role_is_rejected(role: Any) -> None:
    with pytest.raises(ValidationError, match="role must be ROLE_USER or ROLE_AGENT"):
        Message.from_wire(text_message(role=role))


@pytest.mark.parametrize("role", ["ROLE_SYSTEM", 3, "system"])
def test_message_with_unknown_role_is_rejected(role: Any) -> None:
    with pytest.raises(ValidationError):
        Message.from_wire(text_message(role=role))


def test_message_without_role_is_rejected() -> None:
    document = text_message()
    del document["role"]
    with pytest.raises(ValidationError):
        Message.from_wire(document)


# --- timestamps ----------------------------------------------------------------------

WIRE_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        ("2025-10-28T10:30:00Z", "2025-10-28T10:30:00.000Z"),
        ("2025-10-28T10:30:00.000Z", "2025-10-28T10:30:00.000Z"),
        ("2025-10-28T10:30:00.142Z", "2025-10-28T10:30:00.142Z"),
        ("2025-10-28T10:30:00.142857Z", "2025-10-28T10:30:00.142Z"),
        ("2025-10-28T10:30:00.123456789Z", "2025-10-28T10:30:00.123Z"),
        ("2025-10-28T10:30:00.5z", "2025-10-28T10:30:00.500Z"),
        ("2025-10-28T12:30:00+02:00", "2025-10-28T10:30:00.000Z"),
        ("2025-10-28T01:15:00.250-05:00", "2025-10-28T06:15:00.250Z"),
        ("2025-10-28T23:30:00-01:00", "2025-10-29T00:30:00.000Z"),
        ("2025-10-28T10:30:00+00:00", "2025-10-28T10:30:00.000Z"),
        ("2025-10-28T10:30:00", "2025-10-28T10:30:00.000Z"),
    ],
)
def test_timestamps_are_shown_in_utc_with_milliseconds(sent: str, shown: str) -> None:
    status = TaskStatus.from_wire({"state": "TASK_STATE_WORKING", "timestamp": sent})
    assert status.to_wire()["timestamp"] == shown
    assert WIRE_TIMESTAMP.match(shown)


def test_aware_datetimes_set_in_python_are_shown_in_utc() -> None:
    tokyo = timezone(timedelta(hours=9))
    status = TaskStatus(
        state=TaskState.WORKING, timestamp=datetime(2025, 10, 28, 19, 30, 0, 7000, tokyo)
    )
    assert status.to_wire()["timestamp"] == "2025-10-28T10:30:00.007Z"


def test_parsed_timestamps_are_utc_datetimes() -> None:
    status = TaskStatus.from_wire(
        {"state": "TASK_STATE_WORKING", "timestamp": "2025-10-28T12:30:00+02:00"}
    )
    assert status.timestamp == datetime(2025, 10, 28, 10, 30, tzinfo=UTC)
    assert status.timestamp is not None and status.timestamp.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", ["yesterday", "2025-13-01T00:00:00Z", "", 1730111400])
def test_a_malformed_timestamp_is_rejected(value: Any) -> None:
    with pytest.raises(ValidationError):
        TaskStatus.from_wire({"state": "TASK_STATE_WORKING", "timestamp": value})


def test_timestamps_before_year_1000_keep_four_year_digits() -> None:
    assert format_timestamp(datetime(999, 1, 2, tzinfo=UTC)) == "0999-01-02T00:00:00.000Z"


# --- bytes ---------------------------------------------------------------------------


def test_raw_bytes_are_read_from_standard_base64() -> None:
    assert Part.from_wire({"raw": "aGVsbG8="}).raw == b"hello"


def test_raw_bytes_are_written_as_padded_standard_base64() -> None:
    payload = bytes([0xFB, 0xFF, 0xBF, 0x00])
    assert Part(raw=payload).to_wire() == {"raw": base64.b64encode(payload).decode()}
    assert Part(raw=payload).to_wire() == {"raw": "+/+/AA=="}


def test_raw_bytes_are_read_from_url_safe_base64() -> None:
    assert Part.from_wire({"raw": "-_-_AA=="}).raw == bytes([0xFB, 0xFF, 0xBF, 0x00])


def test_raw_bytes_are_read_from_unpadded_base64() -> None:
    assert Part.from_wire({"raw": "-_-_AA"}).raw == bytes([0xFB, 0xFF, 0xBF, 0x00])
    assert Part.from_wire({"raw": "aGVsbG8"}).raw == b"hello"


def test_raw_bytes_round_trip_through_json_text() -> None:
    payload = bytes(range(256))
    part = Part(raw=payload)
    assert Part.from_wire(json.loads(part.to_json())).raw == payload


@pytest.mark.parametrize("value", ["not base64!", "aGVsbG8=!", 42, ["aA=="]])
def test_raw_that_is_not_base64_is_rejected(value: Any) -> None:
    with pytest.raises(ValidationError):
        Part.from_wire({"raw": value})


# --- parts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        {"text": "hello"},
        {"raw": "aGVsbG8="},
        {"url": "https://files.example.com/a.pdf"},
        {"data": {"key": "value"}},
        {"data": [1, "two", {"three": 3}]},
        {"data": "a bare string"},
        {"data": 42},
        {"data": False},
    ],
)
def test_a_part_with_one_kind_of_content_round_trips(content: dict[str, Any]) -> None:
    document = {**content, "filename": "f", "mediaType": "x/y", "metadata": {"k": "v"}}
    assert Part.from_wire(document).to_wire() == document


def test_a_part_without_content_is_rejected() -> None:
    with pytest.raises(ValidationError, match="exactly one of text, raw, url or data"):
        Part.from_wire({"mediaType": "text/plain", "filename": "a.txt"})


@pytest.mark.parametrize(
    "content",
    [
        {"text": "a", "url": "https://x"},
        {"text": "a", "raw": "aGk="},
        {"raw": "aGk=", "data": {}},
        {"url": "https://x", "data": [1]},
        {"text": "a", "raw": "aGk=", "url": "https://x", "data": 1},
    ],
)
def test_a_part_with_two_kinds_of_content_is_rejected(content: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="exactly one of text, raw, url or data"):
        Part.from_wire(content)


def test_a_part_whose_data_is_json_null_keeps_its_data_on_the_wire() -> None:
    part = Part.from_wire({"data": None})
    assert part.to_wire() == {"data": None}


def test_a_message_needs_at_least_one_part() -> None:
    with pytest.raises(ValidationError):
        Message.from_wire(text_message(parts=[]))


def test_an_artifact_needs_at_least_one_part() -> None:
    with pytest.raises(ValidationError):
        Artifact.from_wire({"artifactId": "a", "parts": []})


def test_a_message_needs_a_message_id() -> None:
    with pytest.raises(ValidationError):
        Message.from_wire(text_message(messageId=""))


# --- unknown fields ------------------------------------------------------------------


def test_unknown_fields_are_ignored_at_every_level_and_not_echoed() -> None:
    document = copy.deepcopy(FULL_TASK)
    document["tckUnknownField"] = "task"
    document["status"]["tckUnknownField"] = "status"
    document["status"]["message"]["tckUnknownField"] = "status message"
    document["artifacts"][0]["tckUnknownField"] = "artifact"
    document["artifacts"][0]["parts"][0]["tckUnknownField"] = "part"
    document["history"][0]["tckUnknownField"] = "history message"
    document["history"][0]["parts"][0]["kind"] = "text"
    assert Task.from_wire(document).to_wire() == FULL_TASK


def test_unknown_request_parameters_are_ignored() -> None:
    request = SendMessageRequest.from_wire(
        {
            "message": {**text_message(), "tckUnknownField": "should-be-ignored"},
            "configuration": {"historyLength": 1, "tckUnknownOption": True},
            "tckExtraParam": 42,
        }
    )
    assert request.to_wire() == {"message": text_message(), "configuration": {"historyLength": 1}}


def test_unknown_fields_in_a_card_are_not_echoed() -> None:
    document = copy.deepcopy(FULL_CARD)
    document["url"] = "https://agent.example.com"  # an A2A 0.3 field
    document["capabilities"]["stateTransitionHistory"] = True
    document["securitySchemes"]["mtls"]["mtlsSecurityScheme"]["extra"] = 1
    assert AgentCard.from_wire(document).to_wire() == FULL_CARD


# --- oneofs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "event"),
    [
        ("task", FULL_TASK),
        ("message", AGENT_MESSAGE),
        ("statusUpdate", STATUS_UPDATE),
        ("artifactUpdate", ARTIFACT_UPDATE),
    ],
)
def test_a_stream_response_with_one_member_round_trips(member: str, event: dict[str, Any]) -> None:
    assert StreamResponse.from_wire({member: event}).to_wire() == {member: event}


def test_a_stream_response_without_a_member_is_rejected() -> None:
    with pytest.raises(ValidationError, match="exactly one of task, message"):
        StreamResponse.from_wire({})


def test_a_stream_response_with_two_members_is_rejected() -> None:
    with pytest.raises(ValidationError, match="exactly one of task, message"):
        StreamResponse.from_wire({"task": FULL_TASK, "statusUpdate": STATUS_UPDATE})


@pytest.mark.parametrize(
    ("model", "member"),
    [
        (Task, "task"),
        (Message, "message"),
        (TaskStatusUpdateEvent, "statusUpdate"),
        (TaskArtifactUpdateEvent, "artifactUpdate"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else value,
)
def test_stream_response_wraps_each_event_in_its_own_member(
    model: type[ProtoModel], member: str
) -> None:
    document = {
        Task: FULL_TASK,
        Message: AGENT_MESSAGE,
        TaskStatusUpdateEvent: STATUS_UPDATE,
        TaskArtifactUpdateEvent: ARTIFACT_UPDATE,
    }[model]
    event = model.from_wire(document)
    wrapped = stream_response(event)  # type: ignore[arg-type]
    assert wrapped.to_wire() == {member: document}
    assert wrapped.payload == event


@pytest.mark.parametrize("name", sorted(FULL_CARD["securitySchemes"]))
def test_a_security_scheme_with_one_kind_round_trips(name: str) -> None:
    document = FULL_CARD["securitySchemes"][name]
    assert SecurityScheme.from_wire(document).to_wire() == document


def test_a_security_scheme_without_a_kind_is_rejected() -> None:
    with pytest.raises(ValidationError, match="exactly one scheme kind"):
        SecurityScheme.from_wire({})


def test_a_security_scheme_with_two_kinds_is_rejected() -> None:
    with pytest.raises(ValidationError, match="exactly one scheme kind"):
        SecurityScheme.from_wire(
            {
                "httpAuthSecurityScheme": {"scheme": "Bearer"},
                "mtlsSecurityScheme": {},
            }
        )


# --- agent card ----------------------------------------------------------------------


def test_a_full_agent_card_round_trips_unchanged() -> None:
    assert AgentCard.from_wire(FULL_CARD).to_wire() == FULL_CARD


def test_a_full_agent_card_round_trips_through_json_text() -> None:
    card = AgentCard.from_wire(FULL_CARD)
    assert AgentCard.from_wire(json.loads(card.to_json())) == card


def test_security_requirement_scopes_are_carried_in_a_list_member() -> None:
    card = AgentCard.from_wire(FULL_CARD)
    assert card.security_requirements is not None
    assert card.security_requirements[0].schemes["oauth"].values == ["tasks:read", "tasks:write"]


def test_oauth_flows_are_read_into_their_own_models() -> None:
    card = AgentCard.from_wire(FULL_CARD)
    assert card.security_schemes is not None
    oauth = card.security_schemes["oauth"].oauth2_security_scheme
    assert oauth is not None and oauth.flows.authorization_code is not None
    assert oauth.flows.authorization_code.pkce_required is True
    assert oauth.flows.authorization_code.scopes == {
        "tasks:read": "Read tasks",
        "tasks:write": "Write tasks",
    }


@pytest.mark.parametrize(
    "missing",
    ["name", "description", "version", "defaultInputModes", "defaultOutputModes", "skills"],
)
def test_a_card_without_a_required_field_is_rejected(missing: str) -> None:
    document = copy.deepcopy(FULL_CARD)
    del document[missing]
    with pytest.raises(ValidationError):
        AgentCard.from_wire(document)


def test_an_interface_needs_its_protocol_version() -> None:
    document = copy.deepcopy(FULL_CARD)
    del document["supportedInterfaces"][0]["protocolVersion"]
    with pytest.raises(ValidationError):
        AgentCard.from_wire(document)

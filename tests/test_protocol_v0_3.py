"""Protocol 0.3 as conversions to and from the 1.0 models, with no I/O involved.

Every 0.3 object converts both ways (1.0 → 0.3 → 1.0 is the identity), the
requests real 0.3 clients send read into the 1.0 requests of the same
operation, and what we write is checked against a2a-sdk's own 0.3 models
(the JSON schema's pydantic models and the 0.3 proto) as the oracle.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb_v03
from a2a.compat.v0_3 import types as types_v03
from google.protobuf import json_format

from a2a_trio.protocol import (
    InvalidParamsError,
    JsonRpcCall,
    MethodNotAllowedError,
    MethodNotFoundError,
    Operation,
    TaskNotFoundError,
    VersionNotSupportedError,
)
from a2a_trio.protocol.compat_v0_3 import (
    card_for_both,
    error_to_v0_3,
    event_from_v0_3,
    event_to_v0_3,
    jsonrpc_version,
    parse_rest_v0_3,
    push_config_list_to_proto,
    push_config_list_to_v0_3,
    push_config_to_proto,
    push_config_to_v0_3,
    resolve_v0_3_method,
    rest_error_to_v0_3,
    rest_version,
    says_v0_3,
    send_result_to_proto,
    send_result_to_v0_3,
    stream_response_to_proto,
    task_to_proto,
    task_to_v0_3,
)
from a2a_trio.protocol.compat_v0_3.readers import TaskPushNotificationConfigV03
from a2a_trio.protocol.limits import Limits
from a2a_trio.protocol.models import (
    AgentCard,
    Artifact,
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    Message,
    Part,
    Role,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

WHEN = datetime(2025, 10, 28, 10, 30, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\n\x00binary"


def rich_message(role: Role = Role.AGENT) -> Message:
    return Message(
        message_id="m-1",
        context_id="ctx-1",
        task_id="task-1",
        role=role,
        parts=[
            Part(text="hello", metadata={"lang": "en"}),
            Part(raw=PNG, media_type="image/png", filename="pic.png"),
            Part(url="https://example.com/a.pdf", media_type="application/pdf"),
            Part(data={"rows": [1, 2]}),
            Part(data=[1, "two"]),
            Part(data=None),
        ],
        metadata={"trace": "t-1"},
        extensions=["https://example.com/ext/v1"],
        reference_task_ids=["task-0"],
    )


def rich_task(state: TaskState = TaskState.INPUT_REQUIRED) -> Task:
    return Task(
        id="task-1",
        context_id="ctx-1",
        status=TaskStatus(state=state, message=rich_message(), timestamp=WHEN),
        artifacts=[
            Artifact(
                artifact_id="a-1",
                name="joke",
                description="a joke",
                parts=[Part(text="why")],
                metadata={"k": 1},
                extensions=["https://example.com/ext/v1"],
            )
        ],
        history=[rich_message(Role.USER)],
        metadata={"origin": "test"},
    )


def status_update(state: TaskState) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id="task-1",
        context_id="ctx-1",
        status=TaskStatus(state=state, timestamp=WHEN),
        metadata={"seq": 3},
    )


ARTIFACT_UPDATE = TaskArtifactUpdateEvent(
    task_id="task-1",
    context_id="ctx-1",
    artifact=Artifact(artifact_id="a-1", parts=[Part(text="chunk")]),
    append=True,
    last_chunk=False,
    metadata={"seq": 4},
)

PUSH_CONFIG = TaskPushNotificationConfig(
    id="cfg-1",
    task_id="task-1",
    url="https://client.example.com/webhook",
    token="tok",
    authentication=AuthenticationInfo(scheme="Bearer", credentials="secret"),
)

EVERY_EVENT = [
    StreamResponse(task=rich_task()),
    StreamResponse(message=rich_message()),
    StreamResponse(status_update=status_update(TaskState.WORKING)),
    StreamResponse(artifact_update=ARTIFACT_UPDATE),
]


def jsonrpc(method: str, params: dict[str, Any]) -> JsonRpcCall:
    return JsonRpcCall(id=1, method=method, params=params)


def invalid_params(method: str, params: dict[str, Any]) -> str:
    with pytest.raises(InvalidParamsError) as caught:
        resolve_v0_3_method(jsonrpc(method, params))
    return caught.value.message


# --- JSON-RPC object shapes: both ways on every object ----------------------------


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e.payload).__name__)
def test_every_stream_event_survives_a_round_trip_through_0_3(event: StreamResponse) -> None:
    assert event_from_v0_3(event_to_v0_3(event)) == event


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e.payload).__name__)
def test_every_stream_event_is_a_valid_0_3_result_for_a2a_sdk(event: StreamResponse) -> None:
    frame = {"jsonrpc": "2.0", "id": 1, "result": event_to_v0_3(event)}
    parsed = types_v03.SendStreamingMessageSuccessResponse.model_validate(frame)
    assert parsed.result.kind == event_to_v0_3(event)["kind"]


@pytest.mark.parametrize("state", list(TaskState))
def test_every_state_survives_a_round_trip(state: TaskState) -> None:
    task = Task(id="t", context_id="c", status=TaskStatus(state=state))
    assert event_from_v0_3(task_to_v0_3(task)) == StreamResponse(task=task)


def test_states_are_the_0_3_schema_strings() -> None:
    written = {state: task_to_v0_3(rich_task(state))["status"]["state"] for state in TaskState}
    assert written == {
        TaskState.UNSPECIFIED: "unknown",
        TaskState.SUBMITTED: "submitted",
        TaskState.WORKING: "working",
        TaskState.COMPLETED: "completed",
        TaskState.FAILED: "failed",
        TaskState.CANCELED: "canceled",
        TaskState.INPUT_REQUIRED: "input-required",
        TaskState.REJECTED: "rejected",
        TaskState.AUTH_REQUIRED: "auth-required",
    }


def test_a_message_carries_kind_lower_case_role_and_kinded_parts() -> None:
    wire = event_to_v0_3(StreamResponse(message=rich_message()))
    assert wire["kind"] == "message"
    assert wire["role"] == "agent"
    assert [part["kind"] for part in wire["parts"]] == [
        "text",
        "file",
        "file",
        "data",
        "data",
        "data",
    ]
    assert wire["referenceTaskIds"] == ["task-0"]


def test_file_bytes_go_as_base64_and_a_uri_as_uri() -> None:
    parts = event_to_v0_3(StreamResponse(message=rich_message()))["parts"]
    assert parts[1]["file"] == {
        "bytes": base64.b64encode(PNG).decode(),
        "mimeType": "image/png",
        "name": "pic.png",
    }
    assert parts[2]["file"] == {"uri": "https://example.com/a.pdf", "mimeType": "application/pdf"}


def test_data_that_is_not_an_object_is_wrapped_the_way_a2a_sdk_wraps_it() -> None:
    parts = event_to_v0_3(StreamResponse(message=rich_message()))["parts"]
    assert parts[4] == {
        "kind": "data",
        "data": {"value": [1, "two"]},
        "metadata": {"data_part_compat": True},
    }


def test_a_status_update_is_final_on_final_and_interrupted_states_only() -> None:
    finals = {
        state: event_to_v0_3(StreamResponse(status_update=status_update(state)))["final"]
        for state in TaskState
    }
    assert {state for state, final in finals.items() if final} == {
        TaskState.COMPLETED,
        TaskState.FAILED,
        TaskState.CANCELED,
        TaskState.REJECTED,
        TaskState.INPUT_REQUIRED,
        TaskState.AUTH_REQUIRED,
    }


def test_a_task_without_context_gets_the_empty_context_0_3_requires() -> None:
    task = Task(id="t", status=TaskStatus(state=TaskState.WORKING))
    wire = task_to_v0_3(task)
    assert wire["contextId"] == ""
    assert event_from_v0_3(wire) == StreamResponse(task=task)


def test_send_result_is_the_task_or_the_direct_message() -> None:
    assert send_result_to_v0_3(SendMessageResponse(task=rich_task()))["kind"] == "task"
    assert send_result_to_v0_3(SendMessageResponse(message=rich_message()))["kind"] == "message"


def test_the_0_3_spec_example_task_reads_as_a_1_0_task() -> None:
    # A2A 0.3 specification, section 9.2 (a2a-tck branch 0.3.x,
    # current_spec/A2A_SPECIFICATION.md): the result of message/send.
    result = {
        "id": "363422be-b0f9-4692-a24d-278670e7c7f1",
        "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
        "status": {"state": "completed"},
        "artifacts": [
            {
                "artifactId": "9b6934dd-37e3-4eb1-8766-962efaab63a1",
                "name": "joke",
                "parts": [
                    {
                        "kind": "text",
                        "text": "Why did the chicken cross the road? To get to the other side!",
                    }
                ],
            }
        ],
        "history": [
            {
                "role": "user",
                "parts": [{"kind": "text", "text": "tell me a joke"}],
                "messageId": "9229e770-767c-417b-a0b0-f0741243c589",
                "taskId": "363422be-b0f9-4692-a24d-278670e7c7f1",
                "contextId": "c295ea44-7543-4f78-b524-7a38915ad6e4",
            }
        ],
        "kind": "task",
        "metadata": {},
    }
    task = event_from_v0_3(result).task
    assert task is not None
    assert task.status.state is TaskState.COMPLETED
    assert task.history is not None and task.history[0].role is Role.USER
    # Written back, it is the example with the kind the example's history
    # message leaves out (the 0.3 schema requires it).
    result["history"][0]["kind"] = "message"  # type: ignore[index]
    assert task_to_v0_3(task) == result


def test_a_push_config_survives_a_round_trip() -> None:
    wire = push_config_to_v0_3(PUSH_CONFIG)
    assert wire == {
        "taskId": "task-1",
        "pushNotificationConfig": {
            "id": "cfg-1",
            "url": "https://client.example.com/webhook",
            "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
        },
    }
    assert TaskPushNotificationConfigV03.model_validate(wire).to_v1() == PUSH_CONFIG
    types_v03.TaskPushNotificationConfig.model_validate(wire)


def test_the_push_config_list_is_a_bare_array() -> None:
    listing = ListTaskPushNotificationConfigsResponse(configs=[PUSH_CONFIG])
    assert push_config_list_to_v0_3(listing) == [push_config_to_v0_3(PUSH_CONFIG)]


# --- JSON-RPC methods: what 0.3 clients send ------------------------------------


def test_every_0_3_method_names_a_1_0_operation() -> None:
    expected = {
        "message/send": Operation.SEND_MESSAGE,
        "message/stream": Operation.SEND_STREAMING_MESSAGE,
        "tasks/get": Operation.GET_TASK,
        "tasks/cancel": Operation.CANCEL_TASK,
        "tasks/resubscribe": Operation.SUBSCRIBE_TO_TASK,
        "tasks/pushNotificationConfig/set": Operation.CREATE_PUSH_CONFIG,
        "tasks/pushNotificationConfig/get": Operation.GET_PUSH_CONFIG,
        "tasks/pushNotificationConfig/list": Operation.LIST_PUSH_CONFIGS,
        "tasks/pushNotificationConfig/delete": Operation.DELETE_PUSH_CONFIG,
        "agent/getAuthenticatedExtendedCard": Operation.GET_EXTENDED_CARD,
    }
    params: dict[str, dict[str, Any]] = {
        "message/send": {"message": {"role": "user", "messageId": "m", "parts": [{"text": "x"}]}},
        "tasks/pushNotificationConfig/set": {
            "taskId": "t",
            "pushNotificationConfig": {"url": "https://x.example"},
        },
        "tasks/pushNotificationConfig/delete": {"id": "t", "pushNotificationConfigId": "c"},
    }
    params["message/stream"] = params["message/send"]
    resolved = {
        method: resolve_v0_3_method(jsonrpc(method, params.get(method, {"id": "t"}))).operation
        for method in expected
    }
    assert resolved == expected


def test_the_0_3_spec_example_message_send_reads_as_a_1_0_request() -> None:
    # A2A 0.3 specification, section 9.2: "Client sends a message using message/send".
    params = {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": "tell me a joke"}],
            "messageId": "9229e770-767c-417b-a0b0-f0741243c589",
        },
        "metadata": {},
    }
    call = resolve_v0_3_method(jsonrpc("message/send", params))
    assert call.request.message == Message(
        message_id="9229e770-767c-417b-a0b0-f0741243c589",
        role=Role.USER,
        parts=[Part(text="tell me a joke")],
    )
    assert call.request.metadata == {}


def test_the_0_3_spec_example_file_upload_reads_its_bytes() -> None:
    # A2A 0.3 specification, section 9.6 (bytes shortened to valid base64).
    params = {
        "message": {
            "role": "user",
            "parts": [
                {"kind": "text", "text": "Analyze this image and highlight any faces."},
                {
                    "kind": "file",
                    "file": {
                        "name": "input_image.png",
                        "mimeType": "image/png",
                        "bytes": "iVBORw0KGgoAAAANSUhEUgAAAAUA",
                    },
                },
            ],
            "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6",
        }
    }
    part = resolve_v0_3_method(jsonrpc("message/send", params)).request.message.parts[1]
    assert part == Part(
        raw=base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAUA"),
        media_type="image/png",
        filename="input_image.png",
    )


def test_the_0_3_spec_example_push_config_in_configuration_is_read() -> None:
    # A2A 0.3 specification, section 9.5 (its comment removed: JSON has none).
    params = {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": "Generate the Q1 sales report."}],
            "messageId": "6dbc13b5-bd57-4c2b-b503-24e381b6c8d6",
        },
        "configuration": {
            "pushNotificationConfig": {
                "url": "https://client.example.com/webhook/a2a-notifications",
                "token": "secure-client-token-for-task-aaa",
                "authentication": {"schemes": ["Bearer"]},
            }
        },
    }
    configuration = resolve_v0_3_method(jsonrpc("message/send", params)).request.configuration
    assert configuration.task_push_notification_config == TaskPushNotificationConfig(
        url="https://client.example.com/webhook/a2a-notifications",
        token="secure-client-token-for-task-aaa",
        authentication=AuthenticationInfo(scheme="Bearer"),
    )


def test_a2a_sdk_0_3_client_message_send_params_read() -> None:
    # What a2a-sdk 0.3.26's JsonRpcTransport.send_message sends:
    # SendMessageRequest(params=MessageSendParams).model_dump(mode="json",
    # exclude_none=True) of a message built by a2a/client/client.py with
    # MessageSendConfiguration(accepted_output_modes, blocking=not polling).
    params = {
        "message": {
            "kind": "message",
            "messageId": "b5a6b0c2",
            "parts": [{"kind": "text", "text": "hi"}],
            "role": "user",
        },
        "configuration": {"acceptedOutputModes": ["text/plain"], "blocking": True},
    }
    request = resolve_v0_3_method(jsonrpc("message/send", params)).request
    assert request.configuration.accepted_output_modes == ["text/plain"]
    assert request.configuration.return_immediately is False


def test_blocking_false_means_return_immediately() -> None:
    params = {
        "message": {"role": "user", "messageId": "m", "parts": [{"kind": "text", "text": "x"}]},
        "configuration": {"blocking": False, "historyLength": 0},
    }
    configuration = resolve_v0_3_method(jsonrpc("message/send", params)).request.configuration
    assert configuration.return_immediately is True
    assert configuration.history_length is None  # 0 is "no limit" in 0.3


def test_tasks_get_reads_id_and_history_length() -> None:
    call = resolve_v0_3_method(jsonrpc("tasks/get", {"id": "t", "historyLength": 5}))
    assert call.request == GetTaskRequest(id="t", history_length=5)


def test_cancel_and_resubscribe_read_the_task_id() -> None:
    cancel = resolve_v0_3_method(jsonrpc("tasks/cancel", {"id": "t", "metadata": {"a": 1}}))
    assert cancel.request == CancelTaskRequest(id="t", metadata={"a": 1})
    resubscribe = resolve_v0_3_method(jsonrpc("tasks/resubscribe", {"id": "t"}))
    assert resubscribe.request == SubscribeToTaskRequest(id="t")


def test_push_config_set_without_id_is_named_default() -> None:
    call = resolve_v0_3_method(
        jsonrpc(
            "tasks/pushNotificationConfig/set",
            {"taskId": "t", "pushNotificationConfig": {"url": "https://x.example/hook"}},
        )
    )
    assert call.request == TaskPushNotificationConfig(
        id="default", task_id="t", url="https://x.example/hook"
    )


def test_push_config_get_without_config_id_finds_the_one_set_without_one() -> None:
    bare = resolve_v0_3_method(jsonrpc("tasks/pushNotificationConfig/get", {"id": "t"}))
    assert bare.request == GetTaskPushNotificationConfigRequest(task_id="t", id="default")
    named = resolve_v0_3_method(
        jsonrpc("tasks/pushNotificationConfig/get", {"id": "t", "pushNotificationConfigId": "c"})
    )
    assert named.request == GetTaskPushNotificationConfigRequest(task_id="t", id="c")


def test_push_config_list_and_delete_read_their_ids() -> None:
    listed = resolve_v0_3_method(jsonrpc("tasks/pushNotificationConfig/list", {"id": "t"}))
    assert listed.request == ListTaskPushNotificationConfigsRequest(task_id="t")
    deleted = resolve_v0_3_method(
        jsonrpc("tasks/pushNotificationConfig/delete", {"id": "t", "pushNotificationConfigId": "c"})
    )
    assert deleted.request == DeleteTaskPushNotificationConfigRequest(task_id="t", id="c")


def test_extended_card_takes_no_params() -> None:
    call = resolve_v0_3_method(jsonrpc("agent/getAuthenticatedExtendedCard", {}))
    assert call.request == GetExtendedAgentCardRequest()


def test_a_1_0_method_name_is_not_a_0_3_method() -> None:
    with pytest.raises(MethodNotFoundError):
        resolve_v0_3_method(jsonrpc("SendMessage", {}))


def test_tasks_list_does_not_exist_in_0_3() -> None:
    with pytest.raises(MethodNotFoundError):
        resolve_v0_3_method(jsonrpc("tasks/list", {}))


# --- bad 0.3 input: precise errors naming the 0.3 field ---------------------------


def send(*parts: dict[str, Any], role: str = "user") -> dict[str, Any]:
    return {"message": {"role": role, "messageId": "m", "parts": list(parts)}}


def test_an_unknown_part_kind_names_the_kind_field() -> None:
    message = invalid_params("message/send", send({"kind": "image", "text": "x"}))
    assert message.startswith("message.parts.0.kind: ")
    assert "'text', 'file' or 'data'" in message


def test_a_part_of_one_kind_without_its_member_is_refused() -> None:
    message = invalid_params("message/send", send({"kind": "text", "data": {"a": 1}}))
    assert message == 'message.parts.0: a part of kind "text" needs text'


def test_a_part_without_kind_is_read_by_its_one_member() -> None:
    request = resolve_v0_3_method(jsonrpc("message/send", send({"data": {"a": 1}}))).request
    assert request.message.parts == [Part(data={"a": 1})]


def test_a_file_with_both_bytes_and_uri_is_refused() -> None:
    file = {"bytes": "aGk=", "uri": "https://x.example/f"}
    message = invalid_params("message/send", send({"kind": "file", "file": file}))
    assert (
        message == "message.parts.0.file: a file must have exactly one of bytes or uri (found both)"
    )


def test_the_0_3_spec_stream_example_file_with_data_is_refused() -> None:
    # Section 9.3 of the 0.3 specification sends "data" in a file, which the
    # 0.3 schema has no room for: neither bytes nor uri.
    file = {"mimeType": "image/png", "data": "<base64-encoded-content>"}
    message = invalid_params("message/stream", send({"kind": "file", "file": file}))
    assert message.endswith("(found neither)")
    assert message.startswith("message.parts.0.file: ")


def test_bytes_that_are_not_base64_name_the_bytes_field() -> None:
    message = invalid_params("message/send", send({"kind": "file", "file": {"bytes": "!!"}}))
    assert message.startswith("message.parts.0.file.bytes: ")


def test_a_1_0_role_spelling_is_refused_naming_role() -> None:
    message = invalid_params("message/send", send({"kind": "text", "text": "x"}, role="ROLE_USER"))
    assert message.startswith("message.role: ")


def test_an_empty_parts_list_is_refused() -> None:
    assert invalid_params("message/send", send()).startswith("message.parts: ")


def test_a_missing_task_id_names_id() -> None:
    assert invalid_params("tasks/get", {}).startswith("id: ")


def test_a_negative_history_length_names_history_length() -> None:
    message = invalid_params("tasks/get", {"id": "t", "historyLength": -1})
    assert message.startswith("historyLength: ")


def test_credentials_without_a_scheme_are_refused() -> None:
    params = {
        "taskId": "t",
        "pushNotificationConfig": {
            "url": "https://x.example",
            "authentication": {"schemes": [], "credentials": "secret"},
        },
    }
    message = invalid_params("tasks/pushNotificationConfig/set", params)
    assert message == "pushNotificationConfig.authentication: credentials need a scheme in schemes"


def test_the_request_limits_apply_to_0_3_parts() -> None:
    params = send(*[{"kind": "text", "text": "x"}] * 3)
    with pytest.raises(InvalidParamsError) as caught:
        resolve_v0_3_method(jsonrpc("message/send", params), Limits(parts=2))
    assert caught.value.message.startswith("message.parts: 3 parts exceed the limit of 2")


# --- errors -------------------------------------------------------------------------


def test_a_1_0_error_keeps_its_code_and_carries_its_reason_in_data() -> None:
    error = TaskNotFoundError("no task t", metadata={"taskId": "t"})
    assert error_to_v0_3(error) == {
        "code": -32001,
        "message": "no task t",
        "data": {"reason": "TASK_NOT_FOUND", "metadata": {"taskId": "t"}},
    }
    types_v03.JSONRPCErrorResponse.model_validate(
        {"jsonrpc": "2.0", "id": 1, "error": error_to_v0_3(error)}
    )


def test_a_rest_error_body_has_the_numeric_code_the_js_client_reads() -> None:
    # @a2a-js/sdk 0.3.14 dist/client/index.js, RestTransport._handleErrorResponse:
    # "if (errorBody && typeof errorBody.code === 'number')" → mapToError.
    body = rest_error_to_v0_3(TaskNotFoundError())
    assert body["code"] == -32001
    assert body["message"] == "Task not found"


# --- version detection ------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, True), ("", True), ("0.3", True), ("0.3.0", True), ("1.0", False), ("x", False)],
)
def test_a_header_says_0_3_when_missing_or_0_3(header: str | None, expected: bool) -> None:
    assert says_v0_3(header) is expected


def test_a_0_3_method_is_0_3_whatever_the_header_says() -> None:
    assert jsonrpc_version("message/send", None) == "0.3"
    assert jsonrpc_version("message/send", "1.0") == "0.3"


def test_a_1_0_method_is_negotiated_exactly_as_before() -> None:
    assert jsonrpc_version("SendMessage", "1.0") == "1.0"
    with pytest.raises(VersionNotSupportedError):
        jsonrpc_version("SendMessage", None)


def test_a_0_3_path_is_0_3_and_a_1_0_path_is_negotiated() -> None:
    assert rest_version("/v1/message:send", None) == "0.3"
    assert rest_version("/message:send", "1.0") == "1.0"
    with pytest.raises(VersionNotSupportedError):
        rest_version("/message:send", None)


# --- HTTP+JSON: the routes both 0.3 clients call ----------------------------------


def test_a2a_sdk_0_3_rest_message_send_reads() -> None:
    # a2a-sdk 0.3.26 a2a/client/transports/rest.py _prepare_send_message:
    # MessageToDict(a2a_pb2.SendMessageRequest(request=..., configuration=...)).
    body = (
        b'{"message": {"messageId": "m-1", "role": "ROLE_USER",'
        b' "content": [{"text": "hi"}, {"file": {"fileWithUri": "https://x.example/f",'
        b' "mimeType": "text/plain"}}, {"data": {"data": {"a": 1}}}]},'
        b' "configuration": {"acceptedOutputModes": ["text/plain"], "blocking": true}}'
    )
    call = parse_rest_v0_3("POST", "/v1/message:send", {}, body)
    assert call.operation is Operation.SEND_MESSAGE
    assert call.request.message == Message(
        message_id="m-1",
        role=Role.USER,
        parts=[
            Part(text="hi"),
            Part(url="https://x.example/f", media_type="text/plain"),
            Part(data={"a": 1}),
        ],
    )
    assert call.request.configuration.return_immediately is False


def test_a2a_js_0_3_rest_message_stream_reads() -> None:
    # @a2a-js/sdk 0.3.14 dist/chunk-5ONEQMOQ.js ToProto.message, then
    # SendMessageRequest.toJSON: "request" goes out as "message", defaults
    # ("" ids, [] extensions) are left out, bytes are base64 once.
    body = (
        b'{"message": {"messageId": "m-2", "role": "ROLE_USER", "content":'
        b' [{"file": {"fileWithBytes": "' + base64.b64encode(PNG) + b'",'
        b' "mimeType": "image/png"}}]}}'
    )
    call = parse_rest_v0_3("POST", "/v1/message:stream", {}, body)
    assert call.operation is Operation.SEND_STREAMING_MESSAGE
    assert call.request.message.parts == [Part(raw=PNG, media_type="image/png")]
    assert call.request.configuration is None


def test_the_proto_field_name_request_is_read_as_message() -> None:
    body = b'{"request": {"messageId": "m", "role": 1, "content": [{"text": "x"}]}}'
    call = parse_rest_v0_3("POST", "/v1/message:send", {}, body)
    assert call.request.message.role is Role.USER


def test_a_rest_part_without_content_names_the_content_field() -> None:
    body = b'{"message": {"messageId": "m", "role": "ROLE_USER", "content": [{}]}}'
    with pytest.raises(InvalidParamsError) as caught:
        parse_rest_v0_3("POST", "/v1/message:send", {}, body)
    assert caught.value.message.startswith("message.content.0: a part must have exactly one")


def test_push_config_creation_reads_the_python_clients_body() -> None:
    # a2a-sdk 0.3.26 rest.py set_task_callback: MessageToDict of
    # CreateTaskPushNotificationConfigRequest(parent, config_id, config).
    body = (
        b'{"parent": "tasks/t-1", "configId": "c-1", "config": {'
        b'"name": "tasks/t-1/pushNotificationConfigs/c-1",'
        b' "pushNotificationConfig": {"id": "c-1", "url": "https://x.example/hook",'
        b' "token": "tok", "authentication": {"schemes": ["Bearer"], "credentials": "s"}}}}'
    )
    call = parse_rest_v0_3("POST", "/v1/tasks/t-1/pushNotificationConfigs", {}, body)
    assert call.operation is Operation.CREATE_PUSH_CONFIG
    assert call.request == TaskPushNotificationConfig(
        id="c-1",
        task_id="t-1",
        url="https://x.example/hook",
        token="tok",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="s"),
    )


def test_push_config_creation_reads_the_js_clients_body() -> None:
    # @a2a-js/sdk 0.3.14 RestTransport.setTaskPushNotificationConfig:
    # ToProto.taskPushNotificationConfig → {name, pushNotificationConfig}.
    body = (
        b'{"name": "tasks/t-1/pushNotificationConfigs/c-1",'
        b' "pushNotificationConfig": {"id": "c-1", "url": "https://x.example/hook"}}'
    )
    call = parse_rest_v0_3("POST", "/v1/tasks/t-1/pushNotificationConfigs", {}, body)
    assert call.request == TaskPushNotificationConfig(
        id="c-1", task_id="t-1", url="https://x.example/hook"
    )


def test_push_config_creation_without_any_id_names_it_default() -> None:
    # a2a-sdk 0.3 writes ".../None" into the name when the config has no id.
    body = (
        b'{"parent": "tasks/t-1", "config": {"name": "tasks/t-1/pushNotificationConfigs/None",'
        b' "pushNotificationConfig": {"url": "https://x.example/hook"}}}'
    )
    call = parse_rest_v0_3("POST", "/v1/tasks/t-1/pushNotificationConfigs", {}, body)
    assert call.request.id == "default"


def test_push_config_creation_with_neither_body_spelling_is_refused() -> None:
    with pytest.raises(InvalidParamsError) as caught:
        parse_rest_v0_3("POST", "/v1/tasks/t/pushNotificationConfigs", {}, b'{"url": "x"}')
    assert "exactly one of config" in caught.value.message


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_subscribe_is_served_as_get_and_as_post(method: str) -> None:
    # GET: a2a-sdk 0.3.26 rest.py resubscribe (aconnect_sse "GET").
    # POST: @a2a-js/sdk 0.3.14 RestTransport._sendStreamingRequest ("POST").
    call = parse_rest_v0_3(method, "/v1/tasks/t-1:subscribe", {}, None)
    assert call.request == SubscribeToTaskRequest(id="t-1")


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/v1/tasks/t", {"historyLength": "2"}, GetTaskRequest(id="t", history_length=2)),
        ("POST", "/v1/tasks/t:cancel", {}, CancelTaskRequest(id="t")),
        (
            "GET",
            "/v1/tasks/t/pushNotificationConfigs",
            {},
            ListTaskPushNotificationConfigsRequest(task_id="t"),
        ),
        (
            "GET",
            "/v1/tasks/t/pushNotificationConfigs/c",
            {},
            GetTaskPushNotificationConfigRequest(task_id="t", id="c"),
        ),
        (
            "DELETE",
            "/v1/tasks/t/pushNotificationConfigs/c",
            {},
            DeleteTaskPushNotificationConfigRequest(task_id="t", id="c"),
        ),
        ("GET", "/v1/card", {}, GetExtendedAgentCardRequest()),
    ],
)
def test_each_0_3_route_reads_its_path(
    method: str, path: str, query: dict[str, str], expected: Any
) -> None:
    # a2a-sdk 0.3.26's cancel_task posts {"name": "tasks/t"}: it is ignored.
    assert parse_rest_v0_3(method, path, query, b'{"name": "tasks/t"}').request == expected


def test_a_wrong_method_on_a_0_3_route_says_what_is_allowed() -> None:
    with pytest.raises(MethodNotAllowedError) as caught:
        parse_rest_v0_3("DELETE", "/v1/tasks/t", {}, None)
    assert caught.value.allowed == ["GET"]


def test_a_1_0_path_is_not_a_0_3_route() -> None:
    with pytest.raises(MethodNotFoundError):
        parse_rest_v0_3("POST", "/message:send", {}, b"{}")


# --- HTTP+JSON object shapes: checked against the 0.3 proto -----------------------


def parses_as(message: Any, wire: dict[str, Any]) -> Any:
    # Strict: an unknown field name fails, so a misspelt key cannot pass.
    return json_format.ParseDict(wire, message)


@pytest.mark.parametrize("event", EVERY_EVENT, ids=lambda e: type(e.payload).__name__)
def test_every_stream_event_is_a_0_3_proto_stream_response(event: StreamResponse) -> None:
    parses_as(pb_v03.StreamResponse(), stream_response_to_proto(event))


def test_a_proto_task_spells_canceled_with_two_ls_and_messages_hold_content() -> None:
    wire = task_to_proto(rich_task(TaskState.CANCELED))
    assert wire["status"]["state"] == "TASK_STATE_CANCELLED"
    assert wire["history"][0]["role"] == "ROLE_USER"
    assert [list(part) for part in wire["history"][0]["content"]][:4] == [
        ["text", "metadata"],
        ["file"],
        ["file"],
        ["data"],
    ]
    parsed = parses_as(pb_v03.Task(), wire)
    assert parsed.status.state == pb_v03.TASK_STATE_CANCELLED
    assert parsed.history[0].content[1].file.file_with_bytes == PNG


def test_send_results_and_push_configs_are_0_3_proto_messages() -> None:
    parses_as(
        pb_v03.SendMessageResponse(), send_result_to_proto(SendMessageResponse(task=rich_task()))
    )
    parses_as(
        pb_v03.SendMessageResponse(),
        send_result_to_proto(SendMessageResponse(message=rich_message())),
    )
    config = parses_as(pb_v03.TaskPushNotificationConfig(), push_config_to_proto(PUSH_CONFIG))
    assert config.name == "tasks/task-1/pushNotificationConfigs/cfg-1"
    listing = ListTaskPushNotificationConfigsResponse(configs=[PUSH_CONFIG], next_page_token="n")
    parses_as(pb_v03.ListTaskPushNotificationConfigResponse(), push_config_list_to_proto(listing))


def test_a_proto_message_round_trips_through_the_rest_reader() -> None:
    message = Message(
        message_id="m",
        context_id="c",
        task_id="t",
        role=Role.USER,
        parts=[Part(text="x"), Part(raw=PNG, filename="f.bin"), Part(data={"a": [1]})],
        metadata={"k": "v"},
        extensions=["https://example.com/ext"],
    )
    body = {"message": send_result_to_proto(SendMessageResponse(message=message))["message"]}
    call = parse_rest_v0_3("POST", "/v1/message:send", {}, json.dumps(body).encode())
    assert call.request.message == message


# --- the card both versions read --------------------------------------------------

CARD = AgentCard.model_validate(
    {
        "name": "Echo",
        "description": "Repeats",
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": "https://a.example/echo/jsonrpc",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            },
            {
                "url": "https://a.example/echo/rest",
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": "1.0",
            },
        ],
        "capabilities": {"streaming": True, "extendedAgentCard": True},
        "securitySchemes": {
            "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
        },
        "securityRequirements": [{"schemes": {"key": {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": "echo",
                "name": "Echo",
                "description": "d",
                "tags": ["t"],
                "securityRequirements": [{"schemes": {"bearer": {"list": ["read"]}}}],
            }
        ],
    }
)


def test_the_card_for_both_keeps_every_1_0_field() -> None:
    served = card_for_both(CARD)
    assert AgentCard.model_validate(served) == CARD
    one_zero = CARD.to_wire()
    for key, value in one_zero.items():
        if key in ("securitySchemes", "skills"):
            continue  # gain 0.3 keys next to theirs, checked below
        assert served[key] == value


def test_the_card_for_both_adds_what_a_0_3_client_needs() -> None:
    served = card_for_both(CARD)
    assert served["protocolVersion"] == "0.3.0"
    assert served["url"] == "https://a.example/echo/jsonrpc"
    assert served["preferredTransport"] == "JSONRPC"
    assert served["additionalInterfaces"] == [
        {"url": "https://a.example/echo/jsonrpc", "transport": "JSONRPC"},
        {"url": "https://a.example/echo/rest", "transport": "HTTP+JSON"},
    ]
    assert served["supportsAuthenticatedExtendedCard"] is True
    assert served["security"] == [{"key": []}]
    assert served["skills"][0]["security"] == [{"bearer": ["read"]}]
    assert served["securitySchemes"]["key"]["type"] == "apiKey"
    assert served["securitySchemes"]["key"]["in"] == "header"


def test_the_card_for_both_is_a_valid_0_3_card_for_a2a_sdk() -> None:
    card = types_v03.AgentCard.model_validate(card_for_both(CARD))
    assert card.url == "https://a.example/echo/jsonrpc"
    assert card.security_schemes is not None
    assert card.security_schemes["bearer"].root.type == "http"

"""The pure protocol rules: errors, the state machine, task updates, routing, versions, SSE.

Every table here is written out from the spec (sections 3, 5.4, 9.5, 11.3, 11.5, 11.6)
rather than read back from the code, so a change to the code's tables shows up.
"""

from __future__ import annotations

import json
import re
from itertools import product
from typing import Any

import pytest

from a2a_trio.protocol import errors
from a2a_trio.protocol.errors import (
    ERROR_INFO_TYPE,
    ERROR_TABLE,
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotAllowedError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
    error_from_code,
)
from a2a_trio.protocol.limits import Limits
from a2a_trio.protocol.models import (
    Artifact,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_trio.protocol.operations import (
    Operation,
    match_route,
    parse_jsonrpc,
    parse_rest,
    resolve_method,
)
from a2a_trio.protocol.sse import KEEPALIVE, format_event
from a2a_trio.protocol.states import IllegalTransition, check_executor_move, check_host_ending
from a2a_trio.protocol.tasks import apply_artifact, apply_status, kept_history, view_task
from a2a_trio.protocol.versions import negotiate_version

S = TaskState

# --- errors (spec 3.3.2, 5.4, 9.5, 11.6) ---------------------------------------------

#: Spec 5.4: every A2A error with its JSON-RPC code, gRPC status and HTTP status: v1.0.1's
#: table where the conformance kit (v1.0.0) accepts it, v1.0.0's where the kit checks it
#: (docs/protocol.md, "Errors").
A2A_ERRORS: list[tuple[type[A2AError], int, str, int]] = [
    (TaskNotFoundError, -32001, "NOT_FOUND", 404),
    (TaskNotCancelableError, -32002, "FAILED_PRECONDITION", 400),
    (PushNotificationNotSupportedError, -32003, "UNIMPLEMENTED", 400),
    (UnsupportedOperationError, -32004, "UNIMPLEMENTED", 400),
    (ContentTypeNotSupportedError, -32005, "INVALID_ARGUMENT", 415),
    (InvalidAgentResponseError, -32006, "INTERNAL", 500),
    (ExtendedAgentCardNotConfiguredError, -32007, "FAILED_PRECONDITION", 400),
    (ExtensionSupportRequiredError, -32008, "FAILED_PRECONDITION", 400),
    (VersionNotSupportedError, -32009, "UNIMPLEMENTED", 400),
]

#: Spec 9.5: the JSON-RPC standard errors with their standard messages.
STANDARD_ERRORS: list[tuple[type[A2AError], int, int, str]] = [
    (JSONParseError, -32700, 400, "Invalid JSON payload"),
    (InvalidRequestError, -32600, 400, "Request payload validation error"),
    (MethodNotFoundError, -32601, 404, "Method not found"),
    (InvalidParamsError, -32602, 400, "Invalid parameters"),
    (InternalError, -32603, 500, "Internal error"),
]


def upper_snake_without_error_suffix(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name.removesuffix("Error")).upper()


def name_of(value: Any) -> str:
    return value.__name__ if isinstance(value, type) else str(value)


@pytest.mark.parametrize(("cls", "code", "grpc", "status"), A2A_ERRORS, ids=name_of)
def test_a2a_error_uses_the_jsonrpc_code_of_the_mapping_table(
    cls: type[A2AError], code: int, grpc: str, status: int
) -> None:
    assert cls().code == code


@pytest.mark.parametrize(("cls", "code", "grpc", "status"), A2A_ERRORS, ids=name_of)
def test_a2a_error_uses_the_http_status_of_the_mapping_table(
    cls: type[A2AError], code: int, grpc: str, status: int
) -> None:
    assert cls().http_status == status


@pytest.mark.parametrize(("cls", "code", "grpc", "status"), A2A_ERRORS, ids=name_of)
def test_a2a_error_uses_the_grpc_status_of_the_mapping_table(
    cls: type[A2AError], code: int, grpc: str, status: int
) -> None:
    assert cls().to_http()["error"]["status"] == grpc


@pytest.mark.parametrize(("cls", "code", "grpc", "status"), A2A_ERRORS, ids=name_of)
def test_a2a_error_reason_is_its_name_in_upper_snake_case_without_suffix(
    cls: type[A2AError], code: int, grpc: str, status: int
) -> None:
    assert cls().error_info()["reason"] == upper_snake_without_error_suffix(cls.__name__)


@pytest.mark.parametrize(("cls", "code", "status", "message"), STANDARD_ERRORS, ids=name_of)
def test_standard_error_uses_the_jsonrpc_code_and_message_of_the_spec(
    cls: type[A2AError], code: int, status: int, message: str
) -> None:
    error = cls()
    assert (error.code, error.message) == (code, message)


@pytest.mark.parametrize(("cls", "code", "status", "message"), STANDARD_ERRORS, ids=name_of)
def test_standard_error_has_an_http_status(
    cls: type[A2AError], code: int, status: int, message: str
) -> None:
    assert cls().http_status == status


def test_every_error_class_is_in_the_error_table() -> None:
    defined = {
        name
        for name in errors.__all__
        if isinstance(getattr(errors, name), type)
        and issubclass(getattr(errors, name), A2AError)
        and getattr(errors, name) is not A2AError
    }
    assert set(ERROR_TABLE) == defined


def test_a2a_errors_have_distinct_jsonrpc_codes_in_the_a2a_range() -> None:
    codes = [cls().code for cls, *_ in A2A_ERRORS]
    assert len(set(codes)) == len(codes)
    assert all(-32099 <= code <= -32001 for code in codes)


ALL_ERRORS = sorted(ERROR_TABLE.values(), key=lambda cls: cls.__name__)


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=name_of)
def test_jsonrpc_error_object_has_only_code_message_and_data(cls: type[A2AError]) -> None:
    assert set(cls().to_jsonrpc()) == {"code", "message", "data"}


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=name_of)
def test_jsonrpc_error_data_is_a_list_holding_the_error_info(cls: type[A2AError]) -> None:
    error = cls("something specific")
    body = error.to_jsonrpc()
    assert body["code"] == error.code
    assert body["message"] == "something specific"
    assert body["data"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": error.spec.reason,
            "domain": "a2a-protocol.org",
        }
    ]


def test_error_info_type_is_the_google_rpc_error_info_type_url() -> None:
    assert ERROR_INFO_TYPE == "type.googleapis.com/google.rpc.ErrorInfo"


def test_error_metadata_lands_in_the_error_info() -> None:
    error = TaskNotFoundError("Task t-1 not found", metadata={"taskId": "t-1"})
    assert error.to_jsonrpc()["data"][0]["metadata"] == {"taskId": "t-1"}
    assert error.to_http()["error"]["details"][0]["metadata"] == {"taskId": "t-1"}


def test_error_without_metadata_has_no_metadata_key() -> None:
    assert "metadata" not in TaskNotFoundError().error_info()


def test_jsonrpc_error_object_is_json_serialisable() -> None:
    error = TaskNotFoundError(metadata={"taskId": "t-1"})
    assert json.loads(json.dumps(error.to_jsonrpc())) == error.to_jsonrpc()


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=name_of)
def test_http_error_body_follows_aip_193(cls: type[A2AError]) -> None:
    error = cls("what went wrong")
    assert error.to_http() == {
        "error": {
            "code": error.http_status,
            "status": error.spec.grpc_status,
            "message": "what went wrong",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": error.spec.reason,
                    "domain": "a2a-protocol.org",
                }
            ],
        }
    }


def test_http_error_example_of_spec_11_6() -> None:
    body = TaskNotFoundError(
        "The specified task ID does not exist or is not accessible",
        metadata={"taskId": "task-123"},
    ).to_http()
    assert body["error"]["code"] == 404
    assert body["error"]["status"] == "NOT_FOUND"
    assert body["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"


def test_an_error_without_a_message_uses_its_standard_message() -> None:
    assert TaskNotFoundError().message == "Task not found"
    assert str(TaskNotFoundError()) == "Task not found"


@pytest.mark.parametrize(("cls", "code", "grpc", "status"), A2A_ERRORS, ids=name_of)
def test_error_from_code_rebuilds_each_a2a_error(
    cls: type[A2AError], code: int, grpc: str, status: int
) -> None:
    rebuilt = error_from_code(code, "from the peer")
    assert type(rebuilt) is cls
    assert rebuilt.message == "from the peer"


@pytest.mark.parametrize(("cls", "code", "status", "message"), STANDARD_ERRORS, ids=name_of)
def test_error_from_code_rebuilds_each_standard_error(
    cls: type[A2AError], code: int, status: int, message: str
) -> None:
    assert type(error_from_code(code)) is cls


def test_error_from_code_prefers_the_reason_over_the_code() -> None:
    assert type(error_from_code(-32001, reason="TASK_NOT_CANCELABLE")) is TaskNotCancelableError


def test_error_from_code_falls_back_to_the_code_for_an_unknown_reason() -> None:
    assert type(error_from_code(-32001, reason="SOMETHING_NEW")) is TaskNotFoundError


def test_error_from_code_makes_an_internal_error_of_an_unknown_code() -> None:
    rebuilt = error_from_code(-31999, "odd")
    assert type(rebuilt) is InternalError
    assert rebuilt.message == "odd"


def test_error_from_code_without_a_message_uses_the_standard_message() -> None:
    assert error_from_code(-32002).message == "Task cannot be canceled"


# --- the task state machine ----------------------------------------------------------

FINAL = [S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED]
INTERRUPTED = [S.INPUT_REQUIRED, S.AUTH_REQUIRED]

#: The moves an executor may make, written out from spec 3 and 4.1.3.
#: ``None`` is a task that does not exist yet. Interrupted states resume only with may_resume.
EXECUTOR_MAY: dict[TaskState | None, set[TaskState]] = {
    None: {S.SUBMITTED},
    S.SUBMITTED: {S.WORKING, S.REJECTED},
    S.WORKING: {S.WORKING, S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.CANCELED},
    S.INPUT_REQUIRED: {S.WORKING},
    S.AUTH_REQUIRED: {S.WORKING},
    S.COMPLETED: set(),
    S.FAILED: set(),
    S.CANCELED: set(),
    S.REJECTED: set(),
}

# A stored task is never UNSPECIFIED: creation must be SUBMITTED (see the first row).
CURRENT_STATES: list[TaskState | None] = [None, *(s for s in TaskState if s is not S.UNSPECIFIED)]


def executor_may(current: TaskState | None, requested: TaskState, may_resume: bool) -> bool:
    if current in INTERRUPTED and not may_resume:
        return False
    return requested in EXECUTOR_MAY[current]


def move_id(value: Any) -> str:
    if value is None:
        return "new"
    if isinstance(value, TaskState):
        return value.name
    return f"may_resume={value}"


@pytest.mark.parametrize(
    ("current", "requested", "may_resume"),
    list(product(CURRENT_STATES, list(TaskState), [False, True])),
    ids=move_id,
)
def test_executor_moves_follow_the_lifecycle_table(
    current: TaskState | None, requested: TaskState, may_resume: bool
) -> None:
    if executor_may(current, requested, may_resume):
        check_executor_move(current, requested, may_resume=may_resume)
    else:
        with pytest.raises(IllegalTransition) as refused:
            check_executor_move(current, requested, may_resume=may_resume)
        assert (refused.value.current, refused.value.requested) == (current, requested)


@pytest.mark.parametrize("interrupted", INTERRUPTED, ids=move_id)
def test_an_interrupted_task_resumes_only_on_the_clients_next_message(
    interrupted: TaskState,
) -> None:
    with pytest.raises(IllegalTransition, match="resumes only on the client's next message"):
        check_executor_move(interrupted, S.WORKING, may_resume=False)
    check_executor_move(interrupted, S.WORKING, may_resume=True)


@pytest.mark.parametrize(("final", "requested"), list(product(FINAL, TaskState)), ids=move_id)
def test_the_executor_never_changes_a_final_state(final: TaskState, requested: TaskState) -> None:
    with pytest.raises(IllegalTransition, match="the task is in a final state"):
        check_executor_move(final, requested, may_resume=True)


@pytest.mark.parametrize(
    ("final", "ending"), list(product(FINAL, [S.CANCELED, S.FAILED])), ids=move_id
)
def test_the_host_never_ends_a_task_in_a_final_state(final: TaskState, ending: TaskState) -> None:
    with pytest.raises(IllegalTransition, match="the task is in a final state"):
        check_host_ending(final, ending)


@pytest.mark.parametrize(
    ("current", "requested"), list(product(CURRENT_STATES, list(TaskState))), ids=move_id
)
def test_the_host_only_cancels_or_fails_tasks_that_are_not_final(
    current: TaskState | None, requested: TaskState
) -> None:
    allowed = requested in (S.CANCELED, S.FAILED) and current not in FINAL
    if allowed:
        check_host_ending(current, requested)
    else:
        with pytest.raises(IllegalTransition):
            check_host_ending(current, requested)


def test_a_refused_move_says_what_was_refused() -> None:
    with pytest.raises(IllegalTransition) as refused:
        check_executor_move(S.COMPLETED, S.WORKING, may_resume=False)
    assert str(refused.value) == (
        "TASK_STATE_COMPLETED -> TASK_STATE_WORKING refused: the task is in a final state"
    )


@pytest.mark.parametrize("state", list(TaskState), ids=move_id)
def test_final_and_interrupted_states_are_named_by_the_enum(state: TaskState) -> None:
    assert state.is_final == (state in FINAL)
    assert state.is_interrupted == (state in INTERRUPTED)


# --- how events change a task --------------------------------------------------------


def message(message_id: str, text: str, role: Role = Role.USER) -> Message:
    return Message(message_id=message_id, role=role, parts=[Part(text=text)])


def artifact(artifact_id: str, *texts: str, name: str | None = None) -> Artifact:
    return Artifact(artifact_id=artifact_id, name=name, parts=[Part(text=t) for t in texts])


def new_task(**fields: Any) -> Task:
    return Task(id="t-1", context_id="c-1", status=TaskStatus(state=S.WORKING), **fields)


def status_update(state: TaskState, status_message: Message | None = None) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id="t-1", context_id="c-1", status=TaskStatus(state=state, message=status_message)
    )


def artifact_update(chunk: Artifact, *, append: bool | None) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(task_id="t-1", context_id="c-1", artifact=chunk, append=append)


def test_a_status_update_replaces_the_status() -> None:
    updated = apply_status(new_task(), status_update(S.COMPLETED))
    assert updated.status.state is S.COMPLETED


def test_a_status_update_leaves_the_history_to_the_log() -> None:
    task = new_task(history=[message("u-1", "hello")])
    question = message("a-1", "What is your name?", Role.AGENT)
    updated = apply_status(task, status_update(S.INPUT_REQUIRED, question))
    assert updated.history == task.history
    assert updated.status.message == question


def test_applying_a_status_does_not_change_the_original_task() -> None:
    task = new_task()
    apply_status(task, status_update(S.COMPLETED, message("a-1", "done", Role.AGENT)))
    assert task.status.state is S.WORKING
    assert task.history is None


def window_texts(messages: list[Message], limits: Limits | None = None) -> list[str]:
    kept = kept_history(messages, limits or Limits())
    return [part.text or "" for kept_message in kept for part in kept_message.parts]


def test_the_history_window_keeps_every_message_in_order() -> None:
    said = [message("u-1", "hello"), message("a-1", "one", Role.AGENT), message("u-2", "two")]
    assert window_texts(said) == ["hello", "one", "two"]


def test_a_message_logged_twice_shows_once_at_its_first_place() -> None:
    thinking = message("a-1", "thinking", Role.AGENT)
    said = [thinking, message("u-1", "hello"), thinking]
    assert window_texts(said) == ["thinking", "hello"]


def test_a_follow_up_that_reuses_a_message_id_still_joins_the_history() -> None:
    said = [
        message("tck-input-required", "TCK prerequisite task creation"),
        message("tck-input-required", "TCK history message 1"),
        message("tck-input-required", "TCK history message 2"),
    ]
    assert window_texts(said) == [
        "TCK prerequisite task creation",
        "TCK history message 1",
        "TCK history message 2",
    ]


def test_the_history_window_keeps_the_most_recent_messages_within_the_limits() -> None:
    said = [message(f"u-{n}", f"{n}") for n in range(10)]
    assert window_texts(said, Limits(history_messages=3)) == ["7", "8", "9"]
    two = len(said[-1].to_json()) + len(said[-2].to_json())
    assert window_texts(said, Limits(history_bytes=two)) == ["8", "9"]
    assert window_texts(said, Limits(history_bytes=1)) == ["9"]  # the newest, whatever its size


def test_a_new_artifact_is_added() -> None:
    task = apply_artifact(new_task(), artifact_update(artifact("a-1", "hello"), append=None))
    assert task.artifacts == [artifact("a-1", "hello")]


def test_an_artifact_with_a_known_id_replaces_it_when_not_appending() -> None:
    task = new_task(artifacts=[artifact("a-1", "old"), artifact("a-2", "other")])
    updated = apply_artifact(task, artifact_update(artifact("a-1", "new"), append=False))
    assert updated.artifacts == [artifact("a-1", "new"), artifact("a-2", "other")]


def test_an_appended_chunk_extends_the_parts_of_its_artifact() -> None:
    task = new_task(artifacts=[artifact("a-1", "one ", name="answer"), artifact("a-2", "x")])
    updated = apply_artifact(task, artifact_update(artifact("a-1", "two ", "three"), append=True))
    assert updated.artifacts == [
        artifact("a-1", "one ", "two ", "three", name="answer"),
        artifact("a-2", "x"),
    ]


def test_an_appended_chunk_for_an_unknown_artifact_creates_it() -> None:
    task = new_task(artifacts=[artifact("a-1", "one")])
    updated = apply_artifact(task, artifact_update(artifact("a-2", "fresh"), append=True))
    assert updated.artifacts == [artifact("a-1", "one"), artifact("a-2", "fresh")]


def test_an_appended_chunk_merges_metadata_and_may_rename() -> None:
    first = Artifact(artifact_id="a-1", name="draft", parts=[Part(text="a")], metadata={"x": 1})
    chunk = Artifact(artifact_id="a-1", name="final", parts=[Part(text="b")], metadata={"y": 2})
    updated = apply_artifact(new_task(artifacts=[first]), artifact_update(chunk, append=True))
    assert updated.artifacts == [
        Artifact(
            artifact_id="a-1",
            name="final",
            parts=[Part(text="a"), Part(text="b")],
            metadata={"x": 1, "y": 2},
        )
    ]


FIVE_MESSAGES = [message(f"m-{i}", f"text {i}") for i in range(1, 6)]


def test_view_without_history_length_keeps_the_whole_history() -> None:
    task = new_task(history=FIVE_MESSAGES)
    assert view_task(task, history_length=None).history == FIVE_MESSAGES


def test_view_with_history_length_zero_omits_history() -> None:
    viewed = view_task(new_task(history=FIVE_MESSAGES), history_length=0)
    assert viewed.history is None
    assert "history" not in viewed.to_wire()


@pytest.mark.parametrize("length", [1, 2, 4])
def test_view_with_history_length_n_keeps_the_n_most_recent_messages(length: int) -> None:
    viewed = view_task(new_task(history=FIVE_MESSAGES), history_length=length)
    assert viewed.history == FIVE_MESSAGES[-length:]


def test_view_with_history_length_beyond_the_history_keeps_it_all() -> None:
    viewed = view_task(new_task(history=FIVE_MESSAGES), history_length=50)
    assert viewed.history == FIVE_MESSAGES


def test_view_without_artifacts_omits_the_field() -> None:
    viewed = view_task(new_task(artifacts=[artifact("a-1", "x")]), include_artifacts=False)
    assert viewed.artifacts is None
    assert "artifacts" not in viewed.to_wire()


def test_view_with_artifacts_keeps_them() -> None:
    task = new_task(artifacts=[artifact("a-1", "x")])
    assert view_task(task, include_artifacts=True).artifacts == [artifact("a-1", "x")]


def test_view_leaves_the_stored_task_unchanged() -> None:
    task = new_task(history=FIVE_MESSAGES, artifacts=[artifact("a-1", "x")])
    view_task(task, history_length=0, include_artifacts=False)
    assert task.history == FIVE_MESSAGES
    assert task.artifacts == [artifact("a-1", "x")]


# --- HTTP+JSON routes (spec 11.3) ----------------------------------------------------

ROUTES: list[tuple[str, str, Operation, dict[str, str]]] = [
    ("POST", "/message:send", Operation.SEND_MESSAGE, {}),
    ("POST", "/message:stream", Operation.SEND_STREAMING_MESSAGE, {}),
    ("GET", "/tasks/t-1", Operation.GET_TASK, {"id": "t-1"}),
    ("GET", "/tasks", Operation.LIST_TASKS, {}),
    ("POST", "/tasks/t-1:cancel", Operation.CANCEL_TASK, {"id": "t-1"}),
    ("POST", "/tasks/t-1:subscribe", Operation.SUBSCRIBE_TO_TASK, {"id": "t-1"}),
    ("GET", "/tasks/t-1:subscribe", Operation.SUBSCRIBE_TO_TASK, {"id": "t-1"}),
    (
        "POST",
        "/tasks/t-1/pushNotificationConfigs",
        Operation.CREATE_PUSH_CONFIG,
        {"task_id": "t-1"},
    ),
    (
        "GET",
        "/tasks/t-1/pushNotificationConfigs/c-1",
        Operation.GET_PUSH_CONFIG,
        {"task_id": "t-1", "id": "c-1"},
    ),
    ("GET", "/tasks/t-1/pushNotificationConfigs", Operation.LIST_PUSH_CONFIGS, {"task_id": "t-1"}),
    (
        "DELETE",
        "/tasks/t-1/pushNotificationConfigs/c-1",
        Operation.DELETE_PUSH_CONFIG,
        {"task_id": "t-1", "id": "c-1"},
    ),
    ("GET", "/extendedAgentCard", Operation.GET_EXTENDED_CARD, {}),
]


@pytest.mark.parametrize(
    ("method", "path", "operation", "params"), ROUTES, ids=[f"{m} {p}" for m, p, *_ in ROUTES]
)
def test_each_rest_route_of_the_spec_resolves_to_its_operation(
    method: str, path: str, operation: Operation, params: dict[str, str]
) -> None:
    assert match_route(method, path) == (operation, params)


def test_every_operation_has_a_rest_route() -> None:
    assert {operation for _, _, operation, _ in ROUTES} == set(Operation)


def test_a_trailing_slash_does_not_change_the_route() -> None:
    assert match_route("GET", "/tasks/t-1/") == (Operation.GET_TASK, {"id": "t-1"})


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/message:send", ["POST"]),
        ("PUT", "/message:stream", ["POST"]),
        ("DELETE", "/tasks", ["GET"]),
        ("POST", "/tasks/t-1", ["GET"]),
        ("GET", "/tasks/t-1:cancel", ["POST"]),
        ("DELETE", "/tasks/t-1:subscribe", ["GET", "POST"]),
        ("PUT", "/tasks/t-1/pushNotificationConfigs", ["GET", "POST"]),
        ("POST", "/tasks/t-1/pushNotificationConfigs/c-1", ["DELETE", "GET"]),
        ("POST", "/extendedAgentCard", ["GET"]),
    ],
)
def test_a_wrong_verb_is_not_allowed_and_names_the_allowed_ones(
    method: str, path: str, allowed: list[str]
) -> None:
    with pytest.raises(MethodNotAllowedError) as refused:
        match_route(method, path)
    assert refused.value.allowed == allowed
    assert refused.value.http_status == 405


@pytest.mark.parametrize(
    "path",
    ["/", "/nothing", "/message", "/message:delete", "/tasks/t-1:pause", "/tasks/a/b", "/v1/tasks"],
)
def test_an_unknown_path_is_not_found(path: str) -> None:
    with pytest.raises(MethodNotFoundError) as missing:
        match_route("GET", path)
    assert missing.value.http_status == 404


def test_send_message_reads_its_request_from_the_body() -> None:
    body = json.dumps(
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    )
    call = parse_rest("POST", "/message:send", {}, body.encode())
    assert call.operation is Operation.SEND_MESSAGE
    assert call.request.message.parts == [Part(text="hi")]


def test_cancel_with_an_empty_body_takes_the_id_from_the_path() -> None:
    call = parse_rest("POST", "/tasks/t-1:cancel", {}, b"")
    assert call.request == CancelTaskRequest(id="t-1")


def test_get_task_reads_history_length_from_the_query() -> None:
    call = parse_rest("GET", "/tasks/t-1", {"historyLength": "3"}, None)
    assert call.request == GetTaskRequest(id="t-1", history_length=3)


def test_get_task_with_history_length_zero_keeps_the_zero() -> None:
    call = parse_rest("GET", "/tasks/t-1", {"historyLength": "0"}, None)
    assert call.request.history_length == 0


def test_list_tasks_coerces_camel_case_query_parameters() -> None:
    query = {
        "contextId": "c-1",
        "pageSize": "2",
        "pageToken": "abc",
        "historyLength": "0",
        "includeArtifacts": "false",
        "statusTimestampAfter": "2025-11-09T12:30:00+02:00",
        "status": "TASK_STATE_WORKING",
    }
    call = parse_rest("GET", "/tasks", query, None)
    assert call.request.to_wire() == {
        "contextId": "c-1",
        "status": "TASK_STATE_WORKING",
        "pageSize": 2,
        "pageToken": "abc",
        "historyLength": 0,
        "statusTimestampAfter": "2025-11-09T10:30:00.000Z",
        "includeArtifacts": False,
    }


def test_list_tasks_coerces_snake_case_query_parameters() -> None:
    query = {"context_id": "c-1", "page_size": "100", "include_artifacts": "true"}
    call = parse_rest("GET", "/tasks", query, None)
    assert call.request == ListTasksRequest(context_id="c-1", page_size=100, include_artifacts=True)


@pytest.mark.parametrize(
    ("value", "state"),
    [
        ("working", S.WORKING),
        ("TASK_STATE_WORKING", S.WORKING),
        ("input-required", S.INPUT_REQUIRED),
        ("completed", S.COMPLETED),
    ],
)
def test_list_tasks_status_filter_accepts_enum_names_and_short_forms(
    value: str, state: TaskState
) -> None:
    assert parse_rest("GET", "/tasks", {"status": value}, None).request.status is state


@pytest.mark.parametrize(
    "query",
    [
        {"pageSize": "0"},
        {"pageSize": "101"},
        {"pageSize": "two"},
        {"historyLength": "-1"},
        {"includeArtifacts": "perhaps"},
        {"status": "sleeping"},
        {"statusTimestampAfter": "last tuesday"},
    ],
)
def test_list_tasks_rejects_invalid_query_parameters(query: dict[str, str]) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        parse_rest("GET", "/tasks", query, None)
    assert next(iter(query)) in refused.value.message


def test_push_config_routes_take_task_and_config_ids_from_the_path() -> None:
    call = parse_rest("DELETE", "/tasks/t-1/pushNotificationConfigs/c-1", {}, None)
    assert (call.request.task_id, call.request.id) == ("t-1", "c-1")


def test_create_push_config_reads_the_config_from_the_body_and_the_task_from_the_path() -> None:
    body = json.dumps({"id": "c-1", "url": "https://hooks.example.com/a2a"}).encode()
    call = parse_rest("POST", "/tasks/t-1/pushNotificationConfigs", {}, body)
    assert call.request == TaskPushNotificationConfig(
        id="c-1", task_id="t-1", url="https://hooks.example.com/a2a"
    )


def test_the_path_task_id_wins_over_a_task_id_in_the_body() -> None:
    body = json.dumps({"taskId": "t-other", "url": "https://hooks.example.com/a2a"}).encode()
    call = parse_rest("POST", "/tasks/t-1/pushNotificationConfigs", {}, body)
    assert call.request.task_id == "t-1"


def test_the_path_task_id_wins_over_a_task_id_in_the_query() -> None:
    call = parse_rest("GET", "/tasks/t-1/pushNotificationConfigs/c-1", {"taskId": "t-other"}, None)
    assert call.request.task_id == "t-1"


def test_the_path_id_wins_over_an_id_in_the_query() -> None:
    call = parse_rest("GET", "/tasks/t-1", {"id": "t-other"}, None)
    assert call.request.id == "t-1"


def test_a_rest_body_that_is_not_json_is_a_parse_error() -> None:
    with pytest.raises(JSONParseError):
        parse_rest("POST", "/message:send", {}, b"{not json")


def test_a_rest_body_that_is_not_an_object_is_invalid_params() -> None:
    with pytest.raises(InvalidParamsError, match="must be a JSON object"):
        parse_rest("POST", "/message:send", {}, b"[1, 2]")


def test_a_rest_send_without_a_message_names_the_missing_field() -> None:
    with pytest.raises(InvalidParamsError, match="message: Field required"):
        parse_rest("POST", "/message:send", {}, b"{}")


# --- JSON-RPC envelopes and methods (spec 9) -----------------------------------------


def jsonrpc(method: str = "GetTask", params: Any = None, **envelope: Any) -> bytes:
    document: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        document["params"] = params
    document.update(envelope)
    return json.dumps(document).encode()


def test_a_valid_envelope_is_read() -> None:
    call = parse_jsonrpc(jsonrpc("GetTask", {"id": "t-1"}))
    assert (call.id, call.method, call.params) == (7, "GetTask", {"id": "t-1"})


@pytest.mark.parametrize("request_id", ["abc", 0, None])
def test_string_number_and_null_ids_are_accepted(request_id: Any) -> None:
    assert parse_jsonrpc(jsonrpc(id=request_id)).id == request_id


@pytest.mark.parametrize("params", [None, {}])
def test_missing_or_empty_params_become_an_empty_object(params: Any) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": params}
    assert parse_jsonrpc(json.dumps(body).encode()).params == {}


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe", b'{"jsonrpc": "2.0", "id": 1'])
def test_a_body_that_is_not_json_is_a_parse_error_without_an_id(body: bytes) -> None:
    with pytest.raises(JSONParseError) as refused:
        parse_jsonrpc(body)
    assert refused.value.code == -32700
    assert getattr(refused.value, "request_id", None) is None


@pytest.mark.parametrize(
    "body", [b"[]", b'[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]', b"3"]
)
def test_a_body_that_is_not_an_object_is_an_invalid_request_without_an_id(body: bytes) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        parse_jsonrpc(body)
    assert refused.value.code == -32600
    assert getattr(refused.value, "request_id", None) is None


@pytest.mark.parametrize(
    ("envelope", "complaint"),
    [
        ({"jsonrpc": "1.0"}, 'jsonrpc must be exactly "2.0"'),
        ({"jsonrpc": None}, 'jsonrpc must be exactly "2.0"'),
        ({"method": ""}, "method must be a non-empty string"),
        ({"method": 5}, "method must be a non-empty string"),
        ({"params": [1, 2]}, "params must be an object"),
        ({"params": "id=1"}, "params must be an object"),
    ],
)
def test_a_bad_envelope_with_a_readable_id_is_an_invalid_request_for_that_id(
    envelope: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(InvalidRequestError, match=re.escape(complaint)) as refused:
        parse_jsonrpc(jsonrpc(**envelope))
    assert refused.value.request_id == 7  # type: ignore[attr-defined]


def test_an_envelope_without_jsonrpc_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequestError):
        parse_jsonrpc(json.dumps({"id": 3, "method": "GetTask"}).encode())


@pytest.mark.parametrize("request_id", [True, 1.5, {"n": 1}, [1]])
def test_an_unusable_id_is_an_invalid_request_answered_with_a_null_id(request_id: Any) -> None:
    with pytest.raises(
        InvalidRequestError, match="id must be a string, a number or null"
    ) as refused:
        parse_jsonrpc(jsonrpc(id=request_id))
    assert refused.value.request_id is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("operation", list(Operation), ids=lambda op: op.value)
def test_each_operation_is_named_by_its_jsonrpc_method(operation: Operation) -> None:
    params = {
        Operation.SEND_MESSAGE: {
            "message": {"messageId": "m", "role": 1, "parts": [{"text": "x"}]}
        },
        Operation.SEND_STREAMING_MESSAGE: {
            "message": {"messageId": "m", "role": 1, "parts": [{"text": "x"}]}
        },
        Operation.CREATE_PUSH_CONFIG: {"task_id": "t", "id": "c", "url": "https://h"},
        Operation.GET_PUSH_CONFIG: {"task_id": "t", "id": "c"},
        Operation.DELETE_PUSH_CONFIG: {"task_id": "t", "id": "c"},
        Operation.LIST_PUSH_CONFIGS: {"task_id": "t"},
        Operation.LIST_TASKS: {},
        Operation.GET_EXTENDED_CARD: {},
    }.get(operation, {"id": "t"})
    call = resolve_method(parse_jsonrpc(jsonrpc(operation.value, params)))
    assert call.operation is operation


def test_jsonrpc_method_names_are_the_pascal_case_names_of_the_spec() -> None:
    assert {operation.value for operation in Operation} == {
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "GetExtendedAgentCard",
    }


@pytest.mark.parametrize("method", ["NonExistentMethod", "message/send", "tasks/get", "getTask"])
def test_an_unknown_method_is_method_not_found(method: str) -> None:
    with pytest.raises(MethodNotFoundError) as missing:
        resolve_method(parse_jsonrpc(jsonrpc(method, {})))
    assert missing.value.code == -32601
    assert method in missing.value.message


def test_snake_case_params_are_accepted_as_the_kit_sends_them() -> None:
    params = {"context_id": "c", "page_size": 2, "history_length": 0, "include_artifacts": False}
    call = resolve_method(parse_jsonrpc(jsonrpc("ListTasks", params)))
    assert call.request == ListTasksRequest(
        context_id="c", page_size=2, history_length=0, include_artifacts=False
    )


def test_flattened_push_config_params_are_read_as_the_config() -> None:
    params = {
        "task_id": "t-1",
        "id": "c-1",
        "url": "https://hooks.example.com",
        "authentication": {"scheme": "Bearer", "credentials": "tok"},
    }
    call = resolve_method(parse_jsonrpc(jsonrpc("CreateTaskPushNotificationConfig", params)))
    assert call.request.to_wire() == {
        "id": "c-1",
        "taskId": "t-1",
        "url": "https://hooks.example.com",
        "authentication": {"scheme": "Bearer", "credentials": "tok"},
    }


@pytest.mark.parametrize(
    ("method", "params", "named"),
    [
        ("SendMessage", {}, "message: Field required"),
        ("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER"}}, "message.parts"),
        (
            "SendMessage",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}},
            "message.parts",
        ),
        (
            "SendMessage",
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{}]}},
            "message.parts.0",
        ),
        (
            "SendMessage",
            {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
            "message.messageId",
        ),
        (
            "SendMessage",
            {"message": {"messageId": "m", "role": 0, "parts": [{"text": "x"}]}},
            "message: role must be ROLE_USER or ROLE_AGENT",
        ),
        ("GetTask", {}, "id: Field required"),
        ("GetTask", {"id": "t", "historyLength": -1}, "historyLength"),
        ("ListTasks", {"pageSize": 500}, "pageSize"),
    ],
)
def test_invalid_params_name_the_field_path(method: str, params: Any, named: str) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        resolve_method(parse_jsonrpc(jsonrpc(method, params)))
    assert refused.value.code == -32602
    assert named in refused.value.message


# --- versions (spec 3.6) -------------------------------------------------------------


@pytest.mark.parametrize("header", ["1.0", "1.0.3", " 1.0 ", "1.0.0", "01.00"])
def test_version_1_0_is_served_whatever_the_patch(header: str) -> None:
    assert negotiate_version(header) == "1.0"


@pytest.mark.parametrize("header", [None, "", "   "])
def test_a_missing_or_empty_version_means_0_3_and_is_refused(header: str | None) -> None:
    with pytest.raises(
        VersionNotSupportedError, match=re.escape("0.3 (no A2A-Version header)")
    ) as refused:
        negotiate_version(header)
    assert refused.value.metadata["requestedVersion"] == "0.3"


@pytest.mark.parametrize("header", ["0.3", "0.3.0", "99.0", "1.1", "2.0"])
def test_an_unserved_version_is_refused(header: str) -> None:
    with pytest.raises(VersionNotSupportedError) as refused:
        negotiate_version(header)
    assert refused.value.code == -32009
    assert refused.value.http_status == 400


def test_a_refused_version_names_the_version_asked_for_and_those_served() -> None:
    with pytest.raises(VersionNotSupportedError) as refused:
        negotiate_version("99.0")
    assert refused.value.metadata == {"requestedVersion": "99.0", "supportedVersions": "1.0"}
    assert "99.0" in refused.value.message


@pytest.mark.parametrize("header", ["latest", "1", "v1.0", "1.0-beta", "1.0.3.4"])
def test_a_version_that_is_not_major_minor_is_refused(header: str) -> None:
    with pytest.raises(VersionNotSupportedError, match=re.escape("is not a Major.Minor version")):
        negotiate_version(header)


def test_a_server_may_serve_other_versions_when_told_to() -> None:
    assert negotiate_version("", supported=frozenset({"0.3", "1.0"})) == "0.3"


# --- server-sent events --------------------------------------------------------------


def test_an_event_is_one_data_line_and_a_blank_line() -> None:
    assert format_event('{"task":{"id":"t"}}') == b'data: {"task":{"id":"t"}}\n\n'


def test_an_event_with_an_id_puts_the_id_line_first() -> None:
    assert format_event("{}", event_id=12) == b"id: 12\ndata: {}\n\n"


def test_event_id_zero_is_still_sent() -> None:
    assert format_event("{}", event_id=0) == b"id: 0\ndata: {}\n\n"


@pytest.mark.parametrize("text", ["a\nb", "a\r\nb", "a\rb"])
def test_a_multi_line_payload_becomes_several_data_lines(text: str) -> None:
    assert format_event(text) == b"data: a\ndata: b\n\n"


def test_the_keepalive_is_a_comment_frame() -> None:
    assert KEEPALIVE.startswith(b":")
    assert KEEPALIVE.endswith(b"\n\n")
    assert b"data:" not in KEEPALIVE


def test_a_compact_json_event_reads_back_from_its_data_line() -> None:
    payload = json.dumps(
        {"statusUpdate": {"taskId": "t", "note": "line\nbreak"}}, separators=(",", ":")
    )
    frame = format_event(payload, event_id=3).decode()
    data_lines = [line for line in frame.split("\n") if line.startswith("data:")]
    assert len(data_lines) == 1
    assert json.loads(data_lines[0].removeprefix("data:").strip()) == json.loads(payload)

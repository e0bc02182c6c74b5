"""The gRPC binding on the wire: grpcio's own client against a live server, over HTTP/2.

grpcio's synchronous client runs on a worker thread; the server is the app on
hypercorn's trio worker in this process, on a free 127.0.0.1 port. Its
answers are compared with JSON-RPC's on the same server: one operation
behind both.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
import trio
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from a2a_trio import A2AApp
from a2a_trio.protocol import models
from a2a_trio.protocol.proto import a2a_pb2
from a2a_trio.protocol.protobuf import from_proto, proto_class
from a2a_trio.push import PushSettings
from a2a_trio.server.auth import BearerAuthenticator

from .agents import ScriptedExecutor
from .callers import BEARER, secured_card
from .conftest import LiveServer, live_server, make_card

SERVICE = "/lf.a2a.v1.A2AService/"
VERSION = (("a2a-version", "1.0"),)
TIMEOUT = 10.0


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


class Channel:
    """A grpcio channel to the live server; every call runs on a worker thread."""

    def __init__(self, server: LiveServer) -> None:
        self.target = server.url.removeprefix("http://")
        self._channel = grpc.insecure_channel(self.target)

    def close(self) -> None:
        self._channel.close()

    def _unary(self, method: str, response: str) -> Any:
        return self._channel.unary_unary(
            SERVICE + method,
            request_serializer=_serialize,
            response_deserializer=proto_class(response).FromString,
        )

    async def call(
        self,
        method: str,
        request: Message,
        response: str,
        *,
        metadata: tuple[tuple[str, str], ...] = VERSION,
        deadline: float = TIMEOUT,
        **options: Any,
    ) -> Any:
        rpc = self._unary(method, response)
        return await trio.to_thread.run_sync(
            lambda: rpc(request, metadata=metadata, timeout=deadline, **options)
        )

    async def failure(self, method: str, request: Message, response: str, **kw: Any) -> Any:
        """The grpc.RpcError the call ends with."""
        with pytest.raises(grpc.RpcError) as raised:
            await self.call(method, request, response, **kw)
        return raised.value

    def stream(
        self, method: str, request: Message, *, metadata: tuple[tuple[str, str], ...] = VERSION
    ) -> Any:
        rpc = self._channel.unary_stream(
            SERVICE + method,
            request_serializer=_serialize,
            response_deserializer=a2a_pb2.StreamResponse.FromString,
        )
        return rpc(request, metadata=metadata, timeout=TIMEOUT)


@asynccontextmanager
async def grpc_server(
    tmp_path: Path, configure: Callable[[A2AApp], None] | None = None, **app_kwargs: Any
) -> AsyncIterator[tuple[LiveServer, Channel]]:
    def scripted(app: A2AApp) -> None:
        card = make_card(
            capabilities=models.AgentCapabilities(
                streaming=True, push_notifications=True, extended_agent_card=True
            )
        )
        extended = make_card(name="Test Agent (extended)")
        app.mount("", card=card, executor=ScriptedExecutor(), extended_card=extended)

    async with live_server(tmp_path, configure or scripted, **app_kwargs) as server:
        channel = Channel(server)
        try:
            yield server, channel
        finally:
            channel.close()


def send_request(text: str, **configuration: Any) -> a2a_pb2.SendMessageRequest:
    request = a2a_pb2.SendMessageRequest(
        message=a2a_pb2.Message(
            message_id=str(uuid.uuid4()),
            role=a2a_pb2.ROLE_USER,
            parts=[a2a_pb2.Part(text=text)],
        )
    )
    for name, value in configuration.items():
        setattr(request.configuration, name, value)
    return request


def error_info(error: Any) -> error_details_pb2.ErrorInfo:
    """The ErrorInfo in the call's grpc-status-details-bin trailer."""
    [details] = [v for k, v in error.trailing_metadata() if k == "grpc-status-details-bin"]
    status = status_pb2.Status.FromString(details)
    assert status.code == error.code().value[0]
    assert status.message == error.details()
    [any_detail] = status.details
    info = error_details_pb2.ErrorInfo()
    assert any_detail.Unpack(info)
    return info


async def jsonrpc_task(server: LiveServer, task_id: str, prefix: str = "") -> dict[str, Any]:
    body = await server.jsonrpc("GetTask", {"id": task_id}, prefix=prefix)
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


# --- calls and their answers ------------------------------------------------------------------


async def test_send_message_answers_the_task_json_rpc_then_reads_alike(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (server, channel):
        answer = await channel.call("SendMessage", send_request("echo hi"), "SendMessageResponse")
        task = from_proto(answer.task, models.Task)
        assert task.status.state is models.TaskState.COMPLETED
        via_jsonrpc = models.Task.model_validate(await jsonrpc_task(server, task.id))
        via_grpc = await channel.call("GetTask", a2a_pb2.GetTaskRequest(id=task.id), "Task")
        assert from_proto(via_grpc, models.Task) == via_jsonrpc


async def test_a_stream_relays_each_event_as_one_message(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        call = channel.stream("SendStreamingMessage", send_request("echo streamed"))
        events = await trio.to_thread.run_sync(lambda: list(call))
        assert [event.WhichOneof("payload") for event in events] == [
            "task",
            "status_update",
            "artifact_update",
            "status_update",
        ]
        assert call.code() == grpc.StatusCode.OK


async def test_list_tasks_reads_as_on_json_rpc(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (server, channel):
        await channel.call("SendMessage", send_request("echo one"), "SendMessageResponse")
        listed = await channel.call("ListTasks", a2a_pb2.ListTasksRequest(), "ListTasksResponse")
        body = await server.jsonrpc("ListTasks", {})
        assert from_proto(
            listed, models.ListTasksResponse
        ) == models.ListTasksResponse.model_validate(body["result"])


async def test_push_configs_are_created_read_listed_and_deleted(tmp_path: Path) -> None:
    push = PushSettings(allowed_hosts=("127.0.0.1",))
    async with grpc_server(tmp_path, push_settings=push) as (server, channel):
        answer = await channel.call(
            "SendMessage",
            send_request("hold for push", return_immediately=True),
            "SendMessageResponse",
        )
        task_id = answer.task.id
        config = a2a_pb2.TaskPushNotificationConfig(
            task_id=task_id, url="http://127.0.0.1:9/hook", token="t0ken"
        )
        created = await channel.call(
            "CreateTaskPushNotificationConfig", config, "TaskPushNotificationConfig"
        )
        assert created.id and created.task_id == task_id and created.token == "t0ken"
        got = await channel.call(
            "GetTaskPushNotificationConfig",
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
            "TaskPushNotificationConfig",
        )
        assert got == created
        listed = await channel.call(
            "ListTaskPushNotificationConfigs",
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id),
            "ListTaskPushNotificationConfigsResponse",
        )
        assert list(listed.configs) == [created]
        body = await server.jsonrpc(
            "GetTaskPushNotificationConfig", {"taskId": task_id, "id": created.id}
        )
        assert from_proto(created, models.TaskPushNotificationConfig) == (
            models.TaskPushNotificationConfig.model_validate(body["result"])
        )
        await channel.call(
            "DeleteTaskPushNotificationConfig",
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
            "Empty",
        )
        gone = await channel.failure(
            "GetTaskPushNotificationConfig",
            a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id),
            "TaskPushNotificationConfig",
        )
        assert gone.code() == grpc.StatusCode.NOT_FOUND
        await server.jsonrpc("CancelTask", {"id": task_id})


async def test_the_extended_card_is_served_with_the_grpc_interface(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        card = await channel.call(
            "GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest(), "AgentCard"
        )
        assert card.name == "Test Agent (extended)"
        [grpc_interface] = [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
        assert grpc_interface.url == channel.target


# --- errors -------------------------------------------------------------------------------------


async def test_an_a2a_error_carries_its_status_and_error_info(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        error = await channel.failure("GetTask", a2a_pb2.GetTaskRequest(id="nope"), "Task")
        assert error.code() == grpc.StatusCode.NOT_FOUND
        info = error_info(error)
        assert (info.reason, info.domain) == ("TASK_NOT_FOUND", "a2a-protocol.org")
        assert dict(info.metadata) == {"taskId": "nope"}


async def test_cancel_of_a_completed_task_is_failed_precondition(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        answer = await channel.call("SendMessage", send_request("echo done"), "SendMessageResponse")
        error = await channel.failure(
            "CancelTask", a2a_pb2.CancelTaskRequest(id=answer.task.id), "Task"
        )
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info(error).reason == "TASK_NOT_CANCELABLE"


async def test_an_invalid_request_is_invalid_argument(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        request = send_request("echo x")
        request.message.role = a2a_pb2.ROLE_UNSPECIFIED
        error = await channel.failure("SendMessage", request, "SendMessageResponse")
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "role" in error.details()
        assert error_info(error).reason == "INVALID_PARAMS"


async def test_an_unsupported_version_is_unimplemented(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        error = await channel.failure(
            "GetTask",
            a2a_pb2.GetTaskRequest(id="t"),
            "Task",
            metadata=(("a2a-version", "0.3"),),
        )
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED
        assert error_info(error).reason == "VERSION_NOT_SUPPORTED"


async def test_a_call_without_a2a_version_is_served_as_1_0(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        answer = await channel.call(
            "SendMessage", send_request("echo v"), "SendMessageResponse", metadata=()
        )
        assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_an_unknown_method_is_unimplemented(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        error = await channel.failure("Teleport", a2a_pb2.GetTaskRequest(id="t"), "Task")
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_a_compressed_message_is_refused_as_unimplemented(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (_, channel):
        # grpcio sends a message compressed only when that makes it smaller.
        error = await channel.failure(
            "GetTask",
            a2a_pb2.GetTaskRequest(id="t" * 2000),
            "Task",
            compression=grpc.Compression.Gzip,
        )
        assert error.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "identity" in error.details()


async def test_extensions_come_from_the_a2a_extensions_metadata(tmp_path: Path) -> None:
    required = "https://example.com/ext/required"

    def configure(app: A2AApp) -> None:
        capabilities = models.AgentCapabilities(
            extensions=[models.AgentExtension(uri=required, required=True)]
        )
        app.mount("", card=make_card(capabilities=capabilities), executor=ScriptedExecutor())

    async with grpc_server(tmp_path, configure) as (_, channel):
        refused = await channel.failure(
            "SendMessage", send_request("echo x"), "SendMessageResponse"
        )
        assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_info(refused).reason == "EXTENSION_SUPPORT_REQUIRED"
        answer = await channel.call(
            "SendMessage",
            send_request("echo x"),
            "SendMessageResponse",
            metadata=(*VERSION, ("a2a-extensions", required)),
        )
        assert answer.task.status.state == a2a_pb2.TASK_STATE_COMPLETED


# --- authentication -----------------------------------------------------------------------------


async def test_bearer_tokens_come_from_the_authorization_metadata(tmp_path: Path) -> None:
    def configure(app: A2AApp) -> None:
        app.mount(
            "",
            card=secured_card({"bearer": BEARER}, [{"bearer": []}]),
            executor=ScriptedExecutor(),
            authenticators={"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})},
        )

    async with grpc_server(tmp_path, configure) as (_, channel):
        refused = await channel.failure(
            "ListTasks", a2a_pb2.ListTasksRequest(), "ListTasksResponse"
        )
        assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
        listed = await channel.call(
            "ListTasks",
            a2a_pb2.ListTasksRequest(),
            "ListTasksResponse",
            metadata=(*VERSION, ("authorization", "Bearer t-alice")),
        )
        assert list(listed.tasks) == []


# --- deadlines and departures -------------------------------------------------------------------


async def test_an_expired_deadline_ends_the_call_but_not_the_task(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (server, channel):
        error = await channel.failure(
            "SendMessage", send_request("hold on"), "SendMessageResponse", deadline=0.5
        )
        assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        listed = await server.jsonrpc("ListTasks", {})
        [task] = listed["result"]["tasks"]
        assert task["status"]["state"] == "TASK_STATE_WORKING"
        canceled = await server.jsonrpc("CancelTask", {"id": task["id"]})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_stream_the_client_leaves_lets_the_task_go_on(tmp_path: Path) -> None:
    async with grpc_server(tmp_path) as (server, channel):
        call = channel.stream("SendStreamingMessage", send_request("hold the line"))

        def first_then_leave() -> Any:
            first = next(call)
            call.cancel()
            return first

        first = await trio.to_thread.run_sync(first_then_leave)
        task_id = first.task.id
        await trio.sleep(0.2)
        task = await jsonrpc_task(server, task_id)
        assert task["status"]["state"] == "TASK_STATE_WORKING"
        canceled = await server.jsonrpc("CancelTask", {"id": task_id})
        assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"


# --- several agents on one port -----------------------------------------------------------------


def two_agents(app: A2AApp) -> None:
    app.mount("", card=make_card(name="Root"), executor=ScriptedExecutor(), name="root")
    app.mount("/team/two", card=make_card(name="Two"), executor=ScriptedExecutor(), name="two")


async def test_the_tenant_names_the_agent_by_its_prefix(tmp_path: Path) -> None:
    async with grpc_server(tmp_path, two_agents) as (server, channel):
        card = (await server.client.get("/team/two/.well-known/agent-card.json")).json()
        [interface] = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
        assert interface == {
            "url": channel.target,
            "protocolBinding": "GRPC",
            "tenant": "team/two",
            "protocolVersion": "1.0",
        }
        request = send_request("echo to two")
        request.tenant = interface["tenant"]
        answer = await channel.call("SendMessage", request, "SendMessageResponse")
        assert (await jsonrpc_task(server, answer.task.id, prefix="/team/two"))["id"]
        elsewhere = await server.jsonrpc("GetTask", {"id": answer.task.id})
        assert elsewhere["error"]["code"] == -32001  # the root agent has no such task


async def test_the_tenant_may_be_the_agents_name(tmp_path: Path) -> None:
    async with grpc_server(tmp_path, two_agents) as (server, channel):
        request = send_request("echo by name")
        request.tenant = "two"
        answer = await channel.call("SendMessage", request, "SendMessageResponse")
        assert (await jsonrpc_task(server, answer.task.id, prefix="/team/two"))["id"]


async def test_an_unknown_tenant_is_not_found(tmp_path: Path) -> None:
    async with grpc_server(tmp_path, two_agents) as (_, channel):
        request = a2a_pb2.GetTaskRequest(id="t", tenant="nobody")
        error = await channel.failure("GetTask", request, "Task")
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert "nobody" in error.details()


async def test_an_agent_mounted_without_grpc_is_not_reached(tmp_path: Path) -> None:
    def configure(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=ScriptedExecutor(), grpc=False)

    async with grpc_server(tmp_path, configure) as (_, channel):
        error = await channel.failure("GetTask", a2a_pb2.GetTaskRequest(id="t"), "Task")
        assert error.code() == grpc.StatusCode.NOT_FOUND

"""a2a-sdk 0.3 against a live a2a-trio server: every operation, on one binding.

Runs in a virtual environment of its own (a2a-sdk 0.3 and 1.x share a package
name), started by tests/test_v0_3_clients.py. Reads its instructions as JSON on
stdin: ``url`` (the server's base URL: the card is resolved the SDK's
default way), ``transport`` (``JSONRPC`` or ``HTTP+JSON``), ``webhook`` (a receiver's URL)
and ``v1_task`` (the id of a ``loop`` task a 1.0 client started). Prints what
it saw as one JSON object on stdout; the test file asserts on it. Nothing here
judges: the scenarios only record.

a2a-sdk 0.3's client has no list and no delete of push configs; those two
are built from the SDK's own 0.3 types and sent through its transport's
request function, exactly as its other calls are.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
import uuid
from contextlib import aclosing
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError
from a2a.types import (
    DeleteTaskPushNotificationConfigParams,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigResponse,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TextPart,
)
from google.protobuf.json_format import ParseDict


def message(text: str, task_id: str | None = None, context_id: str | None = None) -> Message:
    return Message(
        role=Role.user,
        message_id=uuid.uuid4().hex,
        parts=[Part(root=TextPart(text=text))],
        task_id=task_id,
        context_id=context_id,
    )


def dump(value: Any) -> Any:
    return value.model_dump(mode="json", exclude_none=True)


def event_name(event: Any) -> str:
    """``task``, ``message``, ``status-update:<state>`` or ``artifact-update``."""
    if isinstance(event, Message):
        return "message"
    _, update = event
    if update is None:
        return "task"
    if update.kind == "status-update":
        return f"status-update:{update.status.state.value}"
    return str(update.kind)


async def first_event_then_leave(client: Any, text: str) -> Any:
    """Stream ``text`` and leave after the first event (the task); returns that task."""
    async with aclosing(client.send_message(message(text))) as stream:
        async for task, _ in stream:
            return task
    raise AssertionError("the stream ended without an event")


async def resubscribed(client: Any, task_id: str, count: int | None = None) -> list[str]:
    """The events of a resubscription: ``count`` of them, or all until the stream ends."""
    names: list[str] = []
    async with aclosing(client.resubscribe(TaskIdParams(id=task_id))) as stream:
        async for event in stream:
            names.append(event_name(event))
            if count is not None and len(names) == count:
                break
    return names


async def stream_error(events: Any) -> dict[str, Any]:
    """How a stream that should fail failed: the JSON-RPC code, the HTTP status, or else what."""
    try:
        async with aclosing(events) as stream:
            async for _ in stream:
                pass
    except A2AClientJSONRPCError as error:
        return {"code": error.error.code}
    except A2AClientHTTPError as error:
        return {"status": error.status_code, "message": error.message[:200]}
    except Exception as error:  # recorded, so that the test shows what came instead
        return {"other": f"{type(error).__name__}: {error}"[:300]}
    return {"other": "no error"}


async def list_configs(client: Any, transport: str, task_id: str) -> list[dict[str, Any]]:
    wire = client._transport
    if transport == "JSONRPC":
        request = ListTaskPushNotificationConfigRequest(
            id=str(uuid.uuid4()), params=ListTaskPushNotificationConfigParams(id=task_id)
        )
        answer = await wire._send_request(request.model_dump(mode="json", exclude_none=True))
        parsed = ListTaskPushNotificationConfigResponse.model_validate(answer)
        return [dump(config) for config in parsed.root.result]  # type: ignore[union-attr]
    from a2a.grpc import a2a_pb2  # only in the SDK's own environment
    from a2a.utils import proto_utils

    answer = await wire._send_get_request(f"/v1/tasks/{task_id}/pushNotificationConfigs", {})
    parsed = a2a_pb2.ListTaskPushNotificationConfigResponse()
    ParseDict(answer, parsed)
    return [
        dump(proto_utils.FromProto.task_push_notification_config(config))
        for config in parsed.configs
    ]


async def delete_config(client: Any, transport: str, task_id: str, config_id: str) -> Any:
    wire = client._transport
    if transport == "JSONRPC":
        request = DeleteTaskPushNotificationConfigRequest(
            id=str(uuid.uuid4()),
            params=DeleteTaskPushNotificationConfigParams(
                id=task_id, push_notification_config_id=config_id
            ),
        )
        answer = await wire._send_request(request.model_dump(mode="json", exclude_none=True))
        return answer.get("result", answer.get("error"))
    response = await wire.httpx_client.delete(
        f"{wire.url}/v1/tasks/{task_id}/pushNotificationConfigs/{config_id}"
    )
    response.raise_for_status()
    return response.json()


async def main(instructions: dict[str, Any], seen: dict[str, Any]) -> None:
    """Run every scenario in order, recording into ``seen`` as it goes."""
    transport = instructions["transport"]
    async with httpx.AsyncClient(timeout=30.0) as http:
        card = await A2ACardResolver(http, instructions["url"]).get_agent_card()
        seen["card"] = dump(card)

        def client(*, streaming: bool) -> Any:
            config = ClientConfig(
                streaming=streaming, supported_transports=[transport], httpx_client=http
            )
            return ClientFactory(config).create(card)

        blocking, streaming = client(streaming=False), client(streaming=True)
        seen["endpoint"] = blocking._transport.url

        [(task, _)] = [event async for event in blocking.send_message(message("echo hello"))]
        seen["send"] = dump(task)
        seen["get"] = dump(await blocking.get_task(TaskQueryParams(id=task.id)))
        seen["get_history_1"] = dump(
            await blocking.get_task(TaskQueryParams(id=task.id, history_length=1))
        )
        try:
            await blocking.get_task(TaskQueryParams(id="no-such-task"))
        except A2AClientJSONRPCError as error:
            seen["get_unknown"] = {"code": error.error.code}
        except A2AClientHTTPError as error:
            seen["get_unknown"] = {"status": error.status_code}

        events = [event async for event in streaming.send_message(message("chunks"))]
        seen["stream"] = [event_name(event) for event in events]
        seen["stream_final"] = dump(events[-1][0])

        looping = await first_event_then_leave(streaming, "loop")
        seen["resubscribe"] = await resubscribed(streaming, looping.id, count=2)
        seen["cancel"] = dump(await blocking.cancel_task(TaskIdParams(id=looping.id)))
        seen["resubscribe_unknown"] = await stream_error(
            streaming.resubscribe(TaskIdParams(id="no-such-task"))
        )
        seen["stream_to_finished"] = await stream_error(
            streaming.send_message(message("echo again", task.id, task.context_id))
        )

        [(asked, _)] = [event async for event in blocking.send_message(message("ask"))]
        seen["ask"] = dump(asked)
        config = TaskPushNotificationConfig(
            task_id=asked.id,
            push_notification_config=PushNotificationConfig(
                id="hook", url=instructions["webhook"], token="sdk-0.3-token"
            ),
        )
        seen["push_set"] = dump(await blocking.set_task_callback(config))
        seen["push_get"] = dump(
            await blocking.get_task_callback(
                GetTaskPushNotificationConfigParams(id=asked.id, push_notification_config_id="hook")
            )
        )
        spare = config.model_copy(
            update={
                "push_notification_config": PushNotificationConfig(
                    id="spare", url=instructions["webhook"]
                )
            }
        )
        await blocking.set_task_callback(spare)
        seen["push_list"] = await list_configs(blocking, transport, asked.id)
        seen["push_delete"] = await delete_config(blocking, transport, asked.id, "spare")
        seen["push_list_after_delete"] = await list_configs(blocking, transport, asked.id)
        follow_up = message("Ada", task_id=asked.id, context_id=asked.context_id)
        [(answered, _)] = [event async for event in blocking.send_message(follow_up)]
        seen["follow_up"] = dump(answered)

        seen["extended_card"] = dump(await blocking.get_card())

        v1_task = instructions["v1_task"]
        seen["v1_task_resubscribe"] = await resubscribed(streaming, v1_task, count=2)
        seen["v1_task_get"] = dump(await blocking.get_task(TaskQueryParams(id=v1_task)))
        seen["v1_task_cancel"] = dump(await blocking.cancel_task(TaskIdParams(id=v1_task)))

        [(mine, _)] = [event async for event in blocking.send_message(message("echo from 0.3"))]
        seen["v0_3_task"] = mine.id


if __name__ == "__main__":
    report: dict[str, Any] = {}
    try:
        asyncio.run(main(json.load(sys.stdin), report))
    except Exception:  # the test shows where it stopped, with what came before
        report["error"] = traceback.format_exc()
    json.dump(report, sys.stdout)

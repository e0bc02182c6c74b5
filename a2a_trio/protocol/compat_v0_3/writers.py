"""The 0.3 JSON-RPC object shapes, written: 1.0 models in, 0.3 JSON values out.

What a 0.3 client reads in a JSON-RPC ``result`` (and in each SSE frame of a
0.3 stream): objects carry their ``kind``, states and roles are the schema's
lower-case strings, file parts nest their content under ``file``. Every
function returns plain JSON values (dicts, lists, strings), ready to dump on
one line. Pure.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from .._base import format_timestamp
from ..models import (
    Artifact,
    ListTaskPushNotificationConfigsResponse,
    Message,
    Part,
    SendMessageResponse,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from ._spellings import V0_3_ROLE, V0_3_STATE
from .readers import DATA_PART_COMPAT

__all__ = [
    "artifact_to_v0_3",
    "event_to_v0_3",
    "message_to_v0_3",
    "part_to_v0_3",
    "push_config_list_to_v0_3",
    "push_config_to_v0_3",
    "send_result_to_v0_3",
    "status_update_is_final",
    "task_to_v0_3",
]

JSON = dict[str, Any]


def put(wire: JSON, key: str, value: Any) -> None:
    """``wire[key] = value`` unless ``value`` is None (unset fields are not sent)."""
    # 0.3 leaves unset fields out, as 1.0 does.
    if value is not None:
        wire[key] = value


def part_to_v0_3(part: Part) -> JSON:
    """A TextPart, FilePart or DataPart; 1.0's media type and filename survive on files only."""
    wire: JSON
    if part.text is not None:
        wire = {"kind": "text", "text": part.text}
    elif part.raw is not None or part.url is not None:
        file: JSON = (
            {"bytes": base64.b64encode(part.raw).decode("ascii")}
            if part.raw is not None
            else {"uri": part.url}
        )
        put(file, "mimeType", part.media_type)
        put(file, "name", part.filename)
        wire = {"kind": "file", "file": file}
    elif isinstance(part.data, dict):
        wire = {"kind": "data", "data": part.data}
    else:
        # A 0.3 data part holds an object: other JSON values go wrapped, marked
        # the way a2a-sdk marks them so its readers unwrap them too.
        metadata = {**(part.metadata or {}), DATA_PART_COMPAT: True}
        return {"kind": "data", "data": {"value": part.data}, "metadata": metadata}
    put(wire, "metadata", part.metadata)
    return wire


def message_to_v0_3(message: Message) -> JSON:
    wire: JSON = {
        "kind": "message",
        "messageId": message.message_id,
        "role": V0_3_ROLE[message.role],
        "parts": [part_to_v0_3(part) for part in message.parts],
    }
    put(wire, "contextId", message.context_id)
    put(wire, "taskId", message.task_id)
    put(wire, "metadata", message.metadata)
    put(wire, "extensions", message.extensions)
    put(wire, "referenceTaskIds", message.reference_task_ids)
    return wire


def status_json(
    status: TaskStatus, states: Mapping[TaskState, str], write_message: Callable[[Message], JSON]
) -> JSON:
    """A TaskStatus in either 0.3 shape: ``states`` spells the state, ``write_message`` the rest."""
    wire: JSON = {"state": states[status.state]}
    if status.message is not None:
        wire["message"] = write_message(status.message)
    if status.timestamp is not None:
        wire["timestamp"] = format_timestamp(status.timestamp)
    return wire


def artifact_json(artifact: Artifact, write_part: Callable[[Part], JSON]) -> JSON:
    """An Artifact in either 0.3 shape (they differ in their parts only)."""
    wire: JSON = {
        "artifactId": artifact.artifact_id,
        "parts": [write_part(part) for part in artifact.parts],
    }
    put(wire, "name", artifact.name)
    put(wire, "description", artifact.description)
    put(wire, "metadata", artifact.metadata)
    put(wire, "extensions", artifact.extensions)
    return wire


def _status_to_v0_3(status: TaskStatus) -> JSON:
    return status_json(status, V0_3_STATE, message_to_v0_3)


def artifact_to_v0_3(artifact: Artifact) -> JSON:
    return artifact_json(artifact, part_to_v0_3)


def task_to_v0_3(task: Task) -> JSON:
    wire: JSON = {
        "kind": "task",
        "id": task.id,
        # Required by the 0.3 schema (a2a-sdk's 0.3 Task refuses a task without it).
        "contextId": task.context_id or "",
        "status": _status_to_v0_3(task.status),
    }
    if task.artifacts is not None:
        wire["artifacts"] = [artifact_to_v0_3(artifact) for artifact in task.artifacts]
    if task.history is not None:
        wire["history"] = [message_to_v0_3(message) for message in task.history]
    put(wire, "metadata", task.metadata)
    return wire


def status_update_is_final(event: TaskStatusUpdateEvent) -> bool:
    """The 0.3 ``final`` flag: true on the last event of a stream.

    A 1.0 stream ends at a final state and also when the task waits for the
    client (input or auth required); ``final`` says so to a 0.3 reader.
    """
    state = event.status.state
    return state.is_final or state.is_interrupted


def _status_update_to_v0_3(event: TaskStatusUpdateEvent) -> JSON:
    wire: JSON = {
        "kind": "status-update",
        "taskId": event.task_id,
        "contextId": event.context_id,
        "status": _status_to_v0_3(event.status),
        "final": status_update_is_final(event),
    }
    put(wire, "metadata", event.metadata)
    return wire


def _artifact_update_to_v0_3(event: TaskArtifactUpdateEvent) -> JSON:
    wire: JSON = {
        "kind": "artifact-update",
        "taskId": event.task_id,
        "contextId": event.context_id,
        "artifact": artifact_to_v0_3(event.artifact),
    }
    put(wire, "append", event.append)
    put(wire, "lastChunk", event.last_chunk)
    put(wire, "metadata", event.metadata)
    return wire


def event_to_v0_3(response: StreamResponse) -> JSON:
    """The ``result`` of one 0.3 stream frame (``SendStreamingMessageSuccessResponse``)."""
    if response.task is not None:
        return task_to_v0_3(response.task)
    if response.message is not None:
        return message_to_v0_3(response.message)
    if response.status_update is not None:
        return _status_update_to_v0_3(response.status_update)
    assert response.artifact_update is not None
    return _artifact_update_to_v0_3(response.artifact_update)


def send_result_to_v0_3(response: SendMessageResponse) -> JSON:
    """The ``result`` of ``message/send``: the task, or the agent's direct message."""
    if response.message is not None:
        return message_to_v0_3(response.message)
    assert response.task is not None
    return task_to_v0_3(response.task)


def push_config_to_v0_3(config: TaskPushNotificationConfig) -> JSON:
    """A 0.3 ``TaskPushNotificationConfig``: the config nested under its task."""
    inner: JSON = {"url": config.url}
    put(inner, "id", config.id)
    put(inner, "token", config.token)
    if config.authentication is not None:
        authentication: JSON = {"schemes": [config.authentication.scheme]}
        put(authentication, "credentials", config.authentication.credentials)
        inner["authentication"] = authentication
    return {"taskId": config.task_id or "", "pushNotificationConfig": inner}


def push_config_list_to_v0_3(response: ListTaskPushNotificationConfigsResponse) -> list[JSON]:
    """The ``result`` of ``tasks/pushNotificationConfig/list``: a bare array.

    0.3 has no pages, so ``nextPageToken`` has nowhere to go: the caller lists
    every config (one page large enough) before rendering.
    """
    return [push_config_to_v0_3(config) for config in response.configs]

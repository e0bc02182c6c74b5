"""The client's JSON transports: JSON-RPC and HTTP+JSON over one httpx client.

A transport makes unary calls and reads event streams (SSE) of one binding,
and turns the agent's errors back into the typed protocol errors.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from ..protocol import (
    A2AError,
    AgentInterface,
    InternalError,
    InvalidAgentResponseError,
    Operation,
    error_from_code,
)
from ..protocol.operations import rest_request
from ..protocol.sse import SSEDecoder

__all__ = ["JsonRpcTransport", "RestTransport", "Transport", "error_from_payload", "parsed"]

M = TypeVar("M", bound=BaseModel)


def error_from_payload(document: Any, status: int | None = None) -> A2AError:
    """Rebuild the typed error of a JSON-RPC error object or an AIP-193 body."""
    if isinstance(document, dict) and isinstance(document.get("error"), dict):
        error = document["error"]
        details = error.get("data") if "data" in error else error.get("details")
        reason = None
        if isinstance(details, list):
            for detail in details:
                if isinstance(detail, dict) and detail.get("reason"):
                    reason = str(detail["reason"])
                    break
        code = error.get("code") if status is None else None
        rebuilt = error_from_code(code, str(error.get("message") or ""), reason=reason)
        if reason is None and status == 404:
            rebuilt = error_from_code(-32001, rebuilt.message)
        return rebuilt
    return InternalError(f"the agent answered HTTP {status} without an A2A error")


class Transport:
    """One binding: unary calls and event streams over one httpx client."""

    def __init__(self, http: httpx.AsyncClient, interface: AgentInterface) -> None:
        self.http = http
        self.url = interface.url.rstrip("/")

    async def call(self, operation: Operation, request: BaseModel) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Let go of what the transport holds beyond the httpx client (nothing, mostly)."""

    def stream(
        self, operation: Operation, request: BaseModel, headers: Mapping[str, str]
    ) -> AsyncIterator[tuple[str | None, Any]]:
        raise NotImplementedError

    @staticmethod
    async def _events(response: httpx.Response) -> AsyncIterator[tuple[str | None, Any]]:
        decoder = SSEDecoder()
        async for line in response.aiter_lines():
            event = decoder.feed(line.rstrip("\r"))
            if event is None:
                continue
            try:
                document = json.loads(event.data)
            except ValueError:
                raise InvalidAgentResponseError("an SSE event is not JSON") from None
            yield event.id, document


class JsonRpcTransport(Transport):
    """JSON-RPC 2.0: every call a POST to the interface's URL."""

    _ids = itertools.count(1)

    def _envelope(self, operation: Operation, request: BaseModel) -> dict[str, Any]:
        params = request.model_dump(mode="json", exclude_none=True, by_alias=True)
        return {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": operation.value,
            "params": params,
        }

    @staticmethod
    def _result(document: Any) -> Any:
        if not isinstance(document, dict):
            raise InvalidAgentResponseError("a JSON-RPC response must be an object")
        if "error" in document:
            raise error_from_payload(document)
        if "result" not in document:
            raise InvalidAgentResponseError("a JSON-RPC response without result or error")
        return document["result"]

    async def call(self, operation: Operation, request: BaseModel) -> Any:
        response = await self.http.post(self.url, json=self._envelope(operation, request))
        try:
            document = response.json()
        except ValueError:
            raise error_from_payload(None, response.status_code) from None
        return self._result(document)

    async def stream(
        self, operation: Operation, request: BaseModel, headers: Mapping[str, str]
    ) -> AsyncIterator[tuple[str | None, Any]]:
        body = self._envelope(operation, request)
        async with self.http.stream(
            "POST", self.url, json=body, headers={"Accept": "text/event-stream", **headers}
        ) as response:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()
                self._result(response.json())
                raise InvalidAgentResponseError("a streaming call answered without a stream")
            async for event_id, document in self._events(response):
                yield event_id, self._result(document)


class RestTransport(Transport):
    """HTTP+JSON: every operation its method and path (see protocol.operations)."""

    async def call(self, operation: Operation, request: BaseModel) -> Any:
        rest = rest_request(operation, request)
        response = await self.http.request(
            rest.method, self.url + rest.path, params=rest.query or None, json=rest.body
        )
        return self._document(response)

    @staticmethod
    def _document(response: httpx.Response) -> Any:
        try:
            document = response.json() if response.content else {}
        except ValueError:
            document = None
        if response.status_code >= 400:
            raise error_from_payload(document, response.status_code)
        if document is None:
            raise InvalidAgentResponseError("the agent's answer is not JSON")
        return document

    async def stream(
        self, operation: Operation, request: BaseModel, headers: Mapping[str, str]
    ) -> AsyncIterator[tuple[str | None, Any]]:
        rest = rest_request(operation, request)
        async with self.http.stream(
            rest.method,
            self.url + rest.path,
            params=rest.query or None,
            json=rest.body,
            headers={"Accept": "text/event-stream", **headers},
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                self._document(response)
            async for event_id, document in self._events(response):
                yield event_id, document


def parsed(cls: type[M], document: Any) -> M:
    """``document`` as a ``cls``; InvalidAgentResponseError if it is not one."""
    try:
        return cls.model_validate(document)
    except ValidationError as error:
        raise InvalidAgentResponseError(f"unexpected {cls.__name__}: {error}") from None

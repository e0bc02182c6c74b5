"""Receivers for the OpenTelemetry tests, each an HTTP server on 127.0.0.1 in a thread.

:class:`OtlpReceiver` is an OTLP/HTTP collector as far as traces go: it
decodes each ``POST /v1/traces`` body as an ``ExportTraceServiceRequest``
(opentelemetry-proto) and keeps its spans. :class:`WebhookReceiver` keeps
every webhook POST with its headers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import trio


@dataclass(frozen=True)
class ExportedSpan:
    """One span as an exporter sent it."""

    service: str
    #: The resource's attributes (the exporting process's).
    resource: dict[str, Any]
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int


@dataclass
class Posted:
    """One request a receiver took: its path, headers (lower-case names) and body."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class _Server:
    kept: list[Posted] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    status: int = 200

    def keep(self, posted: Posted) -> None:
        with self.lock:
            self.kept.append(posted)

    def taken(self) -> list[Posted]:
        with self.lock:
            return list(self.kept)


@contextmanager
def _serving(server: _Server) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {name.lower(): value for name, value in self.headers.items()}
            server.keep(Posted(self.path, headers, body))
            self.send_response(server.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_address[1]}"
    finally:
        http.shutdown()
        http.server_close()
        thread.join(5)


class WebhookReceiver:
    """Webhook POSTs, as they arrived."""

    def __init__(self) -> None:
        self._server = _Server()
        self.url = ""

    @contextmanager
    def serving(self) -> Iterator[WebhookReceiver]:
        with _serving(self._server) as url:
            self.url = url + "/hook"
            yield self

    @property
    def posts(self) -> list[Posted]:
        return self._server.taken()


def _value(any_value: Any) -> Any:
    which = any_value.WhichOneof("value")
    return None if which is None else getattr(any_value, which)


def decode_spans(body: bytes) -> list[ExportedSpan]:
    """The spans of one ExportTraceServiceRequest (OTLP/HTTP, protobuf)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ExportedSpan(
                        service=str(resource.get("service.name", "")),
                        resource=resource,
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        status_code=span.status.code,
                    )
                )
    return spans


class OtlpReceiver:
    """An OTLP/HTTP receiver of traces: what every exporter sent, decoded."""

    def __init__(self) -> None:
        self._server = _Server()
        self.endpoint = ""

    @contextmanager
    def serving(self) -> Iterator[OtlpReceiver]:
        with _serving(self._server) as url:
            self.endpoint = url
            yield self

    @property
    def requests(self) -> list[Posted]:
        """Every export request as it arrived."""
        return self._server.taken()

    @property
    def spans(self) -> list[ExportedSpan]:
        spans = []
        for posted in self._server.taken():
            assert posted.path == "/v1/traces", posted.path
            assert posted.headers.get("content-type") == "application/x-protobuf"
            spans.extend(decode_spans(posted.body))
        return spans

    def of_trace(self, trace_id: str) -> list[ExportedSpan]:
        return [span for span in self.spans if span.trace_id == trace_id]


async def wait_until(check: Callable[[], bool], within: float = 20.0) -> None:
    """Return once ``check()`` holds (looked at every 20 ms); fail after ``within`` s."""
    with trio.fail_after(within):
        while not check():  # noqa: ASYNC110 (polled: spans and POSTs arrive from other threads)
            await trio.sleep(0.02)

"""The spans, made with OpenTelemetry: imported only once tracing is on.

:class:`Tracing` is what the hooks of :mod:`a2a_trio.telemetry` call. Spans
are current (``opentelemetry.context``) while what they cover runs, so that
whatever runs inside (an agent's own instrumented calls, an A2AClient call to
another agent) joins the trace. Trio tasks copy the context of the task that
starts them, so an execution started by a request runs in that request's
trace; what crosses a task boundary otherwise (the recorder's rounds, the
push worker's attempts, a queued execution) is given its parent here.
"""

from __future__ import annotations

import contextlib
import functools
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from ..protocol import A2AError

__all__ = ["SERVICE", "Tracing"]

T = TypeVar("T")

#: The A2A service of a2a.proto: the ``rpc.service`` of every operation's span.
SERVICE = "a2a.v1.A2AService"
#: Which binding a client's interface names (``protocol_binding``).
_CLIENT_BINDINGS = {"JSONRPC": "jsonrpc", "HTTP+JSON": "rest", "GRPC": "grpc"}
#: Tasks whose recent store rounds queued webhooks, for the attempts' parents.
_PUSHED_TASKS = 10_000
_PUSHED_ROUNDS = 16
_MAX_LINKS = 32


def _version() -> str:
    try:
        return version("a2a-trio")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


class _RequestHeaders(Getter[Any]):
    """Reads a server request's headers (gRPC metadata are HTTP/2 headers too)."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        values: list[str] = carrier.header_values(key)
        return values or None

    def keys(self, carrier: Any) -> list[str]:
        return list(carrier.headers)


_REQUEST_HEADERS = _RequestHeaders()


def _has_trace(headers: Any) -> bool:
    """Whether ``headers`` carry a trace context already (set for this very call)."""
    fields = propagate.get_global_textmap().fields
    return any(field in headers for field in fields if field != "baggage")


async def _inject_request(request: Any) -> None:
    """httpx request hook: the current trace context, unless the call set its own."""
    if not _has_trace(request.headers):
        propagate.inject(request.headers)


def _rpc_attributes(method: str, binding: str, request: Any) -> dict[str, Any]:
    """What a server span and a client span of one operation both say of it."""
    attributes: dict[str, Any] = {
        "a2a.method": method,
        "a2a.binding": binding,
        "rpc.service": SERVICE,
        "rpc.method": method,
        **_request_ids(request),
    }
    if binding != "rest":
        attributes["rpc.system"] = binding
    return attributes


def _request_ids(request: Any) -> dict[str, str]:
    """``a2a.task.id`` and ``a2a.context.id`` of an operation's request, where it names them."""
    ids: dict[str, str] = {}
    message = getattr(request, "message", None)
    if message is not None:
        task_id, context_id = message.task_id, message.context_id
    else:
        task_id = getattr(request, "task_id", None) or getattr(request, "id", None)
        context_id = getattr(request, "context_id", None)
    if task_id:
        ids["a2a.task.id"] = str(task_id)
    if context_id:
        ids["a2a.context.id"] = str(context_id)
    return ids


def _answer_ids(span: Span, outcome: Any) -> None:
    """The task (or message) an operation answered with: its ids, once known.

    ``outcome`` is a model (the server's) or its ProtoJSON document (the client's).
    """
    if isinstance(outcome, dict):
        answer = outcome.get("task") or outcome.get("message") or outcome
        is_task = "status" in answer
        task_id = answer.get("id") if is_task else answer.get("taskId")
        context_id = answer.get("contextId")
    else:
        answer = getattr(outcome, "task", None) or getattr(outcome, "message", None) or outcome
        if hasattr(answer, "status") and getattr(answer, "id", None):  # a Task
            task_id, context_id = answer.id, answer.context_id
        else:
            task_id = getattr(answer, "task_id", None)
            context_id = getattr(answer, "context_id", None)
    if task_id:
        span.set_attribute("a2a.task.id", str(task_id))
    if context_id:
        span.set_attribute("a2a.context.id", str(context_id))


def _record_error(span: Span, error: Exception) -> None:
    if isinstance(error, A2AError):
        # A protocol error: its reason, not a traceback (nothing went wrong here).
        span.set_attribute("error.type", error.spec.reason)
        span.set_status(Status(StatusCode.ERROR, error.message))
        return
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


class _Attempt:
    """A webhook attempt's span, told how the attempt ended."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def answered(self, outcome: str, status: int | None, error: str | None) -> None:
        self.span.set_attribute("a2a.push.outcome", outcome)
        if status is not None:
            self.span.set_attribute("http.response.status_code", status)
        if outcome != "delivered":
            self.span.set_status(Status(StatusCode.ERROR, error or outcome))


class Tracing:
    """The spans of one process, made with one tracer provider."""

    def __init__(self, provider: Any) -> None:
        self.tracer = provider.get_tracer("a2a_trio", _version())
        #: Each running execution's span, as the parent of its store rounds.
        self._executions: WeakKeyDictionary[Any, Context] = WeakKeyDictionary()
        #: (agent, task) -> [(first sequence, round span)]: a webhook attempt's parent.
        self._pushed: OrderedDict[tuple[str, str], list[tuple[int, Context]]] = OrderedDict()

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        parent: Context | None,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: Sequence[Link] = (),
        *,
        current: bool = True,
    ) -> Iterator[Span]:
        """A span, current while the block runs; an exception the block raises is recorded.

        ``parent`` None: the current context's span. A cancellation (or any
        BaseException that is no Exception) ends the span as it is.
        ``current`` False: the span is not made current (a block that yields,
        in a generator, runs partly in its consumer's context).
        """
        span = self.tracer.start_span(
            name, context=parent, kind=kind, attributes=attributes, links=links
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent)) if current else None
        try:
            yield span
        except Exception as error:
            _record_error(span, error)
            raise
        finally:
            if token is not None:
                otel_context.detach(token)
            span.end()

    # --- the server's operations ------------------------------------------------------

    def operation(
        self,
        dispatch: Callable[[], Awaitable[T]],
        request: Any,
        mount: Any,
        call: Any,
        version: str,
        binding: str | None,
    ) -> Callable[[], Awaitable[T]]:
        return functools.partial(self._operation, dispatch, request, mount, call, version, binding)

    async def _operation(
        self,
        dispatch: Callable[[], Awaitable[T]],
        request: Any,
        mount: Any,
        call: Any,
        version: str,
        binding: str | None,
    ) -> T:
        if binding is None:  # a JSON binding: its route says which (see A2AApp)
            below = request.path[len(mount.prefix) :]
            binding = "jsonrpc" if below in ("/jsonrpc", "/jsonrpc/") else "rest"
        method = call.operation.value
        attributes = _rpc_attributes(method, binding, call.request)
        attributes["a2a.agent"] = mount.name
        attributes["a2a.protocol.version"] = version
        parent = propagate.extract(request, getter=_REQUEST_HEADERS)
        with self.span(f"{SERVICE}/{method}", parent, SpanKind.SERVER, attributes) as span:
            outcome = await dispatch()
            _answer_ids(span, outcome)
            return outcome

    # --- executions and their rounds ----------------------------------------------------

    @contextlib.contextmanager
    def execution(self, execution: Any, agent: str) -> Iterator[None]:
        context = execution.context
        attributes: dict[str, Any] = {
            "a2a.agent": agent,
            "a2a.task.id": context.task_id,
            "a2a.execution.continuing": bool(execution.continuing),
        }
        if context.context_id:
            attributes["a2a.context.id"] = context.context_id
        purpose = execution.purpose
        with self.span(f"a2a.{purpose}", None, SpanKind.INTERNAL, attributes) as span:
            self._executions[execution] = trace.set_span_in_context(span)
            yield

    @contextlib.contextmanager
    def store_round(
        self, agent: str, round: Any, entries: Sequence[tuple[Any, Any, Any]]
    ) -> Iterator[None]:
        parent: Context | None = None
        links: list[Link] = []
        seen: set[int] = set()
        for _, execution, _ in entries:
            if id(execution) in seen:
                continue
            seen.add(id(execution))
            made = self._executions.get(execution)
            if made is None:
                continue
            if parent is None:
                parent = made
            elif len(links) < _MAX_LINKS:
                links.append(Link(trace.get_current_span(made).get_span_context()))
        shares = round.shares
        attributes: dict[str, Any] = {
            "a2a.agent": agent,
            "a2a.store.tasks": len(shares),
            "a2a.store.events": sum(len(share.events) for share in shares),
        }
        if len(shares) == 1:
            attributes["a2a.task.id"] = shares[0].task_id
        with self.span("a2a.store.record", parent, SpanKind.INTERNAL, attributes, links) as span:
            yield
            if round.push:
                self._remember_pushed(agent, shares, trace.set_span_in_context(span))

    def _remember_pushed(self, agent: str, shares: Sequence[Any], made: Context) -> None:
        pushed = self._pushed
        for share in shares:
            if not share.events:
                continue
            key = (agent, share.task_id)
            rounds = pushed.pop(key, [])
            rounds.append((share.events[0].seq, made))
            pushed[key] = rounds[-_PUSHED_ROUNDS:]
        while len(pushed) > _PUSHED_TASKS:
            pushed.popitem(last=False)

    def _pushed_by(self, agent: str, task_id: str, seq: int) -> Context | None:
        """The span of the round that recorded event ``seq`` of the task, if remembered."""
        for first, made in reversed(self._pushed.get((agent, task_id), ())):
            if first <= seq:
                return made
        return None

    # --- webhooks -------------------------------------------------------------------------

    @contextlib.contextmanager
    def webhook_attempt(
        self, notification: Any, attempt: int, host: str, port: int, headers: dict[str, str]
    ) -> Iterator[_Attempt]:
        lane = notification.lane
        attributes: dict[str, Any] = {
            "a2a.agent": lane.agent,
            "a2a.task.id": lane.task_id,
            "a2a.push.config.id": lane.config_id,
            "a2a.push.notification.id": notification.notification_id,
            "a2a.push.event.seq": notification.seq,
            "a2a.push.attempt": attempt,
            "http.request.method": "POST",
            "server.address": host,
            "server.port": port,
        }
        parent = self._pushed_by(lane.agent, lane.task_id, notification.seq)
        with self.span("a2a.webhook.attempt", parent, SpanKind.CLIENT, attributes) as span:
            propagate.inject(headers)
            yield _Attempt(span)

    # --- queued executions --------------------------------------------------------------

    def carry(self, payload: Any) -> None:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        if carrier:
            payload["trace"] = carrier

    def adopt(self, payload: Mapping[str, Any]) -> None:
        """The calling task (a worker's run of one queued execution) continues its trace.

        Attached for the rest of the task, which is the execution's: what it
        starts (the execution, its rounds) copies the context from it.
        """
        carrier = payload.get("trace")
        if isinstance(carrier, dict):
            otel_context.attach(propagate.extract(carrier))

    # --- the client ----------------------------------------------------------------------

    def inject(self, headers: Any) -> None:
        if not _has_trace(headers):
            propagate.inject(headers)

    def client_transport(self, transport: T, binding: str, url: str) -> T:
        return cast(T, _TracedTransport(self, transport, binding, url))

    def client_span(
        self, operation: Any, binding: str, url: str, request: Any, *, current: bool = True
    ) -> contextlib.AbstractContextManager[Span]:
        method = operation.value
        parts = urlsplit(url if "://" in url else f"//{url}")
        attributes = _rpc_attributes(method, binding, request)
        if parts.hostname:
            attributes["server.address"] = parts.hostname
        if parts.port:
            attributes["server.port"] = parts.port
        return self.span(f"{SERVICE}/{method}", None, SpanKind.CLIENT, attributes, current=current)


class _TracedTransport:
    """A client transport whose calls each run in a client span, sent along with them."""

    def __init__(self, tracing: Tracing, inner: Any, binding: str, url: str) -> None:
        self._tracing = tracing
        self._inner = inner
        self._binding = _CLIENT_BINDINGS.get(binding, binding.lower())
        self._url = url
        http = getattr(inner, "http", None)
        if http is not None and self._binding != "grpc":
            # The JSON bindings' requests go through the httpx client: its
            # request hook sends the current context (the call's span).
            hooks = http.event_hooks
            if _inject_request not in hooks.get("request", []):
                requests = [*hooks.get("request", []), _inject_request]
                http.event_hooks = {**hooks, "request": requests}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def call(self, operation: Any, request: Any) -> Any:
        with self._tracing.client_span(operation, self._binding, self._url, request) as span:
            answer = await self._inner.call(operation, request)
            _answer_ids(span, answer)
            return answer

    async def stream(
        self, operation: Any, request: Any, headers: Mapping[str, str]
    ) -> AsyncIterator[Any]:
        # Not made current: a generator's context is its consumer's. The span
        # travels in the headers; it ends when the stream does.
        tracing = self._tracing
        with tracing.client_span(
            operation, self._binding, self._url, request, current=False
        ) as span:
            carried = dict(headers)
            propagate.inject(carried, context=trace.set_span_in_context(span))
            events = self._inner.stream(operation, request, carried)
            # Closed with this generator, not left to the garbage collector.
            async with contextlib.aclosing(events):
                async for item in events:
                    yield item

    async def aclose(self) -> None:
        await self._inner.aclose()

"""OpenTelemetry traces: on when configured, nothing at all when not.

Tracing is on in a process once :func:`configure` finds the ``[otel]``
extra installed and the environment asking for traces
(``OTEL_TRACES_EXPORTER`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``; every other
``OTEL_*`` variable is read by the OpenTelemetry SDK as it documents), or once
a program hands its own provider to :func:`use_tracer_provider`. The app
calls :func:`configure` when it starts serving or working.

The rest of a2a-trio calls the hooks below at a few fixed points: the
operation (both JSON bindings and gRPC), the execution, the store round, the
webhook attempt, the queued execution's payload and the client's calls.
Until tracing is on, each hook is a test of one module global and returns
what it was given, or a shared no-op context manager: no OpenTelemetry
module is imported and nothing is allocated. docs/observability.md lists
the spans and their attributes.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .tracing import Tracing

__all__ = [
    "configure",
    "enabled",
    "use_tracer_provider",
]

log = logging.getLogger("a2a_trio.telemetry")

T = TypeVar("T")

#: The tracing in force (None: off, every hook a no-op).
_tracing: Tracing | None = None
#: Whether the environment asked for traces that could not be had (said once).
_refused = False


class WebhookAttempt(Protocol):
    """What a webhook attempt's span is told of its end."""

    def answered(self, outcome: str, status: int | None, error: str | None) -> None:
        """The attempt ended ``outcome`` (``delivered``, ``retry``, ``failed``)."""


class _Untraced:
    def answered(self, outcome: str, status: int | None, error: str | None) -> None:
        pass


#: What the context-manager hooks return while tracing is off: one shared
#: instance each, so that an untraced request allocates nothing for them.
_NOTHING: AbstractContextManager[None] = contextlib.nullcontext()
_UNTRACED_ATTEMPT: AbstractContextManager[WebhookAttempt] = contextlib.nullcontext(_Untraced())


def enabled() -> bool:
    """Whether this process makes spans."""
    return _tracing is not None


def wants_traces(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``environ`` asks for traces (read without importing OpenTelemetry).

    ``OTEL_TRACES_EXPORTER`` (other than ``none``) or an OTLP endpoint
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, or its traces-only twin) does, unless
    ``OTEL_SDK_DISABLED`` is ``true``.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip()
    if exporters:
        return exporters.lower() != "none"
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    )


def configure() -> bool:
    """Turn tracing on if the environment asks for it and the ``[otel]`` extra is here.

    Idempotent; returns whether tracing is on. The tracer provider is the
    global one when a program (or ``opentelemetry-instrument``) set one;
    otherwise one is built from the ``OTEL_*`` variables as the SDK's own
    auto-configuration builds it (OTLP over HTTP/protobuf unless
    ``OTEL_EXPORTER_OTLP_PROTOCOL`` says ``grpc``) and made the global one,
    so that an agent's own instrumented libraries export through it too.
    """
    global _refused
    if _tracing is not None:
        return True
    if not wants_traces():
        return False
    try:
        from .setup import environment_provider
    except ImportError as missing:
        if not _refused:
            _refused = True
            log.warning(
                "OTEL_* variables ask for traces but OpenTelemetry is not installed"
                " (pip install 'a2a-trio[otel]'); no traces are made: %s",
                missing,
            )
        return False
    try:
        provider = environment_provider()
    except Exception as error:  # a bad OTEL_* value: serve on, untraced, and say why
        if not _refused:
            _refused = True
            log.error("OpenTelemetry not configured, no traces are made: %s", error)
        return False
    use_tracer_provider(provider)
    return True


def use_tracer_provider(provider: Any) -> None:
    """Trace with ``provider`` (an ``opentelemetry.trace.TracerProvider``) from now on.

    For a program that builds its own provider in code: call it before the
    app starts serving (the environment is then not consulted). ``None``
    turns tracing off again.
    """
    global _tracing
    if provider is None:
        _tracing = None
        return
    from .tracing import Tracing

    _tracing = Tracing(provider)


# --- hooks: each a no-op while tracing is off ---------------------------------------


class Headers(Protocol):
    """A request's headers, as the server's bindings read them."""

    path: str

    @property
    def headers(self) -> dict[str, str]:
        """Every header, by lower-case name."""
        ...

    def header_values(self, name: str) -> list[str]:
        """Every value of header ``name`` (any case)."""
        ...


def operation(
    dispatch: Callable[[], Awaitable[T]],
    request: Headers,
    mount: Any,
    call: Any,
    version: str,
    binding: str | None = None,
) -> Callable[[], Awaitable[T]]:
    """``dispatch`` run in the span of the protocol operation ``call`` to ``mount``'s agent.

    The span continues the trace of the request's ``traceparent``. Without
    ``binding`` the request's path says which JSON binding it came on.
    """
    if _tracing is None:
        return dispatch
    return _tracing.operation(dispatch, request, mount, call, version, binding)


def execution(execution: Any, agent: str) -> AbstractContextManager[None]:
    """The span an execution's ``execute`` (or ``cancel``) runs in, current inside it."""
    if _tracing is None:
        return _NOTHING
    return _tracing.execution(execution, agent)


def store_round(
    agent: str, round: Any, entries: Sequence[tuple[Any, Any, Any]] = ()
) -> AbstractContextManager[None]:
    """The span of one store round; its parent is the execution of the first entry."""
    if _tracing is None:
        return _NOTHING
    return _tracing.store_round(agent, round, entries)


def webhook_attempt(
    notification: Any, attempt: int, host: str, port: int, headers: dict[str, str]
) -> AbstractContextManager[WebhookAttempt]:
    """The span of one webhook POST; ``headers`` get its ``traceparent``."""
    if _tracing is None:
        return _UNTRACED_ATTEMPT
    return _tracing.webhook_attempt(notification, attempt, host, port, headers)


def carry(payload: MutableMapping[str, Any]) -> None:
    """Put the current trace context into a queued execution's ``payload``."""
    if _tracing is not None:
        _tracing.carry(payload)


def adopt(payload: Mapping[str, Any]) -> None:
    """The calling task (a worker's run of a queued execution) continues ``payload``'s trace."""
    if _tracing is not None:
        _tracing.adopt(payload)


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current trace context (``traceparent``, ``tracestate``) to ``headers``."""
    if _tracing is not None:
        _tracing.inject(headers)


def client_transport(transport: T, binding: str, url: str) -> T:
    """The client's ``transport``, its calls in client spans that travel with them."""
    if _tracing is None:
        return transport
    return _tracing.client_transport(transport, binding, url)

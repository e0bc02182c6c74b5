"""The tracer provider the ``OTEL_*`` variables describe, built as the SDK builds it.

Imported only when the environment asks for traces: importing it imports
the OpenTelemetry SDK (an ImportError says the ``[otel]`` extra is missing).

What each variable does is the SDK's: ``Resource.create`` reads
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``; the provider reads
``OTEL_TRACES_SAMPLER``/``OTEL_TRACES_SAMPLER_ARG`` and the span limits;
``BatchSpanProcessor`` the ``OTEL_BSP_*`` ones; the exporter its endpoint,
headers, timeout, compression and certificates; ``opentelemetry.propagate``
``OTEL_PROPAGATORS``. Only two choices differ from
``opentelemetry.sdk._configuration``: an ``otlp`` exporter speaks
HTTP/protobuf unless ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` says ``grpc``
(the OpenTelemetry specification's default; the Python SDK's is gRPC), and a
resource that names no service is ``a2a-trio``'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

__all__ = ["environment_provider", "environment_resource", "exporter_names"]

#: What ``otlp`` means for each ``OTEL_EXPORTER_OTLP_PROTOCOL``.
_OTLP_BY_PROTOCOL = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
_BUILT_IN_SAMPLERS = {
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
}


def exporter_names(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The entry points (group ``opentelemetry_traces_exporter``) the environment names."""
    names = environ.get("OTEL_TRACES_EXPORTER", "").strip() or "otlp"
    if names.lower() == "none":
        return []
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
        or "http/protobuf"
    )
    chosen = []
    for name in (name.strip() for name in names.split(",")):
        if name == "otlp":
            if protocol not in _OTLP_BY_PROTOCOL:
                raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported")
            name = _OTLP_BY_PROTOCOL[protocol]
        if name:
            chosen.append(name)
    return chosen


#: The package that provides an exporter the ``[otel]`` extra does not install.
_PROVIDED_BY = {"otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc"}


def _load(group: str, name: str, variable: str) -> Any:
    found = entry_points(group=group, name=name)
    if not found:
        hint = f" (pip install {_PROVIDED_BY[name]})" if name in _PROVIDED_BY else ""
        raise ValueError(f"{variable}: no {name!r} is installed (entry points {group}){hint}")
    return next(iter(found)).load()


def environment_resource() -> Resource:
    """The resource of OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service: a2a-trio)."""
    resource = Resource.create()
    service = str(resource.attributes.get(SERVICE_NAME, ""))
    if not service or service.startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "a2a-trio"}))
    return resource


def _sampler() -> Any:
    """A sampler an entry point provides; None leaves the built-in ones to the provider."""
    name = os.environ.get("OTEL_TRACES_SAMPLER", "").strip()
    if not name or name.lower() in _BUILT_IN_SAMPLERS:
        return None
    factory = _load("opentelemetry_traces_sampler", name, "OTEL_TRACES_SAMPLER")
    return factory(os.environ.get("OTEL_TRACES_SAMPLER_ARG"))


def _id_generator() -> Any:
    name = os.environ.get("OTEL_PYTHON_ID_GENERATOR", "").strip()
    if not name or name == "random":
        return None
    return _load("opentelemetry_id_generator", name, "OTEL_PYTHON_ID_GENERATOR")()


def environment_provider() -> Any:
    """The global tracer provider if a program set one; else one built from the environment.

    The one built becomes the global provider, so that the libraries an
    agent uses (instrumented HTTP clients, model SDKs) export through it too.
    """
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current
    exporters: list[SpanExporter] = []
    for name in exporter_names():
        exporter = _load("opentelemetry_traces_exporter", name, "OTEL_TRACES_EXPORTER")
        exporters.append(exporter())
    provider = TracerProvider(
        resource=environment_resource(), sampler=_sampler(), id_generator=_id_generator()
    )
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider

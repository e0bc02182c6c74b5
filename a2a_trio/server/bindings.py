"""The two HTTP bindings: JSON-RPC 2.0 (spec 9) and HTTP+JSON (spec 11).

Each view parses, checks the version, resolves the caller, calls
:meth:`AgentMount.dispatch` and renders the outcome. Neither knows what an
operation does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

import trio

from .. import telemetry
from ..protocol import (
    A2AError,
    Call,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    MethodNotAllowedError,
    Operation,
    StreamResponse,
    negotiate_version,
    parse_jsonrpc,
    parse_rest,
)
from ..protocol.compat_v0_3 import (
    error_to_v0_3,
    is_v0_3_method,
    is_v0_3_path,
    jsonrpc_version,
    parse_rest_v0_3,
    resolve_v0_3_method,
    rest_error_to_v0_3,
)
from ..protocol.errors import MethodNotFoundError
from ..protocol.operations import (
    Loads,
    is_jsonrpc_method,
    resolve_method,
    strict_loads,
    yielding_loads,
)
from ..protocol.versions import LEGACY_VERSION, PROTOCOL_VERSION
from ..runtime import TaskEventStream
from .asgi import (
    JSON_CONTENT_TYPE,
    ClientGone,
    EventStreamBody,
    ProtocolRequest,
    ProtocolResponse,
)
from .auth import RequestCredentials
from .body_budget import decoding_cost
from .compat_v0_3 import (
    dumps,
    jsonrpc_event_v0_3,
    jsonrpc_result_v0_3,
    rest_body_v0_3,
    rest_event_v0_3,
)
from .failures import answer_for
from .mount import AgentMount, Outcome

__all__ = ["ServerSettings", "base_url", "handle_jsonrpc", "handle_rest", "rest_error"]

log = logging.getLogger("a2a_trio.server")

VERSION_HEADER = "A2A-Version"
EXTENSIONS_HEADER = "A2A-Extensions"
#: Statuses a JSON-RPC error keeps; every other JSON-RPC error travels on 200
#: (JSON-RPC over HTTP, and what peers' clients expect).
_JSONRPC_HTTP_STATUSES = frozenset({401, 403, 408, 413, 503})


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """Limits and HTTP behaviour of the protocol routes, and of the server process."""

    max_body_bytes: int = 10 * 1024 * 1024
    #: Seconds a request body may take to arrive in full (HTTP 408 after).
    body_timeout: float = 30.0
    #: Bytes of request bodies, and of their decoding, the process holds at
    #: once across all requests (see :mod:`.body_budget`); past it a request
    #: waits ``body_budget_wait`` seconds, then is refused (503, Retry-After).
    body_budget: int = 256 * 1024 * 1024
    body_budget_wait: float = 1.0
    keepalive_interval: float = 15.0
    card_max_age: int = 300
    #: The address clients use, when it differs from the request's Host.
    public_url: str | None = None
    #: Without ``public_url``: the hosts a request's Host may name (``host``,
    #: ``host:port``, ``.domain``, ``*``); any other is refused with 400.
    #: Empty: every host (the cards then echo whatever a client sends).
    allowed_hosts: tuple[str, ...] = ()
    #: Once started, move every object that exists (modules, the app, its cards)
    #: out of the garbage collector's sight with ``gc.freeze()`` (after a
    #: collection, and only if nothing is frozen yet). Otherwise each full
    #: collection walks them all while the server stands still: ~40 ms on the
    #: benchmark machine, the worst of its p99 latency. With it, the youngest
    #: generation is collected every ``GC_THRESHOLD`` (7,000) allocations
    #: instead of CPython's 700, unless the program set thresholds of its own:
    #: each collection walked, and promoted, the objects of every request in
    #: flight (about 4 % of a SendMessage's instructions).
    freeze_gc: bool = True
    #: Seconds a client may take to accept 16 KiB of an answer waiting for it:
    #: past it the connection (HTTP/1.1), or the stream (HTTP/2), is given up.
    #: hypercorn's connections are the process's, so the last app built sets it.
    send_timeout: float = 60.0
    #: Seconds a new connection may take to send its first request's line and
    #: headers, and on HTTP/1.1 each later request's from its first byte; the
    #: wait between requests is hypercorn's keep_alive_timeout. hypercorn's
    #: connections are the process's, so the last app built sets it too.
    header_timeout: float = 10.0


def _is_json(content_type: str | None) -> bool:
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    return mime == JSON_CONTENT_TYPE or (mime.startswith("application/") and mime.endswith("+json"))


def _check_method_known(method: str, version: str | None) -> None:
    """MethodNotFoundError for a method no version has, when the call names no version.

    Without A2A-Version a call is 0.3's, which this mount may not serve
    (VersionNotSupportedError); but a method that neither 1.0 nor 0.3 has is
    not found, whatever the version would have been.
    """
    if (version or "").strip() or is_jsonrpc_method(method) or is_v0_3_method(method):
        return
    raise MethodNotFoundError(f"Method not found: {method}")


def _version(request: ProtocolRequest) -> str | None:
    value = request.header(VERSION_HEADER)
    if value is None:
        value = request.query.get(VERSION_HEADER)
    return value


def _extensions(request: ProtocolRequest) -> frozenset[str]:
    values = request.header_values(EXTENSIONS_HEADER)
    return frozenset(item.strip() for value in values for item in value.split(",") if item.strip())


def _last_event_id(request: ProtocolRequest) -> int | None:
    value = request.header("Last-Event-ID")
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():
        raise InvalidParamsError("Last-Event-ID: must not be negative")
    # Event ids are 64-bit sequence numbers written in ASCII digits; int() alone
    # would also read "+5", "5_0" and numbers no database column holds.
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or int(text) >= 2**63:
        raise InvalidParamsError("Last-Event-ID: must be an event id this server sent")
    return int(text)


def credentials_of(request: ProtocolRequest) -> RequestCredentials:
    """What the request presents for authentication."""
    tls = (request.scope.get("extensions") or {}).get("tls") or {}
    certificate = tls.get("client_cert_name") or None
    return RequestCredentials(
        headers=request.headers,
        query=dict(request.query),
        cookies=request.cookies,
        client_certificate={"subject": certificate} if certificate else None,
    )


class _Addressed(Protocol):
    @property
    def host_url(self) -> str: ...


def base_url(request: _Addressed, settings: ServerSettings) -> str:
    """The scheme and authority clients reach this server at."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    return request.host_url.rstrip("/")


def _json(
    body: str | bytes, status: int = 200, headers: dict[str, str] | None = None
) -> ProtocolResponse:
    data = body.encode() if isinstance(body, str) else body
    return ProtocolResponse(status, data, headers=headers or {})


def _as_is(_: StreamResponse, text: str) -> str:
    return text


def _event_stream(
    stream: TaskEventStream,
    render: Callable[[StreamResponse, str], str],
    keepalive: float,
    render_error: Callable[[A2AError], str],
) -> ProtocolResponse:
    return ProtocolResponse(
        200,
        EventStreamBody(stream, render, keepalive, render_error),
        content_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


#: Bodies from this size on are decoded and validated on a worker thread.
LARGE_BODY_BYTES = 256 * 1024
# One large body at a time: the decoding thread and the event loop's thread
# then take turns at the GIL, and card GETs, streams and small messages go
# on while a 10 MiB body is read; more threads would only queue behind it.
_LARGE_BODIES: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("large_bodies")

T = TypeVar("T")


async def _decode(work: Callable[[Loads], T], size: int) -> T:
    """``work(loads)``: at once for a small body, on a worker thread for a large one."""
    if size < LARGE_BODY_BYTES:
        return work(strict_loads)
    try:
        limiter = _LARGE_BODIES.get()
    except LookupError:
        limiter = trio.CapacityLimiter(1)
        _LARGE_BODIES.set(limiter)
    return await trio.to_thread.run_sync(work, yielding_loads, limiter=limiter)


async def _perform(
    request: ProtocolRequest,
    mount: AgentMount,
    settings: ServerSettings,
    parse: Callable[[Loads], Call],
    size: int = 0,
    version: str = PROTOCOL_VERSION,
) -> Outcome:
    """Authenticate the caller, then resolve and run the operation.

    This is the part both bindings share. Authentication comes before the
    operation is even resolved, so an unauthenticated caller learns nothing
    of methods, routes or parameters.
    """
    caller = await mount.authenticate(credentials_of(request))
    call = await _decode(parse, size)
    request.operation = call.operation.value
    dispatch: Callable[[], Awaitable[Outcome]] = partial(
        mount.dispatch,
        call,
        caller,
        extensions=_extensions(request),
        last_event_id=_last_event_id(request),
        base_url=base_url(request, settings),
        version=version,
    )
    dispatch = telemetry.operation(dispatch, request, mount, call, version)
    if call.operation is Operation.SEND_MESSAGE:
        # A blocking SendMessage may wait long; a client that gives up on it
        # must be seen to, so that its retry gets the original (see Retries).
        return await request.while_connected(dispatch)
    return await dispatch()


# --- JSON-RPC -----------------------------------------------------------------


def _jsonrpc_result(request_id: Any, payload: str) -> str:
    # An integer id (the usual kind) is its own JSON; json.dumps costs more than the rest.
    id_text = str(request_id) if type(request_id) is int else json.dumps(request_id)
    return f'{{"jsonrpc":"2.0","id":{id_text},"result":{payload}}}'


#: The operations whose answer is an event stream, so whose 0.3 errors are too.
_STREAMED = frozenset({Operation.SEND_STREAMING_MESSAGE.value, Operation.SUBSCRIBE_TO_TASK.value})


def _jsonrpc_error(
    request_id: Any, error: A2AError, *, v0_3: bool = False, in_stream: bool = False
) -> ProtocolResponse:
    """The error response; with ``in_stream``, an event stream of that one error.

    0.3 clients read a streaming method's answer as SSE whatever it holds
    (a2a-sdk 0.3 refuses any other type as an invalid SSE response), and
    a2a-sdk 0.3's server sends an error the operation raised inside the
    stream; so does this one, for 0.3.
    """
    body = _jsonrpc_error_text(request_id, error, v0_3=v0_3)
    if in_stream:
        frame = f"data: {body}\n\n".encode()
        return ProtocolResponse(200, frame, "text/event-stream", {"Cache-Control": "no-cache"})
    status = error.http_status if error.http_status in _JSONRPC_HTTP_STATUSES else 200
    return _json(body, status, _error_headers(error))


def _jsonrpc_error_text(request_id: Any, error: A2AError, *, v0_3: bool = False) -> str:
    member = error_to_v0_3(error) if v0_3 else error.to_jsonrpc()
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": member}, separators=(",", ":"))


def _error_headers(error: A2AError) -> dict[str, str]:
    """The headers an error asks for: an authentication challenge, a time to retry."""
    headers: dict[str, str] = {}
    challenge = getattr(error, "challenge", None)
    if challenge:
        headers["WWW-Authenticate"] = challenge
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return headers


async def _read(request: ProtocolRequest, settings: ServerSettings) -> bytes:
    """The request's body, its share of the body budget grown to what decoding it may cost."""
    body = await request.body(settings.max_body_bytes, settings.body_timeout)
    await request.share.grow_to(len(body) + decoding_cost(body))
    return body


async def handle_jsonrpc(
    request: ProtocolRequest, mount: AgentMount, settings: ServerSettings
) -> ProtocolResponse:
    """``POST {prefix}/jsonrpc``."""
    if request.method != "POST":
        error = MethodNotAllowedError("JSON-RPC requests are POSTed", allowed=["POST"])
        return _json(
            json.dumps({"jsonrpc": "2.0", "id": None, "error": error.to_jsonrpc()}),
            405,
            {"Allow": "POST"},
        )
    request_id: Any = None
    v0_3 = False
    try:
        if not _is_json(request.content_type):
            raise ContentTypeNotSupportedError(
                f"JSON-RPC requests must be sent as {JSON_CONTENT_TYPE}, "
                f"not {request.content_type or 'an undeclared type'}"
            )
        body = await _read(request, settings)
        envelope = await _decode(lambda loads: parse_jsonrpc(body, loads), len(body))
        request_id = envelope.id
        limits = mount.host.settings.limits
        _check_method_known(envelope.method, _version(request))
        # A 0.3 method name decides alone (0.3 clients send no A2A-Version);
        # for a 1.0 name this is the negotiation it always was.
        if mount.compat_v0_3:
            v0_3 = jsonrpc_version(envelope.method, _version(request)) == LEGACY_VERSION
        else:
            negotiate_version(_version(request))
        resolve = resolve_v0_3_method if v0_3 else resolve_method
        outcome = await _perform(
            request,
            mount,
            settings,
            lambda _: resolve(envelope, limits),
            len(body),
            LEGACY_VERSION if v0_3 else PROTOCOL_VERSION,
        )
    except A2AError as error:
        request.outcome = error.spec.reason
        # The operation is known once the call parsed: only its own errors
        # go in the stream, as a2a-sdk 0.3 sends them (not a refused caller's).
        in_stream = v0_3 and request.operation in _STREAMED
        return _jsonrpc_error(
            getattr(error, "request_id", request_id), error, v0_3=v0_3, in_stream=in_stream
        )
    except ClientGone:
        raise
    except Exception as failure:
        answer = answer_for(failure, log, "JSON-RPC request failed")
        request.outcome = answer.spec.reason
        return _jsonrpc_error(request_id, answer, v0_3=v0_3)
    if isinstance(outcome, TaskEventStream):
        in_the_end = partial(_jsonrpc_error_text, request_id, v0_3=v0_3)
        if v0_3:
            return _event_stream(
                outcome,
                lambda event, _: _jsonrpc_result(request_id, jsonrpc_event_v0_3(event)),
                settings.keepalive_interval,
                in_the_end,
            )
        return _event_stream(
            outcome,
            lambda _, text: _jsonrpc_result(request_id, text),
            settings.keepalive_interval,
            in_the_end,
        )
    if v0_3:
        result = dumps(jsonrpc_result_v0_3(outcome, mount.signer))
        return _json(_jsonrpc_result(request_id, result))
    return _json(_jsonrpc_result(request_id, outcome.to_json()))


# --- HTTP+JSON ----------------------------------------------------------------


def rest_error(error: A2AError, *, v0_3: bool = False) -> ProtocolResponse:
    """``error`` as an HTTP+JSON answer: its status, its AIP-193 body, its headers."""
    headers = _error_headers(error)
    if isinstance(error, MethodNotAllowedError) and error.allowed:
        headers["Allow"] = ", ".join(error.allowed)
    return _json(_rest_error_text(error, v0_3=v0_3), error.http_status, headers)


def _rest_error_text(error: A2AError, *, v0_3: bool = False) -> str:
    body = rest_error_to_v0_3(error) if v0_3 else error.to_http()
    return json.dumps(body, separators=(",", ":"))


async def handle_rest(
    request: ProtocolRequest, mount: AgentMount, settings: ServerSettings, path: str
) -> ProtocolResponse:
    """``{prefix}/rest/{path}``: every HTTP+JSON route (spec 11.3), and 0.3's under ``/v1/``."""
    # A path only 0.3 has decides alone (0.3 clients send no A2A-Version).
    v0_3 = mount.compat_v0_3 and is_v0_3_path(path)
    try:
        if not v0_3:
            negotiate_version(_version(request))
        body = b""
        if request.method in ("POST", "PUT", "PATCH"):
            body = await _read(request, settings)
            declared = request.content_type
            if (declared and not _is_json(declared)) or (body.strip() and not declared):
                raise ContentTypeNotSupportedError(
                    f"Request bodies must be sent as {JSON_CONTENT_TYPE}, "
                    f"not {declared or 'an undeclared type'}"
                )
        query = request.query
        limits = mount.host.settings.limits
        parse = parse_rest_v0_3 if v0_3 else parse_rest
        outcome = await _perform(
            request,
            mount,
            settings,
            lambda loads: parse(request.method, path, query, body, limits, loads),
            len(body),
            LEGACY_VERSION if v0_3 else PROTOCOL_VERSION,
        )
    except A2AError as error:
        request.outcome = error.spec.reason
        return rest_error(error, v0_3=v0_3)
    except ClientGone:
        raise
    except Exception as failure:
        answer = answer_for(failure, log, "HTTP+JSON request failed")
        request.outcome = answer.spec.reason
        return rest_error(answer, v0_3=v0_3)
    if isinstance(outcome, TaskEventStream):
        in_the_end = partial(_rest_error_text, v0_3=v0_3)
        if v0_3:
            return _event_stream(
                outcome,
                lambda event, _: rest_event_v0_3(event),
                settings.keepalive_interval,
                in_the_end,
            )
        return _event_stream(outcome, _as_is, settings.keepalive_interval, in_the_end)
    if v0_3:
        return _json(dumps(rest_body_v0_3(outcome, mount.signer)))
    return _json(outcome.to_json())

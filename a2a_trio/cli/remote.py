"""Client verbs: talk to any A2A agent from the terminal."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import wraps
from typing import Any, TypeVar

import click
import httpx
import trio

from .._http import CLIENT_LIMITS
from ..client import A2AClient
from ..protocol import A2AError, ProtoModel, SendMessageConfiguration, StreamResponse, TaskState
from .answers import Ending, describe, print_events, print_text

__all__ = ["cancel", "discover", "get", "list_tasks", "send", "subscribe"]

T = TypeVar("T")
BINDING_NAMES = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON", "grpc": "GRPC"}


def _connection(command: Callable[..., Any]) -> Callable[..., Any]:
    """URL argument plus the options every client verb shares."""
    command = click.option(
        "--binding",
        type=click.Choice(sorted(BINDING_NAMES)),
        help="Use this binding (default: JSON-RPC if the agent offers it).",
    )(command)
    command = click.option(
        "-H",
        "--header",
        "headers",
        multiple=True,
        help="An extra request header, 'Name: value' (authentication, say).",
    )(command)
    command = click.option("--json", "as_json", is_flag=True, help="Print raw ProtoJSON.")(command)
    return click.argument("url")(command)


def _run(function: Callable[..., Awaitable[T]]) -> Callable[..., T]:
    """Run the verb on trio; an error answer, a network failure or a task that
    ended FAILED or REJECTED (an :class:`Ending`) exits 1 saying why."""

    @wraps(function)
    def runner(*args: Any, **kwargs: Any) -> T:
        try:
            result = trio.run(lambda: function(*args, **kwargs))
        except A2AError as error:
            click.echo(f"error {error.code} {type(error).__name__}: {error.message}", err=True)
            raise SystemExit(1) from None
        except Exception as error:
            if not _is_failure_to_talk(error):
                raise
            click.echo(f"error: {error}", err=True)
            raise SystemExit(1) from None
        if isinstance(result, Ending) and result.exit_status():
            raise SystemExit(result.exit_status())
        return result

    return runner


def _is_failure_to_talk(error: Exception) -> bool:
    """A network failure, an answer that is not A2A, or a failed gRPC call."""
    if isinstance(error, httpx.HTTPError | ValueError):
        return True
    # gRPC's module is imported only by a gRPC call, so its errors are looked
    # up only if one could have been raised.
    grpc_wire = sys.modules.get("a2a_trio.protocol.grpc_wire")
    return grpc_wire is not None and isinstance(error, grpc_wire.GrpcError)


async def _connect(url: str, binding: str | None, headers: tuple[str, ...]) -> A2AClient:
    extra = _headers(headers)
    prefer = [BINDING_NAMES[binding]] if binding else list(BINDING_NAMES.values())
    return await A2AClient.connect(url, prefer=prefer, headers=extra)


def _state(value: str | None) -> TaskState | None:
    if value is None:
        return None
    try:
        state: TaskState = TaskState.parse(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None
    return state


def _headers(headers: tuple[str, ...]) -> dict[str, str]:
    extra = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep:
            raise click.UsageError(f"a header is 'Name: value', not {header!r}")
        extra[name.strip()] = value.strip()
    return extra


def _print(model: ProtoModel, as_json: bool, human: str) -> None:
    click.echo(model.to_json() if as_json else human)


SPINNER = "|/-\\"


@asynccontextmanager
async def _waiting(label: str) -> AsyncIterator[Callable[[], None]]:
    """A spinner on standard error while waiting for the agent, when that is a
    terminal; nothing otherwise, so that pipes and log files hold only what the
    command answers. The block calls the yielded function when output begins."""
    stream = sys.stderr
    if not stream.isatty():
        yield lambda: None
        return

    async def spin() -> None:
        for frame in itertools.cycle(SPINNER):
            stream.write(f"\r{frame} {label}")
            stream.flush()
            await trio.sleep(0.1)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(spin)

        def done() -> None:
            if not nursery.cancel_scope.cancel_called:
                nursery.cancel_scope.cancel()
                stream.write("\r" + " " * (len(label) + 2) + "\r")
                stream.flush()

        try:
            yield done
        finally:
            done()


async def _relay(events: AsyncIterator[StreamResponse], as_json: bool) -> Ending:
    async with _waiting("waiting for the agent") as started:
        return await print_events(events, as_json, started)


@click.command()
@_connection
@click.argument("text")
@click.option(
    "--stream", is_flag=True, help="SendStreamingMessage: print the answer's text as it arrives."
)
@click.option(
    "--events", is_flag=True, help="Print each event on a line of its own (implies --stream)."
)
@click.option("--task", "task_id", help="Continue this task.")
@click.option("--context", "context_id", help="Send within this context.")
@click.option("--no-wait", is_flag=True, help="Return as soon as the task exists.")
@_run
async def send(
    url: str,
    text: str,
    stream: bool,
    events: bool,
    task_id: str | None,
    context_id: str | None,
    no_wait: bool,
    binding: str | None,
    headers: tuple[str, ...],
    as_json: bool,
) -> Ending:
    """Send TEXT to the agent at URL; prints the answer (or its text as it comes with --stream).

    Exits 1 when the task ends FAILED or REJECTED, with the agent's reason.
    """
    configuration = SendMessageConfiguration(return_immediately=True) if no_wait else None
    async with await _connect(url, binding, headers) as client:
        answer = client.send(
            text,
            stream=stream or events,
            task_id=task_id,
            context_id=context_id,
            configuration=configuration,
        )
        if stream and not (events or as_json):
            async with _waiting("waiting for the agent") as started:
                return await print_text(answer, started)
        return await _relay(answer, as_json)


@click.command()
@_connection
@click.argument("task_id")
@click.option("--history", "history_length", type=int, help="At most this many messages.")
@_run
async def get(
    url: str,
    task_id: str,
    history_length: int | None,
    binding: str | None,
    headers: tuple[str, ...],
    as_json: bool,
) -> None:
    """Show task TASK_ID."""
    async with await _connect(url, binding, headers) as client:
        task = await client.get_task(task_id, history_length=history_length)
        _print(task, as_json, describe(StreamResponse(task=task)))


@click.command("list")
@_connection
@click.option("--context", "context_id")
@click.option(
    "--state",
    callback=lambda ctx, param, value: _state(value),
    help="A task state, e.g. working or TASK_STATE_COMPLETED.",
)
@click.option("--page-size", type=click.IntRange(1, 100))
@click.option("--page-token")
@_run
async def list_tasks(
    url: str,
    context_id: str | None,
    state: TaskState | None,
    page_size: int | None,
    page_token: str | None,
    binding: str | None,
    headers: tuple[str, ...],
    as_json: bool,
) -> None:
    """List your tasks at URL, most recent first."""
    async with await _connect(url, binding, headers) as client:
        page = await client.list_tasks(
            context_id=context_id, status=state, page_size=page_size, page_token=page_token
        )
        lines = [f"{t.id}  {t.status.state.value}  context {t.context_id}" for t in page.tasks]
        summary = f"{len(page.tasks)} of {page.total_size} tasks"
        if page.next_page_token:
            summary += f"; next page: --page-token {page.next_page_token}"
        _print(page, as_json, "\n".join([*lines, summary]))


@click.command()
@_connection
@click.argument("task_id")
@_run
async def cancel(
    url: str, task_id: str, binding: str | None, headers: tuple[str, ...], as_json: bool
) -> None:
    """Cancel task TASK_ID."""
    async with await _connect(url, binding, headers) as client:
        task = await client.cancel_task(task_id)
        _print(task, as_json, describe(StreamResponse(task=task)))


@click.command()
@_connection
@click.argument("task_id")
@click.option("--last-event-id", help="Resume after this event id.")
@_run
async def subscribe(
    url: str,
    task_id: str,
    last_event_id: str | None,
    binding: str | None,
    headers: tuple[str, ...],
    as_json: bool,
) -> Ending:
    """Follow task TASK_ID until it ends, printing each event.

    Exits 1 when the task ends FAILED or REJECTED, with the agent's reason.
    """
    async with await _connect(url, binding, headers) as client:
        return await _relay(client.subscribe(task_id, last_event_id=last_event_id), as_json)


@click.command()
@click.argument("url")
@click.option("-H", "--header", "headers", multiple=True, help="An extra header, 'Name: value'.")
@_run
async def discover(url: str, headers: tuple[str, ...]) -> None:
    """Fetch the card of the agent at URL, print it and validate it (exit 1 if invalid)."""
    async with httpx.AsyncClient(headers=_headers(headers), limits=CLIENT_LIMITS) as http:
        card = await A2AClient.fetch_card(url, http)
    click.echo(json.dumps(card.to_wire(), indent=2))
    from ..server.cards import card_problems  # the server's own checks, imported for this verb

    problems = card_problems(card)
    if problems:
        click.echo("\nthe card is invalid:", err=True)
        for problem in problems:
            click.echo(f"  - {problem}", err=True)
        raise SystemExit(1)
    click.echo("\nthe card is valid", err=True)

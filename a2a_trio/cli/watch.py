"""``a2a-trio watch URL``: tail a server's live feed in the terminal (trio-websocket)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import click
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, HandshakeError, open_websocket_url

__all__ = ["feed_url", "format_event", "watch"]

TOKEN_ENV = "A2A_TRIO_CONSOLE_TOKEN"
#: The waits between reconnection attempts, in seconds (the last repeats).
BACKOFF = (0.25, 0.5, 1.0, 2.0, 5.0)

_STATE_COLOURS = {
    "SUBMITTED": "blue",
    "WORKING": "cyan",
    "COMPLETED": "green",
    "FAILED": "red",
    "CANCELED": "magenta",
    "REJECTED": "red",
    "INPUT_REQUIRED": "yellow",
    "AUTH_REQUIRED": "yellow",
}


def feed_url(url: str, path: str = "/_a2a", **query: str | int | None) -> str:
    """The feed's WebSocket URL for a server's base URL (or a feed URL as it is)."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    if scheme not in ("ws", "wss"):
        raise click.BadParameter(f"{url!r} is not an http(s) or ws(s) URL", param_hint="URL")
    route = parts.path.rstrip("/")
    if not route.endswith("/feed"):
        route = f"{route}/{path.strip('/')}/feed" if path.strip("/") else f"{route}/feed"
    arguments = urlencode({k: v for k, v in query.items() if v is not None and v != ""})
    return urlunsplit((scheme, parts.netloc, route, arguments, ""))


def format_event(event: dict[str, Any], colour: bool) -> str:
    """One line: time, sequence, kind, agent/task, state (coloured on a TTY), details."""
    kind = event.get("kind", "?")
    stamp = str(event.get("time", ""))[11:23]
    if kind == "feed.gap":
        return f"{stamp} -- gap: events after {event.get('after')} are lost ({event.get('reason')})"
    state = str(event.get("state") or "").removeprefix("TASK_STATE_")
    shown = state
    if colour and state:
        shown = click.style(state, fg=_STATE_COLOURS.get(state, "white"), bold=True)
    details = []
    if kind.startswith("webhook."):
        status = event.get("status")
        outcome = event.get("outcome")
        details.append(f"attempt {event.get('attempt')} {outcome}")
        if status is not None:
            details.append(f"HTTP {status}")
        if event.get("error"):
            details.append(str(event["error"]))
    elif kind == "execution.ended" and event.get("error"):
        details.append(f"error: {event['error']}")
    if event.get("text"):
        details.append(
            repr(event["text"]) if len(event["text"]) < 80 else repr(event["text"][:77] + "...")
        )
    where = f"{event.get('agent')}/{event.get('task')}"
    line = f"{stamp} {event.get('seq', ''):>6} {kind:<19} {where}"
    if shown:
        line += f" {shown}"
    if details:
        line += "  " + " ".join(details)
    return line


def _show(
    event: dict[str, Any],
    address: str,
    colour: bool,
    after: int | None,
    epoch: str | None,
    failures: int,
) -> tuple[int | None, str | None, int]:
    """Print one event (or note the hello); the resume position it leaves."""
    kind = event.get("kind")
    if kind == "feed.hello":
        if epoch is None or epoch != event["epoch"]:
            click.echo(f"-- watching {address.split('?')[0]}", err=True)
        return after, event["epoch"], 0
    if kind == "feed.gap":
        epoch = event["epoch"]
    click.echo(format_event(event, colour))
    sys.stdout.flush()
    return max(after or 0, int(event.get("seq") or 0)), epoch, failures


async def _tail(
    url: str,
    token: str | None,
    filters: dict[str, str | None],
    colour: bool,
    path: str,
    attempts: int | None,
) -> None:
    after: int | None = None
    epoch: str | None = None
    failures = 0
    headers = [(b"Authorization", f"Bearer {token}".encode())] if token else []
    while True:
        address = feed_url(url, path, **filters, after=after, epoch=epoch)
        try:
            async with open_websocket_url(address, extra_headers=headers) as ws:
                while True:
                    for line in (await ws.get_message()).splitlines():
                        after, epoch, failures = _show(
                            json.loads(line), address, colour, after, epoch, failures
                        )
        except ConnectionRejected as rejected:
            if rejected.status_code in (401, 403, 404):
                meaning = {401: "the console token was refused", 404: "no feed there"}
                fix = {
                    401: (
                        "; pass the operators' token with --token or $"
                        f"{TOKEN_ENV}: the server's [console] token, or the one it made up"
                        " and logged at start (console ...#token=...)"
                        if token
                        else f"; no token was given: pass it with --token or ${TOKEN_ENV}"
                        " (the server's [console] token, or the one it logged at start)"
                    ),
                    404: "; is URL the server, and --path its [console] path?",
                }
                raise click.ClickException(
                    f"{meaning.get(rejected.status_code, 'refused')} "
                    f"(HTTP {rejected.status_code}) at {address.split('?')[0]}"
                    + fix.get(rejected.status_code, "")
                ) from None
            problem = f"HTTP {rejected.status_code}"
        except ConnectionClosed as closed:
            why = closed.reason
            problem = f"closed: {why.code} {why.reason or ''}".strip() if why else "closed"
        except (HandshakeError, OSError) as error:
            problem = str(error) or type(error).__name__
        failures += 1
        if attempts is not None and failures > attempts:
            raise click.ClickException(f"gave up after {attempts} reconnection attempts: {problem}")
        wait = BACKOFF[min(failures - 1, len(BACKOFF) - 1)]
        click.echo(f"-- {problem}; reconnecting in {wait:g} s (resuming after {after})", err=True)
        await trio.sleep(wait)


@click.command()
@click.argument("url")
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    help=f"The console's bearer token (or ${TOKEN_ENV}).",
)
@click.option("--agent", help="Only this agent's events (comma-separated for several).")
@click.option("--task", help="Only this task's events (comma-separated for several).")
@click.option("--state", help="Only events in these states (working, completed, ...).")
@click.option(
    "--kind",
    help="Only these kinds or families: task, task.status, webhook, execution, ...",
)
@click.option("--path", default="/_a2a", show_default=True, help="The console path.")
@click.option(
    "--color/--no-color",
    "colour",
    default=None,
    help="Colour states (default: when writing to a terminal).",
)
@click.option(
    "--retries",
    type=int,
    default=None,
    help="Give up after this many failed reconnections in a row (default: never).",
)
def watch(
    url: str,
    token: str | None,
    agent: str | None,
    task: str | None,
    state: str | None,
    kind: str | None,
    path: str,
    colour: bool | None,
    retries: int | None,
) -> None:
    """Print a server's live feed, one line per event, as it happens.

    URL is the server (http://host:port) or its feed (ws://host:port/_a2a/feed).
    A dropped connection is resumed from the last event printed.
    """
    if colour is None:
        colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    filters = {"agent": agent, "task": task, "state": state, "kind": kind}
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends the tail quietly
        trio.run(_tail, url, token, filters, colour, path, retries)

"""The commands that run agents: ``serve`` (every binding) and ``worker`` (queued executions)."""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any, Literal

import click
import trio

from ..config import ConfigError, build_app
from ..server import A2AApp
from ..store import DatabaseInUseError, DatabaseUnopenable
from ..store.postgres import DatabaseUnavailable
from .commands import config_option, settings_at
from .errors import CannotRun

__all__ = ["serve", "worker"]

log = logging.getLogger("a2a_trio.cli")


log_format_option = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    envvar="A2A_TRIO_LOG_FORMAT",
    help="Log lines as text (time, level, logger, message) or JSON objects.",
)


def _configured_app(config_path: Path | None) -> A2AApp:
    try:
        return build_app(settings_at(config_path))
    except ConfigError as error:
        raise CannotRun(str(error)) from None


@click.command()
@click.argument("application", metavar="[MODULE:APP]", required=False)
@click.option("--bind", default="127.0.0.1:8000", show_default=True, help="host:port to listen on.")
@config_option
@log_format_option
@click.option(
    "--reload",
    is_flag=True,
    help="Restart when a .py or .toml file under the application's folder changes (development).",
)
def serve(
    application: str | None,
    bind: str,
    config_path: Path | None,
    log_format: Literal["text", "json"],
    reload: bool,
) -> None:
    """Serve your app (MODULE:APP) or the configured agents, everything on (Ctrl+C stops).

    MODULE:APP names an ASGI app the way hypercorn does (myagent:app,
    path/to/myagent.py:app); without it, the agents of the configuration.
    An A2AApp is served with its console, /metrics and health routes.
    Everything is logged on standard error, each request too (hypercorn's
    access log): a line with time, level and logger each, or JSON.
    """
    if application is not None and config_path is not None:
        raise click.UsageError("give MODULE:APP or --config, not both")
    if reload:
        from .reload import serve_reloading

        serve_reloading(application, bind, config_path, log_format)
        return
    from hypercorn.config import Config
    from hypercorn.trio import serve as serve_asgi

    from ..console import ensure_console
    from ..logs import configure_logging, hypercorn_loggers
    from ..server import LazyApp
    from ..server.serving import KEEP_ALIVE_TIMEOUT
    from ..server.serving import serve as serve_app
    from .apps import load_application
    from .lifecycle import check_bind, first_signal, progress, refuse, second_signal

    configure_logging(log_format)
    if application is None:
        target: Any = _configured_app(config_path)
    else:
        target = load_application(application)
    if isinstance(target, LazyApp):
        try:
            target = target.build()
        except ConfigError as error:
            raise CannotRun(str(error)) from None
    check_bind(bind, "--bind")  # a port in use: refused before the database is opened
    app = target if isinstance(target, A2AApp) else None
    if app is not None:
        console = ensure_console(app)
        if console.base_url is None:
            console.base_url = f"http://{bind}"  # the console URL logged at start is complete
    config = Config()
    config.bind = [bind]
    config.accesslog, config.errorlog = hypercorn_loggers()
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT

    async def serve_until_signalled() -> None:
        if app is None:  # any other ASGI app, as hypercorn serves it
            log.info("serving %s on http://%s", application, bind)
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

                async def signalled() -> None:
                    await signals.__anext__()

                await serve_asgi(target, config, shutdown_trigger=signalled)
            return
        # SIGINT and SIGTERM start a graceful shutdown instead of interrupting
        # whatever request happens to be running; a second one ends the grace
        # at once (the running tasks end FAILED, recorded as such).
        try:
            # Held from here on; refused in one line rather than as a failed
            # start-up deep inside hypercorn.
            await app.databases.open()
        except (DatabaseInUseError, DatabaseUnavailable, DatabaseUnopenable) as error:
            refuse(str(error))
        first = trio.Event()
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    async for _ in signals:
                        if first.is_set():
                            second_signal(app)
                            app.begin_shutdown(now=True)
                        else:
                            first_signal(app)
                            nursery.start_soon(progress, app)
                        first.set()

                async def serving(*, task_status: trio.TaskStatus[list[str]]) -> None:
                    await serve_app(
                        app, config, shutdown_trigger=first.wait, task_status=task_status
                    )
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                served = await nursery.start(serving)
                # What the socket is bound to: a --bind of port 0 names the port chosen.
                log.info("serving %s on %s", ", ".join(app.mounts), " ".join(served))

    trio.run(serve_until_signalled)
    log.info("stopped")


@click.command()
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="NAME",
    help="A queued agent to work for (repeatable; default: every queued agent).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Executions run at once, per agent.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=None,
    metavar="SECONDS",
    help="How long a stopping worker lets running executions finish [default: worker.grace].",
)
@click.option(
    "--metrics-bind",
    metavar="HOST:PORT",
    help="Serve Prometheus /metrics there (the [console] metrics settings apply).",
)
@config_option
@log_format_option
def worker(
    agents: tuple[str, ...],
    concurrency: int,
    grace: float | None,
    metrics_bind: str | None,
    config_path: Path | None,
    log_format: Literal["text", "json"],
) -> None:
    """Run the queued agents' executions (no HTTP) until SIGTERM or Ctrl+C.

    The agents are those of the configuration with execution = "queued", on
    a PostgreSQL database shared with the web processes (docs/deployment.md).
    The first signal stops claiming work at once and lets running executions
    finish within the grace (worker.grace, 900 s by default); a second ends
    the grace at once. What is still running then ends FAILED, or goes back
    to the queue if its agent is restartable.
    """
    from ..logs import configure_logging
    from .lifecycle import check_bind, first_signal, progress, refuse, second_signal

    configure_logging(log_format)
    settings = settings_at(config_path)
    grace_used = settings.worker.grace if grace is None else grace
    runtime = settings.runtime.model_copy(update={"shutdown_grace": grace_used})
    storage = settings.storage.model_copy(update={"pool_size": settings.worker.pool_size})
    try:
        app = build_app(settings.model_copy(update={"runtime": runtime, "storage": storage}))
    except ConfigError as error:
        raise CannotRun(str(error)) from None
    if metrics_bind is not None:
        check_bind(metrics_bind, "--metrics-bind")

    async def work_until_signalled() -> str | None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    signalled = False
                    async for _ in signals:
                        if signalled:
                            second_signal(app)
                        else:
                            first_signal(app)
                            nursery.start_soon(progress, app)
                        app.begin_shutdown(now=signalled)
                        signalled = True

                finished = trio.Event()

                async def work(*, task_status: trio.TaskStatus[None]) -> None:
                    try:
                        await app.work(
                            list(agents) or None, concurrency=concurrency, task_status=task_status
                        )
                    finally:
                        finished.set()

                nursery.start_soon(watch)
                try:
                    if metrics_bind is not None:  # a port in use: refused before any work
                        await nursery.start(_metrics, app, metrics_bind)
                    await nursery.start(work)
                except (ValueError, DatabaseUnavailable, DatabaseUnopenable) as error:
                    nursery.cancel_scope.cancel()
                    return str(error)
                queued = agents or [n for n, m in app.mounts.items() if m.host.queued]
                log.info("working for %s (concurrency %d)", ", ".join(queued), concurrency)
                if metrics_bind is not None:
                    log.info("metrics on http://%s/metrics", metrics_bind)
                await finished.wait()  # the shutdown is complete
                nursery.cancel_scope.cancel()
        return None

    refusal = trio.run(work_until_signalled)
    if refusal is not None:
        refuse(refusal)
    log.info("stopped")


async def _metrics(app: A2AApp, bind: str, *, task_status: trio.TaskStatus[list[str]]) -> None:
    """The worker's /metrics (its console's metrics settings), until cancelled."""
    from ..console import console_of
    from ..console.metrics_server import serve_metrics

    console = console_of(app)
    if console is None or console.metrics is None:
        raise ValueError("--metrics-bind: metrics are off ([console] metrics = false)")
    try:
        await serve_metrics(console, bind, task_status=task_status)
    except OSError as error:
        raise ValueError(f"--metrics-bind {bind}: {error.strerror or error}") from None

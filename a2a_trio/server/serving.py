"""Serving an app with hypercorn's trio worker, shut down as its settings promise.

hypercorn shuts down in two steps. It stops listening and gives the requests
in flight ``graceful_timeout`` (3 s by default) before cancelling them; only
then does it send the ASGI lifespan shutdown, which it waits for up to
``shutdown_timeout`` (60 s). Left to that, the agents' grace would begin only
after the requests waiting on their tasks were cut off. :func:`serve` begins
the grace at the first step instead, and stretches both timeouts over it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve

from .app import A2AApp

__all__ = ["KEEP_ALIVE_TIMEOUT", "SHUTDOWN_MARGIN", "fit_shutdown", "serve"]

#: What hypercorn's shutdown timeouts add to the grace: time for executions
#: cancelled at its end to record their endings and for their requests to answer.
SHUTDOWN_MARGIN = 5.0


#: How long ``a2a-trio serve`` keeps an idle connection (hypercorn's
#: ``keep_alive_timeout``; its default is 5 s). Longer than the idle timeouts
#: of the clients and proxies in front of it (httpx and Node 5 s, aiohttp 15 s,
#: nginx and AWS load balancers 60 s), so that they, never the server, close
#: an idle connection: a server closing it first loses whatever request the
#: client sends on it at that instant, and no client retries a POST.
KEEP_ALIVE_TIMEOUT = 75.0


def fit_shutdown(config: Config, grace: float) -> None:
    """Stretch ``config``'s shutdown timeouts to cover ``grace`` (never shortens them).

    ``graceful_timeout`` lets the requests in flight wait for their tasks
    through the grace; ``shutdown_timeout`` lets the lifespan shutdown wait
    for the hosts.
    """
    config.graceful_timeout = max(config.graceful_timeout, grace + SHUTDOWN_MARGIN)
    config.shutdown_timeout = max(config.shutdown_timeout, grace + SHUTDOWN_MARGIN)


async def serve(
    app: A2AApp,
    config: Config,
    *,
    shutdown_trigger: Callable[[], Awaitable[object]],
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` with :func:`hypercorn.trio.serve` until ``shutdown_trigger`` returns.

    When it returns, the agents' grace begins (:meth:`A2AApp.begin_shutdown`)
    while hypercorn goes on serving the requests in flight: a blocking
    SendMessage whose task finishes within the grace gets its answer, one
    whose task is ended FAILED at the end of the grace gets that, and streams
    end with their tasks. ``config``'s shutdown timeouts are stretched to
    cover the grace (:func:`fit_shutdown`). Returns once the app has shut
    down; ``task_status`` is started with the addresses served, as hypercorn's.
    """
    fit_shutdown(config, app.host_settings.shutdown_grace)

    async def trigger() -> None:
        await shutdown_trigger()
        app.begin_shutdown()

    await hypercorn_serve(app, config, shutdown_trigger=trigger, task_status=task_status)

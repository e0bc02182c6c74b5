"""The a2a-trio side of the benchmark: ``python -m bench.trio_server PORT DATABASE``.

One process, one trio run: an :class:`a2a_trio.A2AApp` on ``DATABASE`` -- a
SQLite file's path, or a PostgreSQL URL (``postgresql://user@127.0.0.1/db``,
read as ``A2A_TRIO_DATABASE`` would be, with the store's default pool) -- with
the bench agent mounted at the root, served by ``hypercorn.trio.serve`` on
127.0.0.1:PORT. Webhooks to 127.0.0.1 are allowed (the harness's receiver lives
there); its keep-alive is 75 s, as ``a2a-trio serve`` sets it; nothing else about
the server is tuned. The harness pins this process to one core.
"""

from __future__ import annotations

import sys

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from a2a_trio import (
    A2AApp,
    AgentCapabilities,
    AgentCard,
    AgentExecutor,
    AgentSkill,
    AsyncioAgentExecutor,
    EventQueue,
    RequestContext,
    TaskUpdater,
)
from a2a_trio.console import ConsoleSettings, attach_console
from a2a_trio.echo import EchoExecutor
from a2a_trio.push import PushSettings
from a2a_trio.server.serving import KEEP_ALIVE_TIMEOUT

from .common import (
    ASK_PREFIX,
    ASK_QUESTION,
    CARD_DESCRIPTION,
    CARD_NAME,
    CARD_VERSION,
    FEED_TOKEN,
    HOLD_PREFIX,
    MEDIA_TYPES,
    SKILL_DESCRIPTION,
    SKILL_ID,
    SKILL_NAME,
    SKILL_TAGS,
    raise_nofile_limit,
)


class BenchExecutor(EchoExecutor):
    """The echo agent, plus ``hold ...`` (a task that stays WORKING until cancelled)
    and ``ask ...`` (a turn of a conversation, see :meth:`ask`).

    Echo: SUBMITTED, WORKING, one text artifact repeating the text, COMPLETED
    (so a stream carries exactly four events). Hold: SUBMITTED, WORKING, then
    sleep until the host cancels the execution (CancelTask's default ``cancel``
    marks the task CANCELED first).
    """

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        text = context.user_text()
        if text.startswith(ASK_PREFIX):
            await self.ask(context, queue)
            return
        if not text.startswith(HOLD_PREFIX):
            await super().execute(context, queue)
            return
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        await trio.sleep_forever()

    async def ask(self, context: RequestContext, queue: EventQueue) -> None:
        """A turn of a conversation: WORKING, then INPUT_REQUIRED asking for more."""
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        await updater.requires_input(ASK_QUESTION)


def bench_card() -> AgentCard:
    """The bench agent's card; a2a-trio fills in ``supportedInterfaces`` when serving it."""
    return AgentCard(
        name=CARD_NAME,
        description=CARD_DESCRIPTION,
        version=CARD_VERSION,
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=list(MEDIA_TYPES),
        default_output_modes=list(MEDIA_TYPES),
        skills=[
            AgentSkill(
                id=SKILL_ID,
                name=SKILL_NAME,
                description=SKILL_DESCRIPTION,
                tags=list(SKILL_TAGS),
            )
        ],
    )


def build_app(
    database: str, executor: AgentExecutor | AsyncioAgentExecutor | None = None
) -> A2AApp:
    """The app: the bench agent (``executor``) at the root, webhooks to 127.0.0.1 allowed.

    The console is attached as ``a2a_trio:app`` attaches it (its token set,
    for the ``feed`` case), so every case measures a server with its feed
    and metrics observing.
    """
    app = A2AApp(
        database=database,
        push_settings=PushSettings(allowed_hosts=("127.0.0.1",)),
    )
    app.mount("", bench_card(), executor or BenchExecutor())
    attach_console(app, ConsoleSettings(token=FEED_TOKEN))
    return app


def is_postgres_url(database: str) -> bool:
    return database.split("://", 1)[0] in ("postgresql", "postgres") and "://" in database


def main(argv: list[str], executor: AgentExecutor | AsyncioAgentExecutor | None = None) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python -m bench.trio_server PORT (DB_PATH | postgresql://...)")
    port, database = int(argv[0]), argv[1]
    raise_nofile_limit()
    app = build_app(database, executor)
    store = type(app.store)
    if is_postgres_url(database) and "postgres" not in store.__module__.lower():
        # An a2a-trio without the PostgreSQL store would take the URL for a file name.
        raise SystemExit(
            "this a2a-trio has no PostgreSQL store: A2AApp(database=<URL>) made "
            f"{store.__module__}.{store.__qualname__}"
        )
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.backlog = 4096  # the streams case opens connections in bursts of hundreds
    config.accesslog = None
    config.keep_alive_timeout = KEEP_ALIVE_TIMEOUT  # as a2a-trio serve and docs/deployment.md
    trio.run(serve, app, config)


if __name__ == "__main__":
    main(sys.argv[1:])

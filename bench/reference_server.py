"""The reference side: ``python -m bench.reference_server PORT (DB_PATH | PG_URL | --memory)``.

The official a2a-sdk (1.3) serving the bench agent: its ``DefaultRequestHandler``
with the SQLAlchemy ``DatabaseTaskStore`` on SQLite
(``sqlite+aiosqlite:///DB_PATH``) -- the ratio base --, on PostgreSQL
(``PG_URL``, ``postgresql://...``, driven as ``postgresql+asyncpg://...``; see
:func:`database_engine` for its pool), or, with
``--memory``, its ``InMemoryTaskStore``. Push notifications use the matching push config
store and the SDK's ``BasePushNotificationSender`` over one ``httpx.AsyncClient``
(no URL screening, so the harness's 127.0.0.1 receiver is reachable). Routes
are the same as a2a-trio's: the card at the well-known path, JSON-RPC at
``/jsonrpc`` and HTTP+JSON under ``/rest``. The SDK's gRPC binding
(``GrpcHandler`` on a ``grpc.aio`` server, the SDK's own way) runs on the same
event loop on a second port, which the card names in its GRPC interface.

uvicorn runs it in this one process with uvloop and httptools, the fastest
stock configuration. The SQLite connection gets the same pragmas a2a-trio
uses (WAL, ``synchronous=NORMAL``), so both servers promise the same
durability and neither is slowed by a stricter journal mode.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import httpx
import uvicorn
from a2a.helpers import get_message_text, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    DatabasePushNotificationConfigStore,
    DatabaseTaskStore,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    PushNotificationConfigStore,
    TaskStore,
    TaskUpdater,
)
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from starlette.applications import Starlette

from .common import (
    ASK_PREFIX,
    ASK_QUESTION,
    CARD_DESCRIPTION,
    CARD_NAME,
    CARD_PATH,
    CARD_VERSION,
    HOLD_PREFIX,
    JSONRPC_PATH,
    MEDIA_TYPES,
    PROTOCOL_VERSION,
    REST_PREFIX,
    SKILL_DESCRIPTION,
    SKILL_ID,
    SKILL_NAME,
    SKILL_TAGS,
    raise_nofile_limit,
)


class BenchExecutor(AgentExecutor):
    """Same semantics as a2a-trio's bench executor.

    Echo: the task (SUBMITTED), WORKING, one text artifact repeating the text,
    COMPLETED. Hold: the task, WORKING, then sleep until the SDK cancels the
    execution (CancelTask calls :meth:`cancel`, which marks it CANCELED). Ask
    (a turn of the ``conversation`` case): the task if new, WORKING, then
    INPUT_REQUIRED with the question, a new task and each follow-up alike.
    """

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = get_message_text(context.message)
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if text.startswith(ASK_PREFIX):
            question = updater.new_agent_message([new_text_part(ASK_QUESTION)])
            await updater.requires_input(question)
            return
        if text.startswith(HOLD_PREFIX):
            await asyncio.Event().wait()  # until cancelled
            return
        await updater.add_artifact([new_text_part(text or "(no text)")], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def bench_card(port: int, grpc_port: int | None = None) -> AgentCard:
    """The bench agent's card, with its interfaces at this server's addresses.

    Without ``grpc_port`` (a server that serves no gRPC) it lists the two JSON bindings.
    """
    base = f"http://127.0.0.1:{port}"
    interfaces = [
        AgentInterface(
            url=f"{base}{JSONRPC_PATH}",
            protocol_binding="JSONRPC",
            protocol_version=PROTOCOL_VERSION,
        ),
        AgentInterface(
            url=f"{base}{REST_PREFIX}",
            protocol_binding="HTTP+JSON",
            protocol_version=PROTOCOL_VERSION,
        ),
    ]
    if grpc_port is not None:
        interfaces.append(
            AgentInterface(
                url=f"127.0.0.1:{grpc_port}",
                protocol_binding="GRPC",
                protocol_version=PROTOCOL_VERSION,
            )
        )
    return AgentCard(
        name=CARD_NAME,
        description=CARD_DESCRIPTION,
        version=CARD_VERSION,
        supported_interfaces=interfaces,
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


def sqlite_engine(path: str) -> AsyncEngine:
    """An aiosqlite engine on ``path`` with a2a-trio's pragmas (WAL, synchronous=NORMAL)."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")

    @event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def asyncpg_url(url: str) -> str:
    """SQLAlchemy's spelling of a libpq URL (``postgresql://...``) for the asyncpg driver."""
    scheme, rest = url.split("://", 1)
    if scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {scheme}://...")
    return f"postgresql+asyncpg://{rest}"


#: Connections the PostgreSQL engine keeps: one per concurrent request of the
#: largest case (c=64), opened on demand and kept.
PG_POOL_SIZE = 64


def database_engine(database: str) -> AsyncEngine:
    """The engine for a SQLite path or a PostgreSQL URL (asyncpg).

    On PostgreSQL the pool keeps up to :data:`PG_POOL_SIZE` connections and
    opens no others. SQLAlchemy's default (5 kept, 10 more on demand that are
    closed when given back) keeps opening and closing connections at c=16:
    about a fifth more server CPU per SendMessage on this machine
    (20 against 16-17 ms), a cost of the setting rather than of the SDK.
    """
    if "://" in database:
        return create_async_engine(asyncpg_url(database), pool_size=PG_POOL_SIZE, max_overflow=0)
    return sqlite_engine(database)


def build_app(port: int, database: str | None, grpc_port: int) -> Starlette:
    """The Starlette app on a SQLite path or PostgreSQL URL; ``None``: the in-memory stores.

    Its lifespan also serves the gRPC binding on ``grpc_port``.
    """
    card = bench_card(port, grpc_port)
    engine: AsyncEngine | None = None
    task_store: TaskStore
    push_store: PushNotificationConfigStore
    if database is None:
        task_store = InMemoryTaskStore()
        push_store = InMemoryPushNotificationConfigStore()
    else:
        engine = database_engine(database)
        task_store = DatabaseTaskStore(engine)
        push_store = DatabasePushNotificationConfigStore(engine)
    push_client = httpx.AsyncClient()
    handler = DefaultRequestHandler(
        agent_executor=BenchExecutor(),
        task_store=task_store,
        agent_card=card,
        push_config_store=push_store,
        push_sender=BasePushNotificationSender(push_client, push_store),
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if isinstance(task_store, DatabaseTaskStore):  # create the tables before any load
            await task_store.initialize()
        if isinstance(push_store, DatabasePushNotificationConfigStore):
            await push_store.initialize()
        grpc_server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
        grpc_server.add_insecure_port(f"127.0.0.1:{grpc_port}")
        await grpc_server.start()
        try:
            yield
        finally:
            await grpc_server.stop(grace=None)
            await handler.aclose()
            await push_client.aclose()
            if engine is not None:
                await engine.dispose()

    routes = [
        *create_agent_card_routes(card, card_url=CARD_PATH),
        *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH),
        *create_rest_routes(handler, path_prefix=REST_PREFIX),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def free_port() -> int:
    """A port for the gRPC server that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit(
            "usage: python -m bench.reference_server PORT (DB_PATH | postgresql://... | --memory)"
        )
    port = int(argv[0])
    database = None if argv[1] == "--memory" else argv[1]
    run_uvicorn(build_app(port, database, free_port()), port)


def run_uvicorn(app: Any, port: int) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` as every reference server is (uvloop, httptools)."""
    raise_nofile_limit()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        workers=1,
        backlog=4096,
        access_log=False,
        log_level="warning",
        lifespan="on",
    )


if __name__ == "__main__":
    main(sys.argv[1:])

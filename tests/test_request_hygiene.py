"""Secrets that pass through the server are never written down in plaintext.

After authenticated traffic of every kind (send and stream on both bindings,
push configs with their own token and credentials, in-band credentials for an
AUTH_REQUIRED task, a refused token), neither the database (a SQLite file and
the files beside it, read after the server closed them; or every row of every
PostgreSQL table) nor the logs of ``a2a_trio`` and ``hypercorn`` at DEBUG,
access log included, hold any of those secrets.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from a2a_trio import A2AApp, BearerAuthenticator
from a2a_trio.push import PushSettings
from a2a_trio.store.url import SqliteLocation, parse_database_url

from .agents import ScriptedExecutor
from .callers import BEARER, caller, secured_card
from .conftest import VERSION_HEADERS, LiveServer, user_message
from .postgres import rows
from .test_bindings import Binding
from .webhooks import Received, Reply, WebhookReceiver, webhook_receiver


def _secret(kind: str) -> str:
    return f"hygiene-{kind}-{uuid.uuid4().hex}"


BEARER_TOKEN = _secret("bearer")
REFUSED_TOKEN = _secret("refused")
PUSH_TOKEN = _secret("push-token")
PUSH_CREDENTIALS = _secret("push-credentials")
MESSAGE_PUSH_TOKEN = _secret("message-push-token")
MESSAGE_PUSH_CREDENTIALS = _secret("message-push-credentials")
IN_BAND = _secret("in-band")
REQUEST_IN_BAND = _secret("request-in-band")

SECRETS = {
    "bearer token": BEARER_TOKEN,
    "refused bearer token": REFUSED_TOKEN,
    "push token": PUSH_TOKEN,
    "push credentials": PUSH_CREDENTIALS,
    "push token sent with a message": MESSAGE_PUSH_TOKEN,
    "push credentials sent with a message": MESSAGE_PUSH_CREDENTIALS,
    "in-band credentials (message metadata)": IN_BAND,
    "in-band credentials (request metadata)": REQUEST_IN_BAND,
}
LOGGERS = ("a2a_trio", "hypercorn", "quart")
TIME_LIMIT = 30.0


class Recorder(logging.Handler):
    """Keeps every record as the text a log file would hold: the line and any traceback.

    Not the record's raw ``args``: hypercorn hands its access logger every
    request header there (Authorization included), and only what its format
    names is written.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join(self.records)


@contextmanager
def recorded_logs() -> Iterator[Recorder]:
    """Every record of LOGGERS at DEBUG, for the duration of the block."""
    recorder = Recorder()
    loggers = [logging.getLogger(name) for name in LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(recorder)
    try:
        yield recorder
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(recorder)
            logger.setLevel(level)


@asynccontextmanager
async def logged_server(database: str) -> AsyncIterator[LiveServer]:
    """A Bearer-protected scripted agent whose hypercorn logs access and errors."""
    app = A2AApp(
        database=database,
        push_settings=PushSettings(allowed_hosts=("127.0.0.1",), max_attempts=2, backoff=0.01),
    )
    app.mount(
        "",
        card=secured_card({"bearer": BEARER}, [{"bearer": []}]),
        executor=ScriptedExecutor(),
        authenticators={"bearer": BearerAuthenticator(tokens={BEARER_TOKEN: "alice"})},
    )
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = logging.getLogger("hypercorn.access")
    config.errorlog = logging.getLogger("hypercorn.error")
    config.graceful_timeout = 1.0
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(
                app, config, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        async with httpx.AsyncClient(
            base_url=binds[0], headers=VERSION_HEADERS, timeout=10.0, trust_env=False
        ) as client:
            try:
                yield LiveServer(app, binds[0], client)
            finally:
                stop.set()


def hook_config(hook: WebhookReceiver, token: str, credentials: str) -> dict[str, Any]:
    return {
        "url": hook.url,
        "token": token,
        "authentication": {"scheme": "Bearer", "credentials": credentials},
    }


async def authenticated_traffic(server: LiveServer, hook: WebhookReceiver) -> None:
    """Every way a secret reaches the server, on both bindings."""
    async with caller(server, bearer=BEARER_TOKEN) as alice:
        rpc, rest = Binding(alice, "jsonrpc"), Binding(alice, "rest")
        for b in (rpc, rest):
            await b.send("echo plain")
            await b.stream("SendStreamingMessage", {"message": user_message("chunks")})

        # Push configs with their own secrets; continuing the task makes them deliver.
        for index, b in enumerate((rpc, rest)):
            asked = (await b.send("ask"))["task"]
            config = hook_config(hook, PUSH_TOKEN, PUSH_CREDENTIALS)
            status, created = await b.call(
                "CreateTaskPushNotificationConfig",
                {"taskId": asked["id"], "id": f"hook-{index}", **config},
            )
            assert status == 0, created
            await b.send("Ada", taskId=asked["id"])
        status, result = await rest.call(
            "SendMessage",
            {
                "message": user_message("echo with a webhook"),
                "configuration": {
                    "taskPushNotificationConfig": hook_config(
                        hook, MESSAGE_PUSH_TOKEN, MESSAGE_PUSH_CREDENTIALS
                    )
                },
            },
        )
        assert status == 0, result

        # In-band credentials for AUTH_REQUIRED tasks, in the message and in the request.
        waiting = (await rpc.send("auth"))["task"]
        metadata = {"credentials": {"password": IN_BAND}}
        done = await rpc.send("signed in", taskId=waiting["id"], metadata=metadata)
        assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        waiting = (await rest.send("auth"))["task"]
        events = await rest.stream(
            "SendStreamingMessage",
            {
                "message": user_message("signed in", taskId=waiting["id"]),
                "metadata": {"credentials": {"password": REQUEST_IN_BAND}},
            },
        )
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    async with caller(server, bearer=REFUSED_TOKEN) as mallory:
        status, _ = await Binding(mallory, "rest").call("ListTasks", {})
        assert status == 401


async def deliveries_with(hook: WebhookReceiver, tokens: set[str]) -> list[Received]:
    """The webhook requests up to the first that brings every one of ``tokens``."""
    count = 1
    while True:
        arrived = await hook.wait_for(count)
        if tokens <= {request.headers.get("x-a2a-notification-token") for request in arrived}:
            return arrived
        count += 1


def database_files(database: Path) -> tuple[list[str], bytes]:
    """The database and every file beside it (-wal, -shm, the key), and their bytes."""
    files = sorted(database.parent.glob(database.name + "*"))
    assert database in files
    return [path.name for path in files], b"".join(path.read_bytes() for path in files)


def database_tables(database: str) -> tuple[list[str], bytes]:
    """Every table of a PostgreSQL database, and each of its rows as text."""
    tables = [
        name
        for (name,) in rows(
            database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
        )
    ]
    assert "task_events" in tables
    written = [
        text for table in tables for (text,) in rows(database, f"SELECT t::text FROM {table} t")
    ]
    return tables, "\n".join(written).encode()


async def test_no_secret_reaches_the_database_or_the_logs(database: str) -> None:
    with recorded_logs() as logs, trio.fail_after(TIME_LIMIT):
        async with webhook_receiver(Reply(503)) as hook:
            async with logged_server(database) as server:
                await authenticated_traffic(server, hook)
                delivered = await deliveries_with(hook, {PUSH_TOKEN, MESSAGE_PUSH_TOKEN})
            authorizations = {request.headers.get("authorization") for request in delivered}
            assert f"Bearer {PUSH_CREDENTIALS}" in authorizations
            assert f"Bearer {MESSAGE_PUSH_CREDENTIALS}" in authorizations

    location = parse_database_url(database)
    if isinstance(location, SqliteLocation):
        files, stored = database_files(location.path)
    else:
        files, stored = database_tables(database)
    # The right files (or tables), and the traffic is in them (so is the log, in the records).
    assert b"alice" in stored and b"signed in" in stored
    assert "/jsonrpc" in logs.text and "delivered" in logs.text
    for what, secret in SECRETS.items():
        assert secret.encode() not in stored, f"the {what} is in {files}"
        assert secret not in logs.text, f"the {what} is in the logs"

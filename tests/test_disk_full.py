"""A full disk said plainly: a real SQLite file on a small tmpfs that the test fills.

Each test mounts its own 8 MiB tmpfs (root only: skipped, with the reason,
where mounting is not allowed; CI runs as root), serves a live app from it,
then fills the rest with a ballast file. Writes then fail with SQLITE_FULL, as
on a full production disk; deleting the ballast gives the space back.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
import trio

from a2a_trio import A2AApp, EventQueue, RequestContext, TaskUpdater
from a2a_trio.protocol import AgentCapabilities, StorageFullError
from a2a_trio.protocol.grpc_wire import GrpcStatus, error_status
from a2a_trio.store import SqliteStore
from a2a_trio.store.space import StorageCondition, is_disk_full
from a2a_trio.store.url import PostgresLocation

from .agents import Gate, ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message
from .postgres import admin_connect, database_for, postgres_changes
from .test_grpc_binding import Channel, error_info, send_request

#: How long recovery may take once space is back (the ending retries back off to 10 s).
RECOVERY = 30.0


def _cannot_mount(reason: str) -> None:
    """Skip, with the reason; under CI (root, as .ci/run is) that is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs of this test's own, unmounted after it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        _cannot_mount("no mount command here: the disk-full tests mount a tmpfs (CI runs them)")
    else:
        if mounted.returncode != 0:
            _cannot_mount(
                f"cannot mount a tmpfs here ({mounted.stderr.strip() or mounted.returncode}):"
                " the disk-full tests need root (CI runs them)"
            )
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


class Ballast:
    """A file that takes every byte left on its disk, until :meth:`free`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fill(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            for size in (2**20, 2**12, 1):
                chunk = b"\0" * size
                while True:
                    try:
                        os.write(fd, chunk)
                    except OSError as error:
                        assert error.errno == errno.ENOSPC, error
                        break
        finally:
            os.close(fd)

    def free(self) -> None:
        self.path.unlink()


@asynccontextmanager
async def full_disk_server(
    disk: Path, executor: ScriptedExecutor
) -> AsyncIterator[tuple[LiveServer, Ballast]]:
    """A live app whose SQLite file is on ``disk``; the ballast not filled yet."""

    def configure(app: A2AApp) -> None:
        card = make_card(capabilities=AgentCapabilities(streaming=True))
        app.mount("", card=card, executor=executor)

    async with live_server(disk, configure, database=disk / "a2a.db") as server:
        yield server, Ballast(disk / "ballast")


async def fill(server: LiveServer, ballast: Ballast) -> None:
    """Leave the database no room: its WAL emptied first, so no write finds old space."""
    store = server.app.store
    assert isinstance(store, SqliteStore)
    await store.empty_wal()
    ballast.fill()


async def send(server: LiveServer, text: str, **params: Any) -> dict[str, Any]:
    """SendMessage over JSON-RPC; the whole response body."""
    return await server.jsonrpc("SendMessage", {"message": user_message(text), **params})


async def start(server: LiveServer, text: str, **fields: Any) -> str:
    """Start a task (answered at once) and wait until it is WORKING or paused; its id."""
    body = await server.jsonrpc(
        "SendMessage",
        {"message": user_message(text, **fields), "configuration": {"returnImmediately": True}},
    )
    task_id: str = body["result"]["task"]["id"]
    with trio.fail_after(10):
        while True:  # polled: the store is what the test watches
            if await state(server, task_id) != "TASK_STATE_SUBMITTED":
                return task_id
            await trio.sleep(0.01)


async def state(server: LiveServer, task_id: str) -> str:
    body = await server.jsonrpc("GetTask", {"id": task_id})
    found: str = body["result"]["status"]["state"]
    return found


async def ends(server: LiveServer, task_id: str) -> str:
    """The task's final state, once it has one."""
    with trio.fail_after(RECOVERY):
        while True:
            found = await state(server, task_id)
            if found not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"):
                return found
            await trio.sleep(0.1)


def storage_full(body: dict[str, Any]) -> bool:
    error = body.get("error") or {}
    reasons = [detail.get("reason") for detail in error.get("data") or []]
    return error.get("code") == -32603 and reasons == ["STORAGE_FULL"]


# --- the answer -------------------------------------------------------------------------


async def test_a_send_refused_for_lack_of_space_answers_storage_full(small_disk: Path) -> None:
    message = user_message("echo hello")
    async with full_disk_server(small_disk, ScriptedExecutor()) as (server, ballast):
        await fill(server, ballast)
        over_jsonrpc = await server.jsonrpc("SendMessage", {"message": message})
        over_rest = await server.rest(
            "POST", "/message:send", json={"message": user_message("echo hello")}
        )
        ballast.free()
        # The client's retry of the same message (same messageId) goes through.
        again = await server.jsonrpc("SendMessage", {"message": message})
    assert storage_full(over_jsonrpc), over_jsonrpc
    assert over_rest.status_code == 503, over_rest.text
    assert over_rest.headers["retry-after"] == str(StorageFullError.retry_after)
    assert over_rest.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert over_rest.json()["error"]["details"][0]["reason"] == "STORAGE_FULL"
    assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_over_grpc_a_full_disk_is_resource_exhausted() -> None:
    code, details = error_status(StorageFullError())
    assert code is GrpcStatus.RESOURCE_EXHAUSTED
    assert details.message == StorageFullError.spec.message


async def test_a_full_disk_is_logged_once_not_per_request(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with full_disk_server(small_disk, ScriptedExecutor()) as (server, ballast):
        await fill(server, ballast)
        with caplog.at_level(logging.INFO, logger="a2a_trio"):
            answers = [await send(server, f"echo {n}") for n in range(5)]
            ballast.free()
            await send(server, "echo back")
    assert all(storage_full(answer) for answer in answers)
    ours = [record for record in caplog.records if record.name.startswith("a2a_trio")]
    assert [record.exc_info for record in ours if record.exc_info] == []
    said = [record.getMessage() for record in ours if record.getMessage().startswith("storage ")]
    assert len(said) == 2, said
    assert said[0].startswith("storage full (") and "database or disk is full" in said[0]
    assert said[1].startswith("storage has space again (")


async def test_readiness_says_why_while_writes_are_refused(small_disk: Path) -> None:
    async with full_disk_server(small_disk, ScriptedExecutor()) as (server, ballast):
        await fill(server, ballast)
        await send(server, "echo hello")
        full = await server.client.get("/_a2a/health/ready")
        ballast.free()
        await send(server, "echo hello")
        back = await server.client.get("/_a2a/health/ready")
    assert full.status_code == 503
    assert full.json()["checks"]["storage"].startswith("writes refused for lack of space")
    assert full.json()["checks"]["database"] == "ok"  # it still reads
    assert (back.status_code, back.json()["checks"]["storage"]) == (200, "ok")


# --- tasks under way ----------------------------------------------------------------------


@pytest.mark.parametrize("cancels", [1, 2], ids=["once", "twice"])
async def test_a_cancel_asked_while_the_disk_is_full_is_answered_and_ends_canceled(
    small_disk: Path, cancels: int
) -> None:
    # Asked again, the cancel is answered again: the first left its execution
    # stopped and the task's CANCELED ending waiting for space.
    executor = ScriptedExecutor()
    async with full_disk_server(small_disk, executor) as (server, ballast):
        task_id = await start(server, "hold")
        await fill(server, ballast)
        with trio.fail_after(10):
            answers = [await server.jsonrpc("CancelTask", {"id": task_id}) for _ in range(cancels)]
        ballast.free()
        ended = await ends(server, task_id)
    assert all(storage_full(answer) for answer in answers), answers
    assert ended == "TASK_STATE_CANCELED"


async def test_a_task_whose_ending_cannot_be_stored_ends_failed_once_space_is_back(
    small_disk: Path,
) -> None:
    executor = ScriptedExecutor()
    async with full_disk_server(small_disk, executor) as (server, ballast):
        task_id = await start(server, "hold")
        await fill(server, ballast)
        executor.gate.release.set()  # it completes, but that cannot be stored
        with trio.fail_after(10):
            while True:  # its execution ends; the task stays as last stored
                if not server.app.mounts["default"].host.executions_running:
                    break
                await trio.sleep(0.01)
        while_full = await state(server, task_id)
        ballast.free()
        ended = await ends(server, task_id)
    assert while_full == "TASK_STATE_WORKING"
    assert ended == "TASK_STATE_FAILED"


async def test_a_paused_task_whose_continuation_cannot_be_stored_stays_paused(
    small_disk: Path,
) -> None:
    async with full_disk_server(small_disk, ScriptedExecutor()) as (server, ballast):
        task_id = await start(server, "ask")
        assert await state(server, task_id) == "TASK_STATE_INPUT_REQUIRED"
        await fill(server, ballast)
        refused = await send(server, "Ada", taskId=task_id)
        paused = await state(server, task_id)
        ballast.free()
        continued = await send(server, "Ada", taskId=task_id)
    assert storage_full(refused), refused
    assert paused == "TASK_STATE_INPUT_REQUIRED"
    assert continued["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


class WaitingContinuation(ScriptedExecutor):
    """A new task as scripted (``ask`` pauses); a continuation waits on ``turn`` first."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = Gate()

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        if context.current_task is None:
            await super().execute(context, queue)
            return
        await self.turn.pass_through()  # its message is stored by now
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.start_work()
        await updater.complete("done")


async def test_a_continuation_whose_work_cannot_be_stored_leaves_the_task_paused_for_its_retry(
    small_disk: Path,
) -> None:
    # Its message was stored, its first event was not: the client hears
    # STORAGE_FULL ("nothing was stored, try again"), so the task must not end
    # FAILED meanwhile, or the retry would find it closed to messages.
    executor = WaitingContinuation()
    async with full_disk_server(small_disk, executor) as (server, ballast):
        host = server.app.mounts["default"].host
        task_id = await start(server, "ask")
        message = await refused_continuation(server, ballast, executor, task_id)
        waiting, paused = host.endings_waiting, await state(server, task_id)
        ballast.free()
        retried = await server.jsonrpc("SendMessage", {"message": message})
    assert (waiting, paused) == (0, "TASK_STATE_INPUT_REQUIRED")
    task = retried["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["parts"][0]["text"] for m in task["history"]] == [
        "ask",
        "What is your name?",
        "Ada",
        "done",
    ]


async def refused_continuation(
    server: LiveServer, ballast: Ballast, executor: WaitingContinuation, task_id: str
) -> dict[str, Any]:
    """A follow-up whose message is stored and whose agent's first event finds no space."""
    message = user_message("Ada", taskId=task_id)
    async with trio.open_nursery() as nursery:

        async def refused_while_full() -> None:
            assert storage_full(await server.jsonrpc("SendMessage", {"message": message}))

        nursery.start_soon(refused_while_full)
        await executor.turn.reached.wait()
        await fill(server, ballast)
        executor.turn.release.set()
    return message


async def test_a_restart_before_the_retry_leaves_the_task_paused_for_it(small_disk: Path) -> None:
    # The log ends with the user's message, as a follow-up under way at a
    # crash leaves it (which a restart ends FAILED); this one was answered
    # STORAGE_FULL, so its pause is said again once the store takes it (here
    # by the stop's last try, space back just before).
    executor = WaitingContinuation()
    async with full_disk_server(small_disk, executor) as (server, ballast):
        task_id = await start(server, "ask")
        message = await refused_continuation(server, ballast, executor, task_id)
        ballast.free()
    again = WaitingContinuation()
    again.turn.release.set()
    async with full_disk_server(small_disk, again) as (server, _):
        restarted = await state(server, task_id)
        retried = await server.jsonrpc("SendMessage", {"message": message})
        history = await server.jsonrpc("GetTask", {"id": task_id})
    assert restarted == "TASK_STATE_INPUT_REQUIRED"
    assert retried["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", retried
    assert [m["parts"][0]["text"] for m in history["result"]["history"]] == [
        "ask",
        "What is your name?",
        "Ada",
        "done",
    ]


async def streamed(server: LiveServer, binding: str, message: dict[str, Any]) -> list[Any]:
    """SendStreamingMessage's frames (gRPC: its messages, then the call, whose status ends it)."""
    if binding == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
        return await server.sse("POST", "/jsonrpc", json={**body, "params": {"message": message}})
    if binding == "rest":
        return await server.sse("POST", "/rest/message:stream", json={"message": message})
    request = send_request(message["parts"][0]["text"])
    request.message.message_id, request.message.task_id = message["messageId"], message["taskId"]
    channel = Channel(server)
    try:
        call = channel.stream("SendStreamingMessage", request)

        def relayed() -> list[Any]:
            got: list[Any] = []
            with contextlib.suppress(grpc.RpcError):
                got.extend(call)
            return [*got, call]

        return await trio.to_thread.run_sync(relayed)
    finally:
        channel.close()


def ends_storage_full(binding: str, frames: list[Any]) -> bool:
    """Whether the stream's last frame (gRPC: its status) says STORAGE_FULL."""
    last = frames[-1]
    if binding == "jsonrpc":
        return storage_full(last)
    if binding == "rest":
        error = last.get("error") or {}
        return error.get("status") == "RESOURCE_EXHAUSTED" and [
            detail.get("reason") for detail in error.get("details") or []
        ] == ["STORAGE_FULL"]
    return bool(
        last.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        and error_info(last).reason == "STORAGE_FULL"
    )


@pytest.mark.parametrize("binding", ["jsonrpc", "rest", "grpc"])
async def test_a_streamed_continuation_whose_work_cannot_be_stored_ends_with_storage_full(
    small_disk: Path, binding: str
) -> None:
    # The stream had begun (the task as continued) when the agent's first
    # event found no space: its client must hear STORAGE_FULL, as a blocking
    # one does, not a stream that just stops with the task still paused.
    executor = WaitingContinuation()
    async with full_disk_server(small_disk, executor) as (server, ballast):
        task_id = await start(server, "ask")
        message = user_message("Ada", taskId=task_id)
        frames: list[Any] = []
        async with trio.open_nursery() as nursery:

            async def relay() -> None:
                frames.extend(await streamed(server, binding, message))

            nursery.start_soon(relay)
            await executor.turn.reached.wait()
            await fill(server, ballast)
            executor.turn.release.set()
        paused = await state(server, task_id)
        ballast.free()
        retried = await server.jsonrpc("SendMessage", {"message": message})
    assert paused == "TASK_STATE_INPUT_REQUIRED"
    assert len(frames) == 2, frames  # the task as continued, then the error
    assert ends_storage_full(binding, frames), frames
    assert retried["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


# --- PostgreSQL -----------------------------------------------------------------------------

#: What PostgreSQL says when a data file cannot grow, with its SQLSTATE (53100).
PG_DISK_FULL = (
    "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " RAISE EXCEPTION 'could not extend file \"base/1/2\": No space left on device'"
    " USING ERRCODE = 'disk_full'; END $$",
    "CREATE TRIGGER disk_full BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION disk_full()",
)
PG_DISK_BACK = ("DROP TRIGGER IF EXISTS disk_full ON tasks", "DROP FUNCTION IF EXISTS disk_full()")


async def test_on_postgresql_disk_full_answers_storage_full_and_readiness_says_so(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A full disk cannot be staged on the PostgreSQL server every developer
    # shares: a tablespace on a tmpfs is an object of the whole cluster, not of
    # this test's database. The server's own error for it, SQLSTATE 53100 from
    # a trigger in the test's database, goes through the real driver instead.
    url = database_for("postgresql", tmp_path, request)
    location: PostgresLocation = request.getfixturevalue("postgres")

    def configure(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=ScriptedExecutor())

    async with live_server(tmp_path, configure, database=url) as server:
        with postgres_changes(location, PG_DISK_FULL, PG_DISK_BACK):
            refused = await send(server, "echo hello")
            full = await server.client.get("/_a2a/health/ready")
        again = await send(server, "echo hello")
        back = await server.client.get("/_a2a/health/ready")
    assert storage_full(refused), refused
    assert full.status_code == 503
    assert "No space left on device" in full.json()["checks"]["storage"]
    assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (back.status_code, back.json()["checks"]["storage"]) == (200, "ok")


#: The same error for the agent's events only (a status row): the follow-up's message is stored.
PG_EVENTS_FULL = (
    PG_DISK_FULL[0],
    "CREATE TRIGGER disk_full BEFORE INSERT ON task_events FOR EACH ROW"
    " WHEN (NEW.kind = 'status') EXECUTE FUNCTION disk_full()",
)
PG_EVENTS_BACK = ("DROP TRIGGER IF EXISTS disk_full ON task_events", PG_DISK_BACK[1])


def last_kind(location: PostgresLocation, task_id: str) -> object:
    """The kind of the task's last event in its log."""
    with admin_connect(location) as admin:
        row = admin.execute(
            "SELECT kind FROM task_events WHERE task_id = %s ORDER BY seq DESC LIMIT 1", [task_id]
        ).fetchone()
    return None if row is None else row[0]


async def test_on_postgresql_a_process_starting_before_the_retry_leaves_the_task_paused(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Another process starting on the database ends the tasks no live process
    # holds whose log ends with a user's message (a follow-up under way at a
    # crash): the refused follow-up's task must say it is paused before then.
    url = database_for("postgresql", tmp_path, request)
    location: PostgresLocation = request.getfixturevalue("postgres")
    executor = WaitingContinuation()

    def configure(app: A2AApp) -> None:
        app.mount("", card=make_card(), executor=executor)

    async with live_server(tmp_path, configure, database=url) as server:
        task_id = await start(server, "ask")
        message = user_message("Ada", taskId=task_id)
        with postgres_changes(location, PG_EVENTS_FULL, PG_EVENTS_BACK):
            async with trio.open_nursery() as nursery:

                async def refused_while_full() -> None:
                    answer = await server.jsonrpc("SendMessage", {"message": message})
                    assert storage_full(answer), answer

                nursery.start_soon(refused_while_full)
                await executor.turn.reached.wait()
                executor.turn.release.set()
        with trio.fail_after(RECOVERY):  # the pause said again, as its log now ends
            while True:  # polled: the log is what the test watches
                if last_kind(location, task_id) == "status":
                    break
                await trio.sleep(0.05)
        executor = WaitingContinuation()
        executor.turn.release.set()
        async with live_server(tmp_path, configure, database=url) as other:
            started = await state(other, task_id)
            retried = await other.jsonrpc("SendMessage", {"message": message})
    assert started == "TASK_STATE_INPUT_REQUIRED"
    assert retried["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", retried


# --- the condition alone ----------------------------------------------------------------------


def test_full_lasts_until_a_write_succeeds_or_the_hold_passes_without_a_refusal() -> None:
    now = [0.0]
    condition = StorageCondition("a2a.db", hold=30.0, clock=lambda: now[0])
    no_space = OSError(errno.ENOSPC, "No space left on device")
    assert isinstance(condition.refused(no_space), StorageFullError)
    now[0] = 29.0
    assert condition.full == "full since 29 s: [Errno 28] No space left on device"
    now[0] = 30.0
    assert condition.full is None
    condition.refused(no_space)
    condition.wrote()
    assert condition.full is None


def test_what_counts_as_no_space_left() -> None:
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # as SQLite sets it
    assert is_disk_full(full)
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(psycopg.errors.DiskFull("could not extend file"))
    assert not is_disk_full(sqlite3.OperationalError("database is locked"))
    assert not is_disk_full(OSError(errno.EIO, "Input/output error"))

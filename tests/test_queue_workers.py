"""Queued agents: web processes take the messages, ``a2a-trio worker`` processes run them.

Two hypercorn processes serve ``tests.cluster_app`` with the agent queued,
and ``a2a-trio worker`` processes (the real command, configured by an
a2a.toml naming the same executor) run its executions, all on one
PostgreSQL database of this module's own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import IO, Any

import psycopg
import pytest
import trio

from a2a_trio.store.url import PostgresLocation, parse_database_url

from .conftest import user_message
from .postgres import admin_connect, execute, fresh_database, postgres_url, rows
from .servers import REPO, STARTUP_TIMEOUT, ServerProcess
from .test_cluster import (
    LEASE_SECONDS,
    LOGGED_SEQS,
    client,
    frames,
    rpc,
    start_server,
    start_task,
    state_of,
    wait_for_file,
    wait_for_state,
)

WORKER_CONFIG = """
[storage]
url = "{database}"

[cluster]
lease_seconds = {lease}

[runtime]
shutdown_grace = 10.0

[[agents]]
name = "default"
executor = "tests.cluster_app:ClusterExecutor"
card = "tests.conftest:make_card"
execution = "queued"
"""


class Worker:
    """``a2a-trio worker`` in a process group of its own."""

    def __init__(
        self,
        deployment: Deployment,
        name: str,
        *,
        config: Path | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.log_path = deployment.directory / f"{name}.log"
        self._log: IO[bytes] = self.log_path.open("ab")
        env = {
            **os.environ,
            "A2A_TRIO_DATABASE": deployment.database,
            "CLUSTER_TEST_DIR": str(deployment.directory),
            "CLUSTER_PROCESS_NAME": name,
        }
        command = [
            sys.executable,
            "-m",
            "a2a_trio.cli",
            "worker",
            "--config",
            str(config or deployment.config),
            *options,
        ]
        self.process = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while "working for default" not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.05)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self) -> None:
        """SIGTERM, without waiting (a worker's first stops it claiming, a second ends it)."""
        self.process.send_signal(signal.SIGTERM)

    def exited(self, within: float = 30) -> int:
        """The exit status of a worker already signalled (no further signal sent)."""
        status = self.process.wait(within)
        self._log.close()
        return status

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._log.close()
        return self.process.returncode


class Deployment:
    def __init__(self, database: str, directory: Path) -> None:
        self.database = database
        self.directory = directory
        self.config = directory / "a2a.toml"
        self.config.write_text(WORKER_CONFIG.format(database=database, lease=LEASE_SECONDS))
        self.web: list[ServerProcess] = []
        self.workers: list[Worker] = []

    def start_web(self, count: int) -> None:
        for n in range(count):
            self.web.append(
                start_server(self.database, self.directory, f"web{n}", CLUSTER_EXECUTION="queued")
            )

    def start_worker(self, *, config: Path | None = None, options: tuple[str, ...] = ()) -> Worker:
        worker = Worker(self, f"w{len(self.workers)}", config=config, options=options)
        self.workers.append(worker)
        return worker

    @contextmanager
    def only(self, worker: Worker) -> Iterator[None]:
        """Only ``worker`` claims work in the block: the others' claims skip every row.

        The others keep running (paused, a late heartbeat under load would
        have them found dead, and what they claim next failed for it).
        """
        execute(
            self.database,
            f"""
            CREATE FUNCTION only_worker() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                IF NEW.state = 'claimed' AND OLD.state = 'queued'
                        AND strpos(NEW.claimed_by, ':{worker.process.pid}:') = 0 THEN
                    RETURN NULL;
                END IF;
                RETURN NEW;
            END $$
            """,
        )
        execute(
            self.database,
            "CREATE TRIGGER only_worker BEFORE UPDATE ON queued_executions"
            " FOR EACH ROW EXECUTE FUNCTION only_worker()",
        )
        try:
            yield
        finally:
            execute(self.database, "DROP TRIGGER only_worker ON queued_executions")
            execute(self.database, "DROP FUNCTION only_worker")

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        for server in self.web:
            server.stop()


@pytest.fixture(scope="module")
def deployment(
    postgres: PostgresLocation, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    with fresh_database(postgres) as location:
        running = Deployment(postgres_url(location), tmp_path_factory.mktemp("queued"))
        try:
            running.start_web(2)
            running.start_worker()
            yield running
        finally:
            running.stop()


async def test_a_queued_message_runs_on_a_worker_and_continues_through_another_web_process(
    deployment: Deployment,
) -> None:
    web0, web1 = deployment.web
    paused = (await rpc(web0, "SendMessage", {"message": user_message("ask")}))["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    follow_up = user_message("Ada", taskId=paused["id"])
    done = (await rpc(web1, "SendMessage", {"message": follow_up}))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["text"] == "continued on w0"


#: Each queued execution, as it is deleted (its web process heard its outcome):
#: its state, and whether the transaction that wrote it last also wrote its
#: task last.
NOTE_HEARD = (
    "CREATE TABLE heard (id bigint, task_id text, state text, ended_with_task boolean)",
    """
    CREATE FUNCTION note_heard() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        INSERT INTO heard SELECT q.id, q.task_id, q.state, q.xmin = t.xmin
        FROM queued_executions q JOIN tasks t ON t.agent = q.agent AND t.id = q.task_id
        WHERE q.id = OLD.id;
        RETURN OLD;
    END $$
    """,
    "CREATE TRIGGER note_heard BEFORE DELETE ON queued_executions"
    " FOR EACH ROW EXECUTE FUNCTION note_heard()",
)


async def heard(deployment: Deployment, task_id: str, count: int) -> list[tuple[Any, ...]]:
    """The task's first ``count`` queued executions once deleted: (state, ended with task)."""
    query = "SELECT state, ended_with_task FROM heard WHERE task_id = ? ORDER BY id"
    with trio.fail_after(10):
        while len(found := rows(deployment.database, query, task_id)) < count:  # noqa: ASYNC110
            await trio.sleep(0.02)  # the web process deletes it soon after: nothing tells
    return found


async def test_a_queued_execution_ends_its_row_in_the_transaction_of_its_last_events(
    deployment: Deployment,
) -> None:
    # The worker's last round marks the row done and wakes the web process:
    # no transaction of its own, for a new task as for a follow-up. The web
    # process, once it has the outcome, deletes the row.
    for statement in NOTE_HEARD:
        execute(deployment.database, statement)
    web0, web1 = deployment.web
    paused = (await rpc(web0, "SendMessage", {"message": user_message("ask")}))["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert await heard(deployment, paused["id"], 1) == [("done", True)]
    follow_up = user_message("Ada", taskId=paused["id"])
    done = (await rpc(web1, "SendMessage", {"message": follow_up}))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert await heard(deployment, paused["id"], 2) == [("done", True), ("done", True)]
    left = "SELECT count(*) FROM queued_executions WHERE task_id = ?"
    assert rows(deployment.database, left, paused["id"]) == [(0,)]


async def test_a_web_process_publishes_what_the_workers_wake_up_carries(
    deployment: Deployment,
) -> None:
    # The worker's rounds wake the web processes with what they wrote: the one
    # waiting for the execution publishes that and reads nothing back. Shown
    # with a wake-up no worker sent, whose event the log never holds.
    web0, web1 = deployment.web
    message = user_message("hold")
    answer: dict[str, Any] = {}
    answered = trio.Event()

    async def send() -> None:
        answer.update(await rpc(web0, "SendMessage", {"message": message}))
        answered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        task_id, seq, snapshot = await working(deployment, message["messageId"])
        status = {"state": "TASK_STATE_INPUT_REQUIRED"}
        forged = {**json.loads(snapshot), "status": status}
        update = {"taskId": task_id, "contextId": forged["contextId"], "status": status}
        carried = [json.dumps(forged), [[seq + 1, "status", json.dumps({"statusUpdate": update})]]]
        payload = json.dumps(["default", task_id, seq + 1, seq, carried])
        execute(deployment.database, "SELECT pg_notify('a2a_events', ?)", payload)
        with trio.move_on_after(10):
            await answered.wait()
        canceled = await rpc(web1, "CancelTask", {"id": task_id})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert answer["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def working(deployment: Deployment, message_id: str) -> tuple[str, int, str]:
    """The task of the queued message ``message_id`` once WORKING: id, last seq, snapshot."""
    query = (
        "SELECT t.id, t.last_seq, t.snapshot::text FROM queued_executions q"
        " JOIN tasks t ON t.agent = q.agent AND t.id = q.task_id"
        " WHERE q.request::text LIKE ? AND t.state = 'TASK_STATE_WORKING'"
    )
    with trio.fail_after(10):
        while not (found := rows(deployment.database, query, f"%{message_id}%")):  # noqa: ASYNC110
            await trio.sleep(0.02)  # another process writes it: nothing tells
    task_id, seq, snapshot = found[0]
    return str(task_id), int(seq), str(snapshot)


async def test_a_queued_agents_direct_answer_reaches_its_client(deployment: Deployment) -> None:
    # Told by the worker's wake-up (its outcome in the payload); each is its
    # own, though both web processes hear both.
    async with trio.open_nursery() as nursery:
        answers: dict[int, dict[str, Any]] = {}

        async def send(n: int) -> None:
            message = user_message(f"reply hello-{n}")
            answers[n] = await rpc(deployment.web[n % 2], "SendMessage", {"message": message})

        for n in range(4):
            nursery.start_soon(send, n)
    for n, answer in answers.items():
        text = answer["message"]["parts"][0]["text"]
        assert text.startswith(f"hello-{n} w"), answer


def holding(task_id: str) -> tuple[str, ...]:
    """Statements that hold, while the test keeps advisory locks 4242 and 4243, the
    enqueue of a follow-up of ``task_id`` (its row numbered, not committed) and the
    claim of a message that says ``unclaimed`` (its row queued, its worker waiting)."""
    return (
        f"""
        CREATE FUNCTION hold_queue() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
            IF TG_OP = 'INSERT' AND NEW.task_id = '{task_id}' THEN
                PERFORM pg_advisory_xact_lock_shared(4242);
            ELSIF TG_OP = 'UPDATE' AND NEW.state = 'claimed'
                    AND strpos(NEW.request::text, 'unclaimed') > 0 THEN
                PERFORM pg_advisory_xact_lock_shared(4243);
            END IF;
            RETURN NEW;
        END $$
        """,
        "CREATE TRIGGER hold_queue BEFORE INSERT OR UPDATE ON queued_executions"
        " FOR EACH ROW EXECUTE FUNCTION hold_queue()",
    )


async def held_at(database: str, lock: int) -> None:
    """Return once a statement waits for advisory lock ``lock`` (of this database)."""
    waiting = (
        "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
        " WHERE d.datname = current_database() AND l.locktype = 'advisory'"
        " AND l.objid = ? AND NOT l.granted"
    )
    with trio.fail_after(10):
        while rows(database, waiting, lock) != [(1,)]:  # noqa: ASYNC110
            await trio.sleep(0.02)  # the statement waits: nothing tells


async def waiting_on_a_lock(
    watch: psycopg.Connection[tuple[object, ...]], query: str, count: int = 1
) -> list[int]:
    """The backends of this database whose statement like ``query`` waits for a lock,
    once there are ``count`` (``watch``: a connection already open, quick to ask)."""
    waiting = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query LIKE %s"
    )
    with trio.fail_after(10):
        while len(found := watch.execute(waiting, (query,)).fetchall()) < count:  # noqa: ASYNC110
            await trio.sleep(0.005)  # another process waits: nothing tells
    return [int(str(pid)) for (pid,) in found]


async def test_a_done_wake_up_heard_before_the_enqueue_returns_still_answers(
    deployment: Deployment,
) -> None:
    # A fast worker can finish an execution before the batch that queued it
    # has returned its row to the web process (the batch writes whatever
    # queued behind it first). Shown with the DONE wake-up of a follow-up's
    # row sent while its INSERT waits on a lock, then a DONE that answers an
    # unclaimed message of the same process: once that one is answered, the
    # web process has heard the first, before it knew the row was its own.
    web0 = deployment.web[0]
    database = deployment.database
    location = parse_database_url(database)
    assert isinstance(location, PostgresLocation)
    paused = (await rpc(web0, "SendMessage", {"message": user_message("ask")}))["task"]
    for statement in holding(paused["id"]):
        execute(database, statement)
    answers: dict[str, dict[str, Any]] = {}

    async def send(name: str, message: dict[str, Any]) -> None:
        answers[name] = await rpc(web0, "SendMessage", {"message": message})

    async def answered(name: str) -> None:
        with trio.fail_after(10):
            while name not in answers:  # noqa: ASYNC110
                await trio.sleep(0.02)  # set by send(): no event needed in a test

    try:
        with admin_connect(location) as lock:
            lock.execute("SELECT pg_advisory_lock(4242), pg_advisory_lock(4243)")
            async with trio.open_nursery() as nursery:
                marker = user_message("reply unclaimed")
                nursery.start_soon(send, "marker", marker)
                await held_at(database, 4243)
                ((marker_row, marker_task),) = rows(
                    database,
                    "SELECT id, task_id FROM queued_executions WHERE request::text LIKE ?",
                    f"%{marker['messageId']}%",
                )
                nursery.start_soon(send, "follow-up", user_message("Ada", taskId=paused["id"]))
                await held_at(database, 4242)
                ((row,),) = rows(
                    database,
                    "SELECT last_value FROM pg_sequences WHERE sequencename = ?",
                    "queued_executions_id_seq",
                )
                with lock.transaction():  # delivered in this order
                    early = answer_of(paused["id"], row, "told early")
                    lock.execute("SELECT pg_notify('a2a_done', %s)", (early,))
                    told = answer_of(marker_task, marker_row, "told")
                    lock.execute("SELECT pg_notify('a2a_done', %s)", (told,))
                await answered("marker")
                lock.execute("SELECT pg_advisory_unlock(4242)")
                await answered("follow-up")
    finally:
        execute(database, "DROP TRIGGER IF EXISTS hold_queue ON queued_executions")
        execute(database, "DROP FUNCTION IF EXISTS hold_queue")
    assert answers["marker"]["message"]["parts"][0]["text"] == "told"
    assert answers["follow-up"]["message"]["parts"][0]["text"] == "told early"


def answer_of(task_id: str, row: int, text: str) -> str:
    """A DONE wake-up of ``row``, of task ``task_id``, whose direct answer says ``text``."""
    answer = {"messageId": f"m-{row}", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    return json.dumps(["default", task_id, row, 0, json.dumps(answer), None])


#: The first time a worker marks done an execution whose answer says ``finish-once``,
#: PostgreSQL refuses the statement (a failover, a full disk: anything passing).
REFUSE_ONE_FINISH = (
    "CREATE SEQUENCE finishes_refused",
    """
    CREATE FUNCTION refuse_one_finish() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.state = 'done' AND strpos(coalesce(NEW.answer, ''), 'finish-once') > 0 THEN
            IF nextval('finishes_refused') = 1 THEN
                RAISE EXCEPTION 'the test refuses this finish once';
            END IF;
        END IF;
        RETURN NEW;
    END $$
    """,
    "CREATE TRIGGER refuse_one_finish BEFORE UPDATE ON queued_executions"
    " FOR EACH ROW EXECUTE FUNCTION refuse_one_finish()",
)


async def test_a_finish_the_database_refuses_is_written_again_and_its_client_answered(
    deployment: Deployment,
) -> None:
    # Nothing else would write it: the worker is alive, so no process takes
    # its lease and ends the execution for it.
    database = deployment.database
    for statement in REFUSE_ONE_FINISH:
        execute(database, statement)
    try:
        with trio.fail_after(LEASE_SECONDS + 10):
            message = user_message("reply finish-once")
            answer = await rpc(deployment.web[0], "SendMessage", {"message": message})
        ((tries,),) = rows(database, "SELECT last_value FROM finishes_refused")
    finally:
        execute(database, "DROP TRIGGER refuse_one_finish ON queued_executions")
        execute(database, "DROP FUNCTION refuse_one_finish")
        execute(database, "DROP SEQUENCE finishes_refused")
    assert answer["message"]["parts"][0]["text"].startswith("finish-once w")
    assert tries == 2  # refused, then written
    logged = "".join(worker.output() for worker in deployment.workers)
    assert "could not finish queued execution" in logged


#: Holds, while the test keeps advisory lock 4244, a worker's finish of an answer
#: that says ``read-again``.
HOLD_FINISH = (
    """
    CREATE FUNCTION hold_finish() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.state = 'done' AND strpos(coalesce(NEW.answer, ''), 'read-again') > 0 THEN
            PERFORM pg_advisory_xact_lock_shared(4244);
        END IF;
        RETURN NEW;
    END $$
    """,
    "CREATE TRIGGER hold_finish BEFORE UPDATE ON queued_executions"
    " FOR EACH ROW EXECUTE FUNCTION hold_finish()",
)


@contextmanager
def finishes_held(database: str) -> Iterator[None]:
    """:data:`HOLD_FINISH`'s trigger on ``database`` for the block."""
    for statement in HOLD_FINISH:
        execute(database, statement)
    try:
        yield
    finally:
        execute(database, "DROP TRIGGER hold_finish ON queued_executions")
        execute(database, "DROP FUNCTION hold_finish")


def long_reply(web: ServerProcess, answers: list[dict[str, Any]]) -> Callable[[], Awaitable[None]]:
    """A SendMessage whose answer says ``read-again`` and is too long for its DONE wake-up."""

    async def send() -> None:
        message = user_message("reply read-again " + "x" * 9000)
        answers.append(await rpc(web, "SendMessage", {"message": message}))

    return send


async def cut_off_a_read(
    location: PostgresLocation,
    held: int,
    tables: str,
    reader: str,
    client: Callable[[], Awaitable[None]],
    *,
    readers: int = 1,
) -> None:
    """Run ``client`` while a write it waits for is held (advisory lock ``held``, taken by a
    trigger), then end the connection of the read that follows it (a statement like
    ``reader``; once ``readers`` wait), held for a moment behind a lock on ``tables``
    queued behind the write.

    The table lock stops other statements too (heartbeats): it is watched from a
    connection already open, so that it lasts a moment only. Returns once ``client`` does.
    """
    database = postgres_url(location)
    with admin_connect(location) as watch, admin_connect(location) as table:
        watch.execute("SELECT pg_advisory_lock(%s)", (held,))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client)
            await held_at(database, held)
            table.execute("BEGIN")
            take = partial(table.execute, f"LOCK TABLE {tables}")
            async with trio.open_nursery() as taking:
                taking.start_soon(trio.to_thread.run_sync, take)
                await waiting_on_a_lock(watch, "LOCK TABLE%")  # queued behind the write
                watch.execute("SELECT pg_advisory_unlock(%s)", (held,))
            for pid in await waiting_on_a_lock(watch, reader, readers):
                watch.execute("SELECT pg_terminate_backend(%s)", (pid,))
            table.execute("COMMIT")


async def test_an_outcome_whose_read_was_lost_is_read_again(deployment: Deployment) -> None:
    # An answer too long for its DONE wake-up is read from the row. Here the
    # web process's read waits behind a table lock and its connection is
    # ended under it: the web process reads again, and its client is answered.
    database = deployment.database
    location = parse_database_url(database)
    assert isinstance(location, PostgresLocation)
    answers: list[dict[str, Any]] = []
    send = long_reply(deployment.web[0], answers)

    with finishes_held(database), trio.fail_after(20):  # answered only if read again
        await cut_off_a_read(location, 4244, "queued_executions", "SELECT state, answer%", send)
    assert answers[0]["message"]["parts"][0]["text"].startswith("read-again xxx")
    assert "was lost: terminating connection" in deployment.web[0].output()  # its one line


async def test_a_read_back_lost_after_the_outcome_is_read_again(deployment: Deployment) -> None:
    # An outcome read from its row says nothing of the task's last event, so
    # the web process reads the task back before it answers. Here that read
    # waits behind a lock on the tasks table and its connection is ended
    # under it: the web process reads again, and its client gets the answer
    # the worker gave, not an InternalError.
    database, web0 = deployment.database, deployment.web[0]
    location = parse_database_url(database)
    assert isinstance(location, PostgresLocation)
    answers: list[dict[str, Any]] = []
    send = long_reply(web0, answers)
    logged = len(web0.output())
    with (
        finishes_held(database),
        trio.fail_after(20),  # answered only if its read-back is tried again
        admin_connect(location) as watch,
        admin_connect(location) as table,
    ):
        watch.execute("SELECT pg_advisory_lock(4244)")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            await held_at(database, 4244)
            # A direct answer writes no task: the lock is granted at once,
            # and lasts until the read-back waiting for it is ended.
            table.execute("BEGIN")
            table.execute("LOCK TABLE tasks")
            watch.execute("SELECT pg_advisory_unlock(4244)")
            for pid in await waiting_on_a_lock(watch, "%SELECT t.id, NULL::bigint%"):
                watch.execute("SELECT pg_terminate_backend(%s)", (pid,))
            table.execute("COMMIT")
    assert answers[0]["message"]["parts"][0]["text"].startswith("read-again xxx")
    assert "was lost: terminating connection" in web0.output()[logged:]  # its one line


#: Holds, while the test keeps advisory lock 4245, the round that ends a task.
HOLD_ENDING = (
    """
    CREATE FUNCTION hold_ending() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF NEW.state = 'TASK_STATE_COMPLETED' THEN
            PERFORM pg_advisory_xact_lock_shared(4245);
        END IF;
        RETURN NEW;
    END $$
    """,
    "CREATE TRIGGER hold_ending BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION hold_ending()",
)


async def test_a_subscriber_hears_a_last_round_whose_read_back_was_lost(
    deployment: Deployment,
) -> None:
    # The task's last round is too long for its wake-up: the subscriber's web
    # process reads it back. That read waits behind a table lock held for a
    # moment, and its connection is ended under it: no other wake-up comes,
    # so the process reads again, and the stream ends with the task.
    database = deployment.database
    location = parse_database_url(database)
    assert isinstance(location, PostgresLocation)
    task = await start_task(deployment.web[0], "long 9000")
    for statement in HOLD_ENDING:
        execute(database, statement)
    received: list[tuple[str | None, dict[str, Any]]] = []

    async def subscribe() -> None:
        def started() -> None:  # the agent goes on once the subscriber has its first frame
            (deployment.directory / f"{task['id']}.go").touch()

        params = {"id": task["id"]}
        received.extend(
            await frames(deployment.web[1], "SubscribeToTask", params, after_first=started)
        )

    try:
        with trio.fail_after(20):  # it ends only if the read-back is tried again
            # Both web processes read it back: the one that queued it (it waits
            # for the execution, and would read again itself) and the subscriber's.
            await cut_off_a_read(
                location,
                4245,
                "tasks, task_events",
                "%SELECT t.id, NULL::bigint%",
                subscribe,
                readers=2,
            )
    finally:
        execute(database, "DROP TRIGGER hold_ending ON tasks")
        execute(database, "DROP FUNCTION hold_ending")
    assert state_of(received[-1][1]) == "TASK_STATE_COMPLETED"
    assert "was lost: terminating connection" in deployment.web[1].output()  # its one line


async def test_a_web_process_streams_what_the_worker_records(deployment: Deployment) -> None:
    received = await frames(
        deployment.web[0], "SendStreamingMessage", {"message": user_message("tick 5")}
    )
    states = [state_of(result) for _, result in received]
    assert states[-1] == "TASK_STATE_COMPLETED"
    ids = [int(event_id) for event_id, _ in received if event_id is not None]
    assert ids == list(range(1, len(ids) + 1))


async def test_a_cancel_on_a_web_process_stops_the_execution_on_its_worker(
    deployment: Deployment,
) -> None:
    web = deployment.web[1]
    task = await start_task(web, "hold")
    await wait_for_state(web, task["id"], "TASK_STATE_WORKING")
    canceled = await rpc(web, "CancelTask", {"id": task["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    stopped = deployment.directory / f"{task['id']}.stopped"
    await wait_for_file(stopped)
    assert stopped.read_text().split()[1].startswith("w")  # where it ran: on a worker


async def test_a_task_of_a_killed_worker_fails_within_the_lease(deployment: Deployment) -> None:
    doomed = deployment.start_worker()
    survivor = deployment.workers[0]
    web = deployment.web[0]
    with deployment.only(doomed):
        held = [await start_task(web, "hold") for _ in range(2)]
    for task in held:
        await wait_for_file(deployment.directory / f"{task['id']}.holder.{doomed.name}")
    with deployment.only(survivor):
        started = [*held, await start_task(web, "hold")]  # and one on the survivor
    doomed.kill()
    killed = time.monotonic()
    for task in held:
        failed = await wait_for_state(
            web, task["id"], "TASK_STATE_FAILED", within=LEASE_SECONDS + 5
        )
        assert "server stopped" in failed["status"]["message"]["parts"][0]["text"]
    assert time.monotonic() - killed <= LEASE_SECONDS + 2
    assert survivor.process.poll() is None
    for task in started:  # the survivor's: they would hold it up at the end
        if task not in held:
            await rpc(web, "CancelTask", {"id": task["id"]})


async def test_a_queued_execution_whose_worker_died_before_starting_runs_once_elsewhere(
    deployment: Deployment,
) -> None:
    web = deployment.web[1]
    # A worker that claims the next execution and dies before starting it: a
    # member whose heartbeat runs out a second from now, holding the row in
    # state "claimed" (a dead member is forgotten only once it holds nothing).
    execute(
        deployment.database,
        "INSERT INTO a2a_members (id, host, pid, lease_seconds, started_at, heartbeat_at)"
        " VALUES ('ghost', 'elsewhere', 1, 1, now(), now())",
    )
    execute(
        deployment.database,
        "CREATE FUNCTION ghost_claims() RETURNS trigger AS $$ BEGIN"
        " NEW.state := 'claimed'; NEW.claimed_by := 'ghost'; RETURN NEW; END $$ LANGUAGE plpgsql",
    )
    execute(
        deployment.database,
        "CREATE TRIGGER ghost_claims BEFORE INSERT ON queued_executions"
        " FOR EACH ROW EXECUTE FUNCTION ghost_claims()",
    )
    try:
        with trio.fail_after(LEASE_SECONDS + 10):
            answer = await rpc(web, "SendMessage", {"message": user_message("count")})
    finally:
        execute(deployment.database, "DROP TRIGGER ghost_claims ON queued_executions")
        execute(deployment.database, "DROP FUNCTION ghost_claims()")
    task = answer["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    runs = (deployment.directory / f"{task['id']}.runs").read_text().split()
    assert len(runs) == 1, runs  # run once, by a live worker


async def test_sigterm_lets_a_worker_finish_what_it_runs(deployment: Deployment) -> None:
    draining = deployment.start_worker()
    web = deployment.web[0]
    with deployment.only(draining):
        tasks = [await start_task(web, "tick 20") for _ in range(4)]
    for task in tasks:
        await wait_for_file(deployment.directory / f"{task['id']}.holder.{draining.name}")
    status = await trio.to_thread.run_sync(draining.stop)
    assert status == 0, draining.output()
    for task in tasks:  # finished on the draining worker, not ended by the shutdown
        done = await wait_for_state(web, task["id"], "TASK_STATE_COMPLETED", within=10)
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"


# --- a worker that dies under a waiting client ------------------------------------------------


async def test_a_blocking_send_whose_worker_is_killed_is_answered_failed(
    deployment: Deployment,
) -> None:
    web = deployment.web[0]
    answers: list[dict[str, Any]] = []

    async def send() -> None:
        answers.append(await rpc(web, "SendMessage", {"message": user_message("hold")}))

    await worker_killed_under(deployment, web, send)
    task = answers[0]["task"]
    # The client hears how the task ended, as GetTask tells it: not WORKING.
    assert task["status"]["state"] == "TASK_STATE_FAILED", task["status"]
    stored = await rpc(web, "GetTask", {"id": task["id"]})
    assert stored["status"]["state"] == "TASK_STATE_FAILED"
    # Ended by the process that found the worker dead, the row is the web
    # process's to forget once it heard the ending: the queue keeps none.
    left = "SELECT count(*) FROM queued_executions WHERE task_id = ?"
    with trio.fail_after(10):
        while rows(deployment.database, left, task["id"]) != [(0,)]:  # noqa: ASYNC110
            await trio.sleep(0.05)  # deleted with the web's next lease release: nothing tells


async def test_a_stream_whose_worker_is_killed_ends_with_the_failure(
    deployment: Deployment,
) -> None:
    web = deployment.web[1]
    received: list[tuple[str | None, dict[str, Any]]] = []

    async def stream() -> None:
        received.extend(
            await frames(web, "SendStreamingMessage", {"message": user_message("hold")})
        )

    await worker_killed_under(deployment, web, stream)
    states = [state_of(result) for _, result in received]
    assert states[-1] == "TASK_STATE_FAILED", states
    task_id = received[0][1]["task"]["id"]
    logged = rows(deployment.database, LOGGED_SEQS, task_id)
    ids = [int(event_id) for event_id, _ in received if event_id is not None]
    assert ids == [seq for (seq,) in logged], "the stream relays the log to its last event"


async def test_a_follow_up_whose_worker_is_killed_before_its_first_event_is_answered_failed(
    deployment: Deployment,
) -> None:
    # The follow-up is in the history once its execution starts; the worker
    # dies while the agent works on it, before it records anything.
    web = deployment.web[0]
    asked = await rpc(web, "SendMessage", {"message": user_message("ask")})
    task_id = asked["task"]["id"]
    assert asked["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answers: list[dict[str, Any]] = []

    async def send() -> None:
        follow_up = user_message("silent", taskId=task_id)
        answers.append(await rpc(web, "SendMessage", {"message": follow_up}))

    doomed = deployment.start_worker()
    with trio.fail_after(LEASE_SECONDS + 20):
        async with trio.open_nursery() as nursery:
            with deployment.only(doomed):
                nursery.start_soon(send)
                await wait_for_file(deployment.directory / f"{task_id}.silent.{doomed.name}")
            doomed.kill()
    assert answers[0]["task"]["status"]["state"] == "TASK_STATE_FAILED", answers
    stored = await rpc(web, "GetTask", {"id": task_id})
    assert stored["status"]["state"] == "TASK_STATE_FAILED"
    assert stored["history"][-1]["role"] == "ROLE_AGENT"  # the ending's message


async def worker_killed_under(
    deployment: Deployment, web: ServerProcess, client: Callable[[], Awaitable[None]]
) -> None:
    """Run ``client`` until it returns; a new worker that runs its "hold" is SIGKILLed."""
    doomed = deployment.start_worker()
    with trio.fail_after(LEASE_SECONDS + 20):
        async with trio.open_nursery() as nursery:
            with deployment.only(doomed):
                nursery.start_soon(client)
                holder = await wait_for_any_file(deployment.directory, f".holder.{doomed.name}")
                await wait_for_state(web, holder.name.split(".")[0], "TASK_STATE_WORKING")
            doomed.kill()


async def wait_for_any_file(directory: Path, suffix: str) -> Path:
    """The first file in ``directory`` named ``*suffix`` (another process writes it)."""
    with trio.fail_after(10):
        while True:
            found = [path for path in directory.iterdir() if path.name.endswith(suffix)]  # noqa: ASYNC240
            if found:
                return found[0]
            await trio.sleep(0.01)


# --- a worker that stops ------------------------------------------------------------------


#: Queued executions no worker has begun.
WAITING = "SELECT claimed_by FROM queued_executions WHERE state IN ('queued', 'claimed')"


def queued_rows(deployment: Deployment, task_id: str) -> list[tuple[str, str | None]]:
    """The task's queued executions: (state, claimed_by), oldest first."""
    return [
        (state, claimed_by)
        for state, claimed_by in rows(
            deployment.database,
            "SELECT state, claimed_by FROM queued_executions WHERE task_id = %s ORDER BY id",
            task_id,
        )
    ]


async def signalled_while_running(
    deployment: Deployment, web: ServerProcess, text: str
) -> tuple[Worker, dict[str, Any]]:
    """A new worker running ``text``'s execution, SIGTERMed (it says it is stopping)."""
    worker = deployment.start_worker()
    with deployment.only(worker):
        task = await start_task(web, text)
        await wait_for_file(deployment.directory / f"{task['id']}.holder.{worker.name}")
    worker.signal()
    with trio.fail_after(10):
        while "shutting down:" not in worker.output():  # noqa: ASYNC110
            await trio.sleep(0.02)
    return worker, task


async def test_a_stopping_worker_claims_nothing_and_finishes_work_longer_than_ten_seconds(
    deployment: Deployment,
) -> None:
    # Default settings (no [worker] grace): 12 s of work outlives the old 10 s grace.
    web = deployment.web[0]
    draining, task = await signalled_while_running(deployment, web, "tick 240")
    async with trio.open_nursery() as nursery:
        # While only the stopping worker runs (well within a lease), what comes waits.
        with deployment.only(draining):
            nursery.start_soon(start_task, web, "tick 1")
            with trio.fail_after(5):
                while not rows(deployment.database, WAITING):  # noqa: ASYNC110
                    await trio.sleep(0.02)
            await trio.sleep(LEASE_SECONDS / 2)  # two heartbeats: either would say it waits
            assert [claimed_by for (claimed_by,) in rows(deployment.database, WAITING)] == [None]
    status = await trio.to_thread.run_sync(draining.exited)
    assert status == 0, draining.output()
    done = await wait_for_state(web, task["id"], "TASK_STATE_COMPLETED", within=20)
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_second_signal_stops_a_draining_worker_at_once(deployment: Deployment) -> None:
    web = deployment.web[1]
    draining, task = await signalled_while_running(deployment, web, "hold")
    draining.signal()
    signalled = time.monotonic()
    status = await trio.to_thread.run_sync(draining.exited)
    assert status == 0, draining.output()
    assert time.monotonic() - signalled < 5
    failed = await wait_for_state(web, task["id"], "TASK_STATE_FAILED")
    assert "shut down" in failed["status"]["message"]["parts"][0]["text"]


async def test_a_restartable_agents_unfinished_execution_runs_again_on_another_worker(
    deployment: Deployment,
) -> None:
    config = deployment.directory / "restartable.toml"
    config.write_text(
        deployment.config.read_text().replace(
            'execution = "queued"', 'execution = "queued"\nrestartable = true'
        )
    )
    stopping = deployment.start_worker(config=config, options=("--grace", "0.5"))
    web = deployment.web[0]
    with deployment.only(stopping):
        task = await start_task(web, "hold")
        await wait_for_file(deployment.directory / f"{task['id']}.holder.{stopping.name}")
        stopping.signal()
        status = await trio.to_thread.run_sync(stopping.exited)
        assert status == 0, stopping.output()
        assert "handed back" in stopping.output()
        assert queued_rows(deployment, task["id"]) == [("queued", None)]
    # Run again from the start by another worker, on the task as it was left.
    done = await wait_for_state(web, task["id"], "TASK_STATE_COMPLETED", within=20)
    ran_again_on = done["artifacts"][0]["parts"][0]["text"]
    assert ran_again_on.startswith("continued on w"), ran_again_on
    assert ran_again_on != f"continued on {stopping.name}"
    user_texts = [m["parts"][0]["text"] for m in done["history"] if m["role"] == "ROLE_USER"]
    assert user_texts == ["hold"], "the message is in the history once"


#: Every status row refused as PostgreSQL refuses a write when its disk is full (SQLSTATE 53100).
STATUS_DISK_FULL = (
    "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " RAISE EXCEPTION 'could not extend file: No space left on device'"
    " USING ERRCODE = 'disk_full'; END $$",
    "CREATE TRIGGER disk_full BEFORE INSERT ON task_events FOR EACH ROW"
    " WHEN (NEW.kind = 'status') EXECUTE FUNCTION disk_full()",
)
STATUS_DISK_BACK = ("DROP TRIGGER IF EXISTS disk_full ON task_events", "DROP FUNCTION disk_full()")


def storage_full(answer: dict[str, Any]) -> bool:
    reasons = [detail.get("reason") for detail in answer.get("error", {}).get("data") or []]
    return reasons == ["STORAGE_FULL"]


async def test_a_follow_up_the_worker_finds_no_space_for_is_answered_storage_full(
    deployment: Deployment,
) -> None:
    # Its message is stored, the agent's first event is not: the worker
    # answers STORAGE_FULL, the task stays paused for the retry. The web
    # process took that for a worker that died within the follow-up and
    # waited for an ending that never came: its clients heard nothing.
    web = deployment.web[0]
    task_id = (await rpc(web, "SendMessage", {"message": user_message("ask")}))["task"]["id"]
    body = {"jsonrpc": "2.0", "id": 1, "params": {}}
    async with client(web) as http:
        for statement in STATUS_DISK_FULL:
            execute(deployment.database, statement)
        try:
            with trio.fail_after(60):
                message = user_message("go", taskId=task_id)
                blocking = await http.post(
                    "/jsonrpc",
                    json={**body, "method": "SendMessage", "params": {"message": message}},
                )
                message = user_message("go", taskId=task_id)
                streamed = []
                async with http.stream(
                    "POST",
                    "/jsonrpc",
                    json={**body, "method": "SendStreamingMessage", "params": {"message": message}},
                ) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data:"):
                            streamed.append(json.loads(line[5:]))
        finally:
            for statement in STATUS_DISK_BACK:
                execute(deployment.database, statement)
        paused = (await rpc(web, "GetTask", {"id": task_id}))["status"]["state"]
    assert storage_full(blocking.json()), blocking.text
    assert storage_full(streamed[-1]), streamed
    assert paused == "TASK_STATE_INPUT_REQUIRED"

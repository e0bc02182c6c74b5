"""An agent for tests with several server processes on one PostgreSQL database.

Served by hypercorn like ``tests.scripted_app``; each process of a test runs
it on the same database (``A2A_TRIO_DATABASE``) with a short lease
(``A2A_TRIO_LEASE_SECONDS``). What the executions do is written to files in
``CLUSTER_TEST_DIR``, which every process of the test shares, so that a test
sees what ran where and when.

``tick N``  WORKING, then N progress updates 50 ms apart, then COMPLETED
``burst N [MS]`` WORKING, then (once the file ``<task id>.go`` exists) N progress
            updates MS ms apart (1 unless said), then COMPLETED
``count``   INPUT_REQUIRED after 5 ms, each run noted (and any overlap with another
            run of the same task, in any process, as a violation); a follow-up ``count``
            runs again
``long N``  WORKING, then (once the file ``<task id>.go`` exists) COMPLETED with an
            artifact of N characters (a last round too long for its wake-up)
``ask``     INPUT_REQUIRED; any other follow-up completes with an artifact
``hold``    WORKING, then waits for good; notes the time it stopped when cancelled
``silent``  (a follow-up) notes where it runs, then waits for good, recording nothing
            (an agent still calling its model for the answer)

Webhooks to 127.0.0.1 are allowed, retried after 0.1 s. ``CLUSTER_EXECUTION=queued``
mounts the agent queued: ``a2a-trio worker`` processes run its executions.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import trio

from a2a_trio import A2AApp
from a2a_trio.protocol import Message, Part, Role
from a2a_trio.push import PushSettings
from a2a_trio.runtime import AgentExecutor, EventQueue, RequestContext, TaskUpdater

from .conftest import make_card

DIRECTORY = Path(os.environ.get("CLUSTER_TEST_DIR", "."))
#: Which of the test's processes this is (p0, p1, ...).
NAME = os.environ.get("CLUSTER_PROCESS_NAME", "")


def note(name: str, line: str) -> None:
    """Append a line to a shared file (one write: lines of processes do not mix)."""
    with open(DIRECTORY / name, "a") as file:
        file.write(line + "\n")


class ClusterExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        command, _, rest = context.user_text().partition(" ")
        continuing = context.current_task is not None
        if command == "silent":
            note(f"{context.task_id}.silent.{NAME}", "")
            await trio.sleep_forever()
        if command == "reply":  # a direct answer: no task
            said = Message(message_id="reply", role=Role.AGENT, parts=[Part(text=f"{rest} {NAME}")])
            await queue.enqueue_event(said)
            return
        await updater.start_work()
        if command == "count":
            await self._count(context, updater)
            return
        if continuing and command != "ask":
            await updater.add_artifact(f"continued on {NAME}", name="answer")
            await updater.complete()
            return
        match command:
            case "tick":
                note(f"{context.task_id}.holder.{NAME}", "")
                for n in range(int(rest or "3")):
                    await trio.sleep(0.05)
                    await updater.start_work(f"tick {n + 1}")
                await updater.complete()
            case "burst":
                # Not before the test's subscriber has its first frame (it writes the
                # file then): on a loaded machine the whole burst could otherwise end
                # before the subscription begins, and an ended task takes none.
                while not (DIRECTORY / f"{context.task_id}.go").exists():  # noqa: ASYNC110
                    await trio.sleep(0.005)
                count, _, pause = rest.partition(" ")
                for n in range(int(count)):
                    await trio.sleep(int(pause or "1") / 1000)
                    await updater.start_work(f"burst {n + 1}")
                await updater.complete()
            case "long":
                while not (DIRECTORY / f"{context.task_id}.go").exists():  # noqa: ASYNC110
                    await trio.sleep(0.005)
                await updater.add_artifact("x" * int(rest), name="long")
                await updater.complete()
            case "ask":
                await updater.requires_input("And then?")
            case "hold":
                note(f"{context.task_id}.holder.{NAME}", "")
                try:
                    await trio.sleep_forever()
                finally:
                    note(f"{context.task_id}.stopped", f"{time.time()} {NAME}")

    async def _count(self, context: RequestContext, updater: TaskUpdater) -> None:
        running = DIRECTORY / f"{context.task_id}.running"
        try:
            # O_EXCL: only one run of the task may hold the file, whichever process it is in.
            os.close(os.open(running, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            note("violations", f"{context.task_id} ran twice at once")
            raise
        try:
            note(f"{context.task_id}.runs", NAME)
            await trio.sleep(0.005)
        finally:
            running.unlink()
        await updater.requires_input("again?")


app = A2AApp(
    database=os.environ["A2A_TRIO_DATABASE"],
    lease_seconds=float(os.environ.get("A2A_TRIO_LEASE_SECONDS", "10")),
    push_settings=PushSettings(allowed_hosts=("127.0.0.1",), backoff=0.1, max_wait=0.5),
)
app.mount(
    "",
    card=make_card(),
    executor=ClusterExecutor(),
    execution="queued" if os.environ.get("CLUSTER_EXECUTION") == "queued" else "inline",
)

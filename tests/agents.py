"""Executors the tests drive: each behaviour is chosen by the message's first word."""

from __future__ import annotations

import trio

from a2a_trio import (
    AgentExecutor,
    EventQueue,
    RequestContext,
    TaskState,
    TaskStatus,
    TaskUpdater,
)
from a2a_trio.protocol import Message, Part, Role, TaskStatusUpdateEvent


class Gate:
    """Lets a test hold an executor at a point and release it."""

    def __init__(self) -> None:
        self.reached = trio.Event()
        self.release = trio.Event()

    async def pass_through(self) -> None:
        self.reached.set()
        await self.release.wait()


class ScriptedExecutor(AgentExecutor):
    """Does what the first word of the message says.

    ``echo``      complete with an artifact repeating the rest
    ``ask``       WORKING, then INPUT_REQUIRED with a question (continue with any text)
    ``auth``      WORKING, then AUTH_REQUIRED
    ``reply``     answer with a single Message, no task
    ``raise``     raise RuntimeError after WORKING
    ``raise-now`` raise before any event
    ``hold``      WORKING, then wait on ``self.gate`` before completing
    ``stubborn``  WORKING, then sleep for an hour, ignoring cancel requests
    ``loop``      WORKING, then progress every 100 ms for good (``progress_times``)
    ``illegal``   WORKING, SUBMITTED (refused), then COMPLETED
    ``silent``    return without any event
    ``forget``    WORKING, then return without finishing
    ``reject``    REJECTED from SUBMITTED
    ``chunks``    WORKING, an artifact in three appended chunks, COMPLETED
    ``sleep N``   WORKING, then COMPLETED after N seconds (trio's clock)
    """

    def __init__(self) -> None:
        self.gate = Gate()
        self.cancel_calls = 0
        self.executions = 0
        #: When a ``loop`` execution last reported progress, and when it stopped.
        self.progress_times: list[float] = []
        self.loop_stopped_at: float | None = None

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        self.executions += 1
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        text = context.user_text()
        command, _, rest = text.partition(" ")
        if command == "reply":
            await queue.enqueue_event(
                Message(
                    message_id="reply-1",
                    role=Role.AGENT,
                    parts=[Part(text=f"you said: {rest}")],
                    context_id=context.context_id,
                )
            )
            return
        if command == "raise-now":
            raise RuntimeError("boom before anything")
        if command == "silent":
            return
        continuing = context.current_task is not None
        if not continuing:
            await updater.submit()
        if command == "reject":
            await updater.reject("not for me")
            return
        await updater.start_work()
        if continuing and command not in ("ask", "auth"):
            await updater.add_artifact(f"continued with: {text}", name="answer")
            await updater.complete("done")
            return
        match command:
            case "ask":
                await updater.requires_input("What is your name?")
            case "auth":
                await updater.requires_auth("Please sign in.")
            case "raise":
                raise RuntimeError("the agent broke")
            case "hold":
                await self.gate.pass_through()
                await updater.add_artifact("released", name="answer")
                await updater.complete()
            case "stubborn":
                await trio.sleep(3600)
            case "loop":
                try:
                    while True:
                        await trio.sleep(0.1)
                        self.progress_times.append(trio.current_time())
                        await updater.start_work("still going")
                finally:
                    self.loop_stopped_at = trio.current_time()
            case "illegal":
                await queue.enqueue_event(
                    TaskStatusUpdateEvent(
                        task_id=context.task_id,
                        context_id=context.context_id,
                        status=TaskStatus(state=TaskState.SUBMITTED),
                    )
                )
                await updater.complete()
            case "forget":
                return
            case "sleep":
                await trio.sleep(float(rest))
                await updater.complete("slept")
            case "chunks":
                artifact_id = await updater.add_artifact("one ", append=False)
                await updater.add_artifact("two ", artifact_id=artifact_id, append=True)
                await updater.add_artifact(
                    "three", artifact_id=artifact_id, append=True, last_chunk=True
                )
                await updater.complete()
            case _:
                await updater.add_artifact(rest or text, name="echo")
                await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        """Marks the task CANCELED, except for ``stubborn`` and ``loop`` tasks, which it ignores."""
        self.cancel_calls += 1
        history = await context.history()
        first = history[0].parts[0].text if history else ""
        if first and first.startswith(("stubborn", "loop")):
            return
        await TaskUpdater(queue, context.task_id, context.context_id).cancel("stopped on request")

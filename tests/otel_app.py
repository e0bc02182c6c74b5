"""Agents for the OpenTelemetry tests: one that calls another agent, one on asyncio.

Served in-process by tests/test_otel.py, and by hypercorn in child processes
by tests/test_otel_export.py (``tests.otel_app:app``, configured only by
``OTEL_*`` variables and these): ``A2A_TRIO_DATABASE`` names the database,
``OTEL_TEST_PEER`` the agent ``/relay`` calls. Webhooks to 127.0.0.1 are allowed.

``/relay``    sends the message's text to its peer through A2AClient (blocking),
              completes with the peer's answer as its artifact
``/echo``     the scripted agent (tests/agents.py)
``/asyncio``  on the asyncio bridge: completes with the trace id current in it
"""

from __future__ import annotations

import os

from a2a_trio import A2AApp, A2AClient, AsyncioAgentExecutor, AsyncioEventQueue
from a2a_trio.client import text_of
from a2a_trio.push import PushSettings
from a2a_trio.runtime import AgentExecutor, EventQueue, RequestContext, TaskUpdater

from .agents import ScriptedExecutor
from .conftest import make_card

PEER_ENV = "OTEL_TEST_PEER"


class RelayExecutor(AgentExecutor):
    """Asks its peer agent, over A2A, and answers with what the peer said."""

    def __init__(self, peer: str | None = None) -> None:
        self.peer = peer

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        await updater.start_work()
        peer = self.peer or os.environ[PEER_ENV]
        async with await A2AClient.connect(peer) as client:
            answer = await client.send_message(context.user_text())
        await updater.add_artifact(text_of(answer), name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


class TraceIdExecutor(AsyncioAgentExecutor):
    """On asyncio: answers with the id of the trace its code runs in (hex, or "none")."""

    async def execute(self, context: RequestContext, queue: AsyncioEventQueue) -> None:
        from opentelemetry import trace

        span = trace.get_current_span().get_span_context()
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        text = format(span.trace_id, "032x") if span.is_valid else "none"
        await updater.add_artifact(text, name="trace")
        await updater.complete()


PUSH_SETTINGS = PushSettings(allowed_hosts=("127.0.0.1",), backoff=0.1, max_wait=0.1)


def mount_all(app: A2AApp, peer: str | None = None) -> None:
    """The three agents on ``app``: ``/relay`` (asking ``peer``), ``/echo``, ``/asyncio``."""
    app.mount("/relay", card=make_card(name="Relay"), executor=RelayExecutor(peer), name="relay")
    app.mount("/echo", card=make_card(name="Echo"), executor=ScriptedExecutor(), name="echo")
    app.mount(
        "/asyncio", card=make_card(name="Asyncio"), executor=TraceIdExecutor(), name="asyncio"
    )


if "A2A_TRIO_DATABASE" in os.environ:  # served by hypercorn (tests/test_otel_export.py)
    app = A2AApp(database=os.environ["A2A_TRIO_DATABASE"], push_settings=PUSH_SETTINGS)
    mount_all(app)

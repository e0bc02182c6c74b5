"""The smallest useful agent: it echoes, as a completed task.

Serve it with::

    hypercorn --worker-class trio examples.echo_agent:app
"""

from __future__ import annotations

from a2a_trio import (
    A2AApp,
    AgentCapabilities,
    AgentCard,
    AgentExecutor,
    AgentSkill,
    EventQueue,
    RequestContext,
    TaskUpdater,
)


class ShoutingEchoExecutor(AgentExecutor):
    """Repeats the user's text in capitals."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        await updater.add_artifact(context.user_text().upper(), name="shout")
        await updater.complete()


card = AgentCard(
    name="Shouting Echo",
    description="Repeats what you say, louder.",
    version="1.0.0",
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[AgentSkill(id="shout", name="Shout", description="Echo in capitals.", tags=["echo"])],
)

app = A2AApp(database="echo_agent.db")
app.mount("/echo", card=card, executor=ShoutingEchoExecutor(), name="echo")

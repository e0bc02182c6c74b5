"""The bundled example agent: echoes what it is told, as a completed task."""

from __future__ import annotations

from .protocol import AgentCapabilities, AgentCard, AgentSkill
from .runtime import AgentExecutor, EventQueue, RequestContext, TaskUpdater

__all__ = ["EchoExecutor", "echo_card"]


class EchoExecutor(AgentExecutor):
    """Answers every message with a task whose one artifact repeats its text."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
        await updater.start_work()
        await updater.add_artifact(context.user_text() or "(no text)", name="echo")
        await updater.complete()


def echo_card() -> AgentCard:
    """The echo agent's card; ``supportedInterfaces`` is filled in when served."""
    return AgentCard(
        name="Echo Agent",
        description="Repeats the text of every message it receives, as a task artifact.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo",
                name="Echo",
                description="Returns the text it was sent.",
                tags=["echo", "example"],
                examples=["Hello, agent!"],
            )
        ],
    )

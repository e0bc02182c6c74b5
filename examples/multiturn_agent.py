"""A multi-turn agent: it asks for a name (INPUT_REQUIRED) and greets on the answer.

Serve it with::

    hypercorn --worker-class trio examples.multiturn_agent:app

Send any message; the task pauses in TASK_STATE_INPUT_REQUIRED with a question.
Send the answer with the same ``taskId`` and the task completes with a greeting.
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


class GreeterExecutor(AgentExecutor):
    """Turn one asks for a name; turn two greets by it."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if context.current_task is None:
            await updater.submit()
            await updater.start_work()
            await updater.requires_input("Hello! What is your name?")
            return
        name = context.user_text().strip() or "stranger"
        await updater.start_work()
        await updater.add_artifact(f"Nice to meet you, {name}!", name="greeting")
        await updater.complete()


card = AgentCard(
    name="Greeter",
    description="Asks for your name, then greets you.",
    version="1.0.0",
    capabilities=AgentCapabilities(streaming=True),
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain"],
    skills=[
        AgentSkill(
            id="greet",
            name="Greet",
            description="A two-turn conversation.",
            tags=["multi-turn", "example"],
        )
    ],
)

app = A2AApp(database="multiturn_agent.db")
app.mount("", card=card, executor=GreeterExecutor(), name="greeter")

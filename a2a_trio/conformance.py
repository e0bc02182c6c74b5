"""The conformance agent: what the official A2A kit (a2a-tck) expects of an agent.

The kit signals the behaviour it wants through the messageId prefix of each
message (``scenarios/*.feature`` in the kit). :data:`SCENARIOS` holds each
scenario as a list of steps; the longest matching prefix wins, so
``tck-artifact-file-url`` is chosen before ``tck-artifact-file``.

Serve it with ``hypercorn --worker-class trio 'a2a_trio.conformance:app'`` or
let ``a2a-trio tck`` start it. Three card profiles exist: ``default``
(streaming, push notifications and the extended card), ``required-extension``
(declares ``urn:a2a:tck:required-extension`` as required, for CORE-CAP-004)
and ``no-streaming`` (``streaming: false``, and neither push notifications
nor the extended card, so CORE-CAP-001, -002 and -003 run).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import trio

from .protocol import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentProvider,
    AgentSkill,
    Part,
)
from .push import PushSettings
from .runtime import AgentExecutor, EventQueue, RequestContext, TaskUpdater, new_agent_message
from .server import A2AApp, LazyApp
from .store.url import DATABASE_ENV, DatabaseLocation, parse_database_url

__all__ = [
    "PROFILES",
    "SCENARIOS",
    "ConformanceExecutor",
    "Step",
    "conformance_app",
    "conformance_card",
    "scenario_for",
]

REQUIRED_EXTENSION = "urn:a2a:tck:required-extension"
PROFILES = ("default", "required-extension", "no-streaming")
Profile = Literal["default", "required-extension", "no-streaming"]


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the agent does; ``kind`` names it, the other fields feed it."""

    kind: Literal["working", "artifact", "complete", "input_required", "reject", "reply", "sleep"]
    text: str | None = None
    parts: Sequence[Part] = field(default_factory=tuple)
    append: bool | None = None
    last_chunk: bool | None = None
    seconds: float = 0.0


WORKING = Step("working")
COMPLETE = Step("complete")
FILE_PART = Part(raw=b"tck", filename="output.txt", media_type="text/plain")


def _text(text: str) -> Step:
    return Step("artifact", parts=(Part(text=text),))


def _lifecycle(text: str) -> list[Step]:
    return [WORKING, _text(text), COMPLETE]


#: messageId prefix -> the steps of its scenario.
SCENARIOS: dict[str, list[Step]] = {
    "tck-complete-task": [WORKING, Step("complete", text="Hello from TCK")],
    "tck-artifact-text": [WORKING, _text("Generated text content"), COMPLETE],
    "tck-artifact-file": [WORKING, Step("artifact", parts=(FILE_PART,)), COMPLETE],
    "tck-artifact-file-url": [
        WORKING,
        Step(
            "artifact",
            parts=(
                Part(
                    url="https://example.com/output.txt",
                    filename="output.txt",
                    media_type="text/plain",
                ),
            ),
        ),
        COMPLETE,
    ],
    "tck-artifact-data": [
        WORKING,
        Step("artifact", parts=(Part(data={"key": "value", "count": 42}),)),
        COMPLETE,
    ],
    "tck-message-response": [Step("reply", text="Direct message response")],
    "tck-input-required": [WORKING, Step("input_required", text="Please provide more input.")],
    "tck-reject-task": [Step("reject", text="rejected")],
    "tck-stream-001": _lifecycle("Stream hello from TCK"),
    "tck-stream-002": [WORKING, COMPLETE],
    "tck-stream-003": _lifecycle("Stream task lifecycle"),
    "tck-stream-ordering-001": _lifecycle("Ordered output"),
    "tck-stream-artifact-text": _lifecycle("Streamed text content"),
    "tck-stream-artifact-file": [WORKING, Step("artifact", parts=(FILE_PART,)), COMPLETE],
    "tck-stream-artifact-chunked": [
        WORKING,
        Step("artifact", parts=(Part(text="chunk-1 "),), append=False, last_chunk=False),
        Step("artifact", parts=(Part(text="chunk-2"),), append=True, last_chunk=True),
        COMPLETE,
    ],
    # Two of the kit's 2-second streaming timeouts.
    "test-resubscribe-message-id": [WORKING, Step("sleep", seconds=4.0), COMPLETE],
}
_BY_LENGTH = sorted(SCENARIOS, key=len, reverse=True)


def scenario_for(message_id: str) -> list[Step]:
    """The steps for a messageId: the longest matching prefix, else the default."""
    for prefix in _BY_LENGTH:
        if message_id.startswith(prefix):
            return SCENARIOS[prefix]
    return [WORKING, Step("complete", text=f"Unhandled messageId prefix: {message_id}")]


class ConformanceExecutor(AgentExecutor):
    """Plays the scenario the messageId names; the default cancel marks CANCELED."""

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        assert context.message is not None
        steps = scenario_for(context.message.message_id)
        updater = TaskUpdater(queue, context.task_id, context.context_id)
        if steps[0].kind == "reply":
            await queue.enqueue_event(
                new_agent_message(steps[0].text or "", context_id=context.context_id)
            )
            return
        if context.current_task is None:
            await updater.submit()
        artifact_id: str | None = None
        for step in steps:
            match step.kind:
                case "working":
                    await updater.start_work()
                case "artifact":
                    artifact_id = await updater.add_artifact(
                        list(step.parts),
                        artifact_id=artifact_id if step.append else None,
                        append=step.append,
                        last_chunk=step.last_chunk,
                    )
                case "complete":
                    await updater.complete(step.text)
                case "input_required":
                    await updater.requires_input(step.text)
                case "reject":
                    await updater.reject(step.text)
                case "sleep":
                    await trio.sleep(step.seconds)


def conformance_card(profile: Profile = "default") -> AgentCard:
    """The card the kit expects: both bindings are filled in when served."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    extensions = None
    if profile == "required-extension":
        extensions = [
            AgentExtension(
                uri=REQUIRED_EXTENSION,
                description="Declared required so CORE-CAP-004 can be checked.",
                required=True,
            )
        ]
    return AgentCard(
        name="a2a-trio conformance agent",
        description="Plays the a2a-tck scenarios, chosen by messageId prefix.",
        version="1.0.0",
        provider=AgentProvider(organization="a2a-trio", url="https://github.com/a2a-trio"),
        capabilities=AgentCapabilities(
            streaming=profile != "no-streaming",
            push_notifications=profile != "no-streaming",
            extended_agent_card=profile != "no-streaming",
            extensions=extensions,
        ),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="tck-scenarios",
                name="Conformance scenarios",
                description="Behaviour selected by the messageId prefix of each message.",
                tags=["conformance", "tck"],
                examples=["tck-complete-task", "tck-input-required", "tck-stream-001"],
                input_modes=["text/plain"],
                output_modes=["text/plain", "application/json"],
            )
        ],
    )


def extended_conformance_card(profile: Profile = "default") -> AgentCard:
    """The extended card: the public one with one more skill."""
    card = conformance_card(profile)
    extra = AgentSkill(
        id="tck-extended",
        name="Extended scenarios",
        description="Only listed on the extended card.",
        tags=["conformance", "extended"],
    )
    return card.model_copy(
        update={"name": card.name + " (extended)", "skills": [*card.skills, extra]}
    )


#: The kit's webhook receiver listens on the loopback interface and its config
#: CRUD tests name https://example.com/...; screening stays on for every other host.
KIT_WEBHOOK_HOSTS = ("localhost", "127.0.0.1", "example.com")


def conformance_app(
    database: str | Path | DatabaseLocation = "tck.db", profile: Profile = "default"
) -> A2AApp:
    """An app serving the conformance agent at the root (the kit fetches the root card)."""
    app = A2AApp(database=database, push_settings=PushSettings(allowed_hosts=KIT_WEBHOOK_HOSTS))
    app.mount(
        "",
        card=conformance_card(profile),
        executor=ConformanceExecutor(),
        name="conformance",
        extended_card=extended_conformance_card(profile),
    )
    return app


def _app_from_environment() -> A2AApp:
    profile = os.environ.get("A2A_TRIO_TCK_PROFILE", "default")
    database = parse_database_url(os.environ.get(DATABASE_ENV, "tck.db"), key=DATABASE_ENV)
    return conformance_app(database, profile)  # type: ignore[arg-type]


#: ``a2a_trio.conformance:app``; ``A2A_TRIO_TCK_PROFILE`` and ``A2A_TRIO_DATABASE`` configure it.
app = LazyApp(_app_from_environment)

"""a2a-trio: host AI agents over the A2A 1.0 protocol on Trio.

Write an :class:`AgentExecutor`, describe the agent with an
:class:`AgentCard`, mount both on an :class:`A2AApp`, and serve it with
``hypercorn --worker-class trio module:app``. ``a2a_trio:app`` itself is the
app described by ``a2a.toml`` (or the bundled echo agent), built on first use.
"""

from __future__ import annotations

from typing import Any

from . import protocol
from .protocol import (
    A2AError,
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from .runtime import (
    AgentExecutor,
    EventQueue,
    HostSettings,
    Principal,
    RequestContext,
    TaskUpdater,
    new_agent_message,
)
from .server import A2AApp, ServerSettings
from .store import TaskStore

__version__ = "0.1.0"

__all__ = [
    "A2AApp",
    "A2AError",
    "AgentCapabilities",
    "AgentCard",
    "AgentExecutor",
    "AgentSkill",
    "Artifact",
    "EventQueue",
    "HostSettings",
    "Message",
    "Part",
    "Principal",
    "RequestContext",
    "Role",
    "ServerSettings",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "TaskStore",
    "TaskUpdater",
    "app",
    "new_agent_message",
    "protocol",
]


class _ConfiguredApp:
    """``a2a_trio:app``: the app of ``a2a.toml`` (or the echo agent), built on first use.

    Importing the package never reads configuration or opens a database; the
    first ASGI call (hypercorn's lifespan startup) or attribute access does.
    """

    def __init__(self) -> None:
        self._app: A2AApp | None = None

    def _build(self) -> A2AApp:
        if self._app is None:
            from .config import build_app

            self._app = build_app()
        return self._app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._build()(scope, receive, send)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._build(), name)


app = _ConfiguredApp()

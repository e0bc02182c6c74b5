"""Executors in nurseries: the agent API and the host that runs it."""

from __future__ import annotations

from .executor import (
    ANONYMOUS,
    AgentEvent,
    AgentExecutor,
    EventQueue,
    EventSink,
    Principal,
    RequestContext,
    TaskUpdater,
    new_agent_message,
)
from .host import AgentHost, HostSettings, TaskEventStream

__all__ = [
    "ANONYMOUS",
    "AgentEvent",
    "AgentExecutor",
    "AgentHost",
    "EventQueue",
    "EventSink",
    "HostSettings",
    "Principal",
    "RequestContext",
    "TaskEventStream",
    "TaskUpdater",
    "new_agent_message",
]

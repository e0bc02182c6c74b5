"""Agents written for other event loops and frameworks, served by a2a-trio.

``a2a_trio.adapters.asyncio`` bridges any asyncio agent; the framework
adapters (``a2a_trio.adapters.pydantic_ai``, ``a2a_trio.adapters.langgraph``)
import their framework, so they are imported on their own (extras
``a2a-trio[pydantic-ai]``, ``a2a-trio[langgraph]``).
"""

from __future__ import annotations

from .asyncio import AsyncioAgentExecutor, AsyncioBridge, AsyncioEventQueue

__all__ = ["AsyncioAgentExecutor", "AsyncioBridge", "AsyncioEventQueue"]

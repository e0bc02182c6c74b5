"""The Quart-trio application: mounting, the two bindings, SSE and cards."""

from __future__ import annotations

from .app import A2AApp, LazyApp
from .bindings import ServerSettings
from .mount import AgentMount, Authenticator

__all__ = ["A2AApp", "AgentMount", "Authenticator", "LazyApp", "ServerSettings"]

"""a2a-trio: host AI agents over the A2A 1.0 protocol on Trio.

Write an :class:`AgentExecutor`, describe the agent with an
:class:`AgentCard`, mount both on an :class:`A2AApp`, and serve it with
``a2a-trio serve module:app`` (or ``hypercorn --worker-class trio module:app``).
``a2a_trio:app`` itself is the app described by ``a2a.toml`` (or the bundled
echo agent), built on first use.

The names below are imported when first used, so that ``import a2a_trio`` (and
so the ``a2a-trio`` command line, whose package this is) costs milliseconds;
each is the object of the module named beside it.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import TYPE_CHECKING, Any

from ._lazy_app import LazyApp

if TYPE_CHECKING:
    from . import protocol
    from .adapters import AsyncioAgentExecutor, AsyncioBridge, AsyncioEventQueue
    from .client import A2AClient, answer_text, fetch_jwks, text_of
    from .protocol import (
        A2AError,
        AgentCapabilities,
        AgentCard,
        AgentSkill,
        Artifact,
        Limits,
        Message,
        Part,
        Role,
        Task,
        TaskArtifactUpdateEvent,
        TaskState,
        TaskStatus,
        TaskStatusUpdateEvent,
    )
    from .protocol.signing import CardKeys, CardSignatureError, CardSigner, verify_card
    from .runtime import (
        AgentExecutor,
        EventQueue,
        EventSink,
        HostSettings,
        Principal,
        RequestContext,
        TaskUpdater,
        new_agent_message,
    )
    from .server import (
        A2AApp,
        ApiKeyAuthenticator,
        AuthenticationFailed,
        Authenticator,
        BasicAuthenticator,
        BearerAuthenticator,
        JWTAuthenticator,
        MutualTLSAuthenticator,
        RequestCredentials,
        ServerSettings,
    )
    from .store import SqliteStore, Store

try:
    #: The installed release: pyproject.toml's version is the one source.
    __version__ = _distribution_version("a2a-trio")
except PackageNotFoundError:  # a checkout on sys.path that was never installed
    __version__ = "0+unknown"

#: Where each public name lives (imported on first use, see :func:`__getattr__`).
_HOMES = {
    **dict.fromkeys(("AsyncioAgentExecutor", "AsyncioBridge", "AsyncioEventQueue"), ".adapters"),
    **dict.fromkeys(("A2AClient", "answer_text", "fetch_jwks", "text_of"), ".client"),
    **dict.fromkeys(
        (
            "A2AError",
            "AgentCapabilities",
            "AgentCard",
            "AgentSkill",
            "Artifact",
            "Limits",
            "Message",
            "Part",
            "Role",
            "Task",
            "TaskArtifactUpdateEvent",
            "TaskState",
            "TaskStatus",
            "TaskStatusUpdateEvent",
        ),
        ".protocol",
    ),
    **dict.fromkeys(
        ("CardKeys", "CardSignatureError", "CardSigner", "verify_card"), ".protocol.signing"
    ),
    **dict.fromkeys(
        (
            "AgentExecutor",
            "EventQueue",
            "EventSink",
            "HostSettings",
            "Principal",
            "RequestContext",
            "TaskUpdater",
            "new_agent_message",
        ),
        ".runtime",
    ),
    **dict.fromkeys(
        (
            "A2AApp",
            "ApiKeyAuthenticator",
            "AuthenticationFailed",
            "Authenticator",
            "BasicAuthenticator",
            "BearerAuthenticator",
            "JWTAuthenticator",
            "MutualTLSAuthenticator",
            "RequestCredentials",
            "ServerSettings",
        ),
        ".server",
    ),
    **dict.fromkeys(("SqliteStore", "Store"), ".store"),
}

__all__ = [
    "A2AApp",
    "A2AClient",
    "A2AError",
    "AgentCapabilities",
    "AgentCard",
    "AgentExecutor",
    "AgentSkill",
    "ApiKeyAuthenticator",
    "Artifact",
    "AsyncioAgentExecutor",
    "AsyncioBridge",
    "AsyncioEventQueue",
    "AuthenticationFailed",
    "Authenticator",
    "BasicAuthenticator",
    "BearerAuthenticator",
    "CardKeys",
    "CardSignatureError",
    "CardSigner",
    "EventQueue",
    "EventSink",
    "HostSettings",
    "JWTAuthenticator",
    "Limits",
    "Message",
    "MutualTLSAuthenticator",
    "Part",
    "Principal",
    "RequestContext",
    "RequestCredentials",
    "Role",
    "ServerSettings",
    "SqliteStore",
    "Store",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "TaskUpdater",
    "answer_text",
    "app",
    "fetch_jwks",
    "new_agent_message",
    "protocol",
    "text_of",
    "verify_card",
]


def _configured_app() -> A2AApp:
    from .config import build_app

    return build_app()


#: The app of ``a2a.toml`` (or the bundled echo agent), built on first use:
#: importing the package never reads configuration or opens a database. A
#: plain attribute, since hypercorn looks ``app`` up in the module's namespace.
app = LazyApp(_configured_app)


def __getattr__(name: str) -> Any:
    if name == "protocol":
        return importlib.import_module(".protocol", __name__)
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

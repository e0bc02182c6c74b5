"""a2a-trio: host AI agents over the A2A 1.0 protocol on Trio.

Write an :class:`AgentExecutor`, describe the agent with an
:class:`AgentCard`, mount both on an :class:`A2AApp`, and serve it with
``hypercorn --worker-class trio module:app``. ``a2a_trio:app`` itself is the
app described by ``a2a.toml`` (or the bundled echo agent), built on first use.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

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
    LazyApp,
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
#: importing the package never reads configuration or opens a database.
app = LazyApp(_configured_app)

"""The scripted agent with everything a client can ask for, for the SDK interop tests.

An extended card, push notifications with webhooks to 127.0.0.1 allowed.
Served with ``hypercorn --worker-class trio -b 127.0.0.1:PORT tests.sdk_app:app``
from the repository root; the database comes from ``A2A_TRIO_DATABASE``.
"""

from __future__ import annotations

import os

from a2a_trio import A2AApp, AgentCapabilities
from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .conftest import make_card

DATABASE_ENV = "A2A_TRIO_DATABASE"

try:
    _database = os.environ[DATABASE_ENV]
except KeyError:
    raise RuntimeError(
        f"{DATABASE_ENV} must name the database this server uses (a path or a URL)"
    ) from None

CAPABILITIES = AgentCapabilities(streaming=True, push_notifications=True, extended_agent_card=True)

app = A2AApp(database=_database, push_settings=PushSettings(allowed_hosts=("127.0.0.1",)))
app.mount(
    "",
    card=make_card(capabilities=CAPABILITIES),
    executor=ScriptedExecutor(),
    extended_card=make_card(name="Test Agent (extended)", capabilities=CAPABILITIES),
)

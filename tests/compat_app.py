"""The scripted agent with an extended card and webhooks to 127.0.0.1, for the 0.3 clients.

Served with ``hypercorn --worker-class trio -b 127.0.0.1:PORT tests.compat_app:app``
from the repository root; the database path comes from ``A2A_TRIO_DATABASE``.
"""

from __future__ import annotations

import os

from a2a_trio import A2AApp
from a2a_trio.protocol import AgentCapabilities
from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .conftest import make_card

CAPABILITIES = AgentCapabilities(streaming=True, push_notifications=True, extended_agent_card=True)

app = A2AApp(
    database=os.environ["A2A_TRIO_DATABASE"],
    push_settings=PushSettings(allowed_hosts=("127.0.0.1",), backoff=0.1),
)
app.mount(
    "",
    card=make_card(capabilities=CAPABILITIES),
    extended_card=make_card(name="Test Agent (extended)", capabilities=CAPABILITIES),
    executor=ScriptedExecutor(),
    # Deployed 0.3 clients resolve the card at the default path, naming no version.
    default_card_v0_3=True,
)

"""The scripted test agent, webhooks to 127.0.0.1 allowed, for tests that run a server process.

Served with ``hypercorn --worker-class trio -b 127.0.0.1:PORT tests.push_app:app``
from the repository root. The database (a path or a URL) comes from
``A2A_TRIO_DATABASE`` (required: a test always says which database the server
owns); the retry policy from ``A2A_TRIO_PUSH_BACKOFF``, ``A2A_TRIO_PUSH_MAX_WAIT`` and
``A2A_TRIO_PUSH_MAX_ATTEMPTS`` (optional, the defaults of PushSettings otherwise).
"""

from __future__ import annotations

import os

from a2a_trio import A2AApp
from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .conftest import make_card

DATABASE_ENV = "A2A_TRIO_DATABASE"
BACKOFF_ENV = "A2A_TRIO_PUSH_BACKOFF"
MAX_WAIT_ENV = "A2A_TRIO_PUSH_MAX_WAIT"
MAX_ATTEMPTS_ENV = "A2A_TRIO_PUSH_MAX_ATTEMPTS"

try:
    _database = os.environ[DATABASE_ENV]
except KeyError:
    raise RuntimeError(
        f"{DATABASE_ENV} must name the database this server uses (a path or a URL)"
    ) from None

_defaults = PushSettings()
_settings = PushSettings(
    allowed_hosts=("127.0.0.1",),
    backoff=float(os.environ.get(BACKOFF_ENV, _defaults.backoff)),
    max_wait=float(os.environ.get(MAX_WAIT_ENV, _defaults.max_wait)),
    max_attempts=int(os.environ.get(MAX_ATTEMPTS_ENV, _defaults.max_attempts)),
)

app = A2AApp(database=_database, push_settings=_settings)
app.mount("", card=make_card(), executor=ScriptedExecutor())

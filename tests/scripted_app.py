"""The scripted test agent as an importable ASGI app, for tests that run a real server process.

Served with ``hypercorn --worker-class trio -b 127.0.0.1:PORT tests.scripted_app:app``
from the repository root. The database (a path or a URL) comes from
``A2A_TRIO_DATABASE`` (required: a test always says which database the server owns).
"""

from __future__ import annotations

import os

from a2a_trio import A2AApp

from .agents import ScriptedExecutor
from .conftest import make_card

DATABASE_ENV = "A2A_TRIO_DATABASE"

try:
    _database = os.environ[DATABASE_ENV]
except KeyError:
    raise RuntimeError(
        f"{DATABASE_ENV} must name the database this server uses (a path or a URL)"
    ) from None

app = A2AApp(database=_database)
app.mount("", card=make_card(), executor=ScriptedExecutor())

"""Two queued agents on two databases, declared in code as a2a.toml declares them.

``a`` (at the root) lives in the app's database (``A2A_TRIO_DATABASE``),
``b`` (at ``/b``) in ``MULTIDB_SECOND``; both run ``tests.cluster_app``'s
executor on ``a2a-trio worker`` processes. The console's token is
``tests.console_helpers.TOKEN``.
"""

from __future__ import annotations

import os

from a2a_trio import A2AApp
from a2a_trio.console import ConsoleSettings, attach_console

from .cluster_app import ClusterExecutor
from .conftest import make_card
from .console_helpers import TOKEN

app = A2AApp(
    database=os.environ["A2A_TRIO_DATABASE"],
    lease_seconds=float(os.environ.get("A2A_TRIO_LEASE_SECONDS", "10")),
    console=False,
)
attach_console(app, ConsoleSettings(token=TOKEN))
app.mount("", card=make_card(), executor=ClusterExecutor(), name="a", execution="queued")
app.mount(
    "/b",
    card=make_card(),
    executor=ClusterExecutor(),
    name="b",
    execution="queued",
    storage=os.environ["MULTIDB_SECOND"],
)

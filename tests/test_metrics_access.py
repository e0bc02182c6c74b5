"""``/metrics`` is for operators when the deployment asks its callers who they are (issue 31).

It tells anyone the agents' names, task counts by state across all owners
and dead letters; it was open by default whatever the cards declared.
"""

from __future__ import annotations

from pathlib import Path

from a2a_trio import A2AApp
from a2a_trio.console import ConsoleSettings, attach_console
from a2a_trio.server.auth import BearerAuthenticator

from .agents import ScriptedExecutor
from .callers import BEARER, secured_card
from .conftest import live_server, make_card

OPERATOR = "operator-token"


def secured_with_console(app: A2AApp) -> None:
    app.mount(
        "",
        card=secured_card({"bearer": BEARER}, [{"bearer": []}]),
        executor=ScriptedExecutor(),
        authenticators={"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})},
    )
    attach_console(app, ConsoleSettings(token=OPERATOR))


def open_with_console(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())
    attach_console(app, ConsoleSettings(token=OPERATOR))


async def test_metrics_ask_for_the_operators_token_when_an_agent_declares_security(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, secured_with_console) as server:
        anonymous = await server.client.get("/metrics")
        caller = await server.client.get("/metrics", headers={"Authorization": "Bearer t-alice"})
        operator = await server.client.get(
            "/metrics", headers={"Authorization": f"Bearer {OPERATOR}"}
        )

    assert anonymous.status_code == 401
    assert caller.status_code == 401  # a protocol credential is not an operator's
    assert operator.status_code == 200
    assert "a2a_requests_total" in operator.text


async def test_metrics_stay_open_where_no_agent_declares_security(tmp_path: Path) -> None:
    async with live_server(tmp_path, open_with_console) as server:
        assert (await server.client.get("/metrics")).status_code == 200

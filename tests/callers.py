"""Secured cards, and clients that call a live server as one principal.

::

    card = secured_card({"bearer": BEARER}, [{"bearer": []}])
    async with live_server(tmp_path, mount) as server, caller(server, bearer="t-alice") as alice:
        await Binding(alice, "rest").send("echo")

A caller is a :class:`LiveServer` of its own: the same app and address, with
an HTTP client that presents one principal's credentials on every request, so
the helpers of ``test_bindings`` (``Binding``) work for it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx

from a2a_trio import AgentCard
from a2a_trio.protocol import (
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from .conftest import VERSION_HEADERS, LiveServer, make_card

__all__ = ["BEARER", "anonymised", "caller", "secured_card"]

#: ``httpAuthSecurityScheme`` with scheme Bearer, as most tests declare it.
BEARER = SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))


def secured_card(
    schemes: Mapping[str, SecurityScheme],
    requirements: Sequence[Mapping[str, Sequence[str]]] = (),
    **overrides: Any,
) -> AgentCard:
    """A test card declaring ``schemes``; each requirement maps scheme names to scopes."""
    return make_card(
        security_schemes=dict(schemes),
        security_requirements=[
            SecurityRequirement(
                schemes={name: StringList(list=list(scopes)) for name, scopes in req.items()}
            )
            for req in requirements
        ]
        or None,
        **overrides,
    )


@asynccontextmanager
async def caller(
    server: LiveServer,
    *,
    bearer: str | None = None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
) -> AsyncIterator[LiveServer]:
    """``server`` as seen by a client presenting these credentials on every request."""
    presented = dict(VERSION_HEADERS)
    if bearer is not None:
        presented["Authorization"] = f"Bearer {bearer}"
    presented.update(headers or {})
    async with httpx.AsyncClient(
        base_url=server.url,
        headers=presented,
        params=dict(params or {}),
        timeout=10.0,
        trust_env=False,
    ) as client:
        yield LiveServer(server.app, server.url, client)


def anonymised(error: Mapping[str, Any], task_id: str) -> Any:
    """An error object with ``task_id`` replaced by a placeholder wherever it appears.

    Two task ids are never equal, so "the same error for another caller's task
    as for a task that never existed" compares the errors with the id masked.
    """
    return json.loads(json.dumps(error).replace(task_id, "<task-id>"))

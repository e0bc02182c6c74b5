"""Over gRPC an unauthenticated caller cannot tell an unknown tenant from a secured real one.

Issue 31: an unknown tenant answered NOT_FOUND while a real, secured one
answered UNAUTHENTICATED, so agent names could be enumerated before
authentication (docs/security.md says such a caller learns nothing).
"""

from __future__ import annotations

from pathlib import Path

import grpc

from a2a_trio import A2AApp
from a2a_trio.protocol.proto import a2a_pb2
from a2a_trio.server.auth import BearerAuthenticator

from .agents import ScriptedExecutor
from .callers import BEARER, secured_card
from .test_grpc_binding import VERSION, error_info, grpc_server

AUTHORIZED = (*VERSION, ("authorization", "Bearer t-alice"))


def secured_agent(app: A2AApp) -> None:
    app.mount(
        "/secret-agent",
        card=secured_card({"bearer": BEARER}, [{"bearer": []}]),
        executor=ScriptedExecutor(),
        name="secret",
        authenticators={"bearer": BearerAuthenticator(tokens={"t-alice": "alice"})},
    )


async def test_an_unknown_tenant_answers_as_a_real_one_does_without_credentials(
    tmp_path: Path,
) -> None:
    async with grpc_server(tmp_path, secured_agent) as (_, channel):
        answers = []
        for tenant in ("secret-agent", "secret", "no-such-agent"):
            error = await channel.failure(
                "GetTask",
                a2a_pb2.GetTaskRequest(tenant=tenant, id="t-1"),
                "Task",
            )
            answers.append((error.code(), error.details(), error_info(error).reason))

        assert answers[0][0] == grpc.StatusCode.UNAUTHENTICATED
        assert answers[0] == answers[1] == answers[2]

        # Authenticated, the caller learns the tenant does not exist.
        known = await channel.failure(
            "GetTask",
            a2a_pb2.GetTaskRequest(tenant="no-such-agent", id="t-1"),
            "Task",
            metadata=AUTHORIZED,
        )
        assert known.code() == grpc.StatusCode.NOT_FOUND

"""The memory budget of request bodies in flight: past it, a call waits briefly, then is refused.

Issue 31: 64 concurrent 8 MiB SendMessage calls took the server to 2.7 GiB
and, under a 2 GiB address-space limit, aborted it. Here the same happens
with a budget of a few MiB and 1 MiB bodies: the calls the budget holds
complete, the others get 503 with Retry-After (gRPC RESOURCE_EXHAUSTED), and
the server goes on serving.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import httpx
import pytest
import trio
import trio.testing

from a2a_trio import A2AApp, ServerSettings
from a2a_trio.protocol import ServerBusyError
from a2a_trio.protocol.proto import a2a_pb2
from a2a_trio.server.body_budget import LARGE_SHARE, BodyBudget, decoding_cost

from .agents import Gate, ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message

MIB = 1024 * 1024
EXECUTOR = ScriptedExecutor()


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=EXECUTOR)


def big_call(command: str, size: int = MIB) -> bytes:
    message = user_message(f"{command} " + "x" * size)
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return json.dumps(envelope).encode()


@asynccontextmanager
async def gated_server(tmp_path: Path, budget: int) -> AsyncIterator[LiveServer]:
    """The scripted agent (its gate closed) behind a body budget of ``budget`` bytes."""
    EXECUTOR.gate = Gate()
    settings = ServerSettings(body_budget=budget, body_budget_wait=0.3)
    async with live_server(tmp_path, mount, settings=settings) as server:
        yield server


async def until(condition: Callable[[], bool], within: float = 10) -> None:
    """Until ``condition()``: the budget's counters offer nothing to wait on."""
    with trio.fail_after(within):
        while not condition():  # noqa: ASYNC110
            await trio.sleep(0.01)


async def post(server: LiveServer, body: bytes) -> httpx.Response:
    # A connection of its own per call, as many clients would.
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        return await client.post(
            "/jsonrpc",
            content=body,
            headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
        )


async def test_calls_past_the_budget_are_refused_and_those_within_it_complete(
    tmp_path: Path,
) -> None:
    # Each 1 MiB call holds some 2 MiB (its body, then its decoding): two fit
    # in the large bodies' three quarters of 6 MiB, the other six are refused.
    async with gated_server(tmp_path, 6 * MIB) as server:
        budget = server.app.body_budget
        answers: list[httpx.Response] = []

        async def send() -> None:
            answers.append(await post(server, big_call("hold")))

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for _ in range(8):
                    nursery.start_soon(send)
                await until(lambda: len(answers) == 6)  # refused while two are held
                assert budget.in_use <= budget.capacity
                EXECUTOR.gate.release.set()

        statuses = Counter(answer.status_code for answer in answers)
        assert statuses == {200: 2, 503: 6}
        for answer in answers:
            if answer.status_code == 503:
                assert answer.headers["Retry-After"] == "1"
                error = answer.json()["error"]
                assert error["code"] == -32603
                assert error["data"][0]["reason"] == "SERVER_BUSY"
            else:
                assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert budget.in_use == 0
        assert budget.refused == 6
        # Small calls were never in question, and big ones are served again.
        assert (await post(server, big_call("echo"))).status_code == 200


async def test_a_small_call_gets_in_while_large_bodies_fill_their_share(tmp_path: Path) -> None:
    async with gated_server(tmp_path, 6 * MIB) as server:
        budget = server.app.body_budget
        async with trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(post, server, big_call("hold"))
            await until(lambda: budget.holders == 2 and budget.in_use >= 4 * MIB)
            body = await server.jsonrpc("SendMessage", {"message": user_message("echo small")})
            assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            EXECUTOR.gate.release.set()


async def test_a_grpc_call_past_the_budget_ends_resource_exhausted(tmp_path: Path) -> None:
    async with gated_server(tmp_path, 3 * MIB) as server:
        budget = server.app.body_budget
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, server, big_call("hold"))
            await until(lambda: budget.in_use >= 2 * MIB)
            request = a2a_pb2.SendMessageRequest(
                message=a2a_pb2.Message(
                    message_id=str(uuid.uuid4()),
                    role=a2a_pb2.ROLE_USER,
                    parts=[a2a_pb2.Part(text="echo " + "x" * MIB)],
                )
            )

            def call() -> grpc.StatusCode:
                with grpc.insecure_channel(server.url.removeprefix("http://")) as channel:
                    rpc = channel.unary_unary(
                        "/lf.a2a.v1.A2AService/SendMessage",
                        request_serializer=a2a_pb2.SendMessageRequest.SerializeToString,
                        response_deserializer=a2a_pb2.SendMessageResponse.FromString,
                    )
                    try:
                        rpc(request, metadata=(("a2a-version", "1.0"),), timeout=10)
                    except grpc.RpcError as error:
                        return error.code()
                    return grpc.StatusCode.OK

            assert await trio.to_thread.run_sync(call) == grpc.StatusCode.RESOURCE_EXHAUSTED
            EXECUTOR.gate.release.set()
        assert budget.in_use == 0


# --- the budget itself, on trio's autojump clock ------------------------------------


async def test_a_share_waits_for_room_and_gets_it_when_another_is_given_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    budget = BodyBudget(4 * MIB, patience=5.0)
    got_in_at: list[float] = []

    async def second() -> None:
        with budget.share() as share:
            await share.grow_to(2 * MIB)
            got_in_at.append(trio.current_time())

    with budget.share() as first:
        await first.grow_to(2 * MIB)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await trio.sleep(2)
            assert got_in_at == []
            first.__exit__(None, None, None)
    assert got_in_at == [pytest.approx(2)]
    assert budget.in_use == 0


async def test_a_share_refused_after_its_patience_holds_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    budget = BodyBudget(4 * MIB, patience=1.0, retry_after=3)
    with budget.share() as first:
        await first.grow_to(3 * MIB)
        with budget.share() as second, pytest.raises(ServerBusyError) as refused:
            await second.grow_to(LARGE_SHARE)
        assert refused.value.retry_after == 3
        assert budget.in_use == 3 * MIB
    assert budget.in_use == 0


async def test_a_request_alone_proceeds_whatever_its_size() -> None:
    budget = BodyBudget(MIB, patience=0)
    with budget.share() as share:
        await share.grow_to(10 * MIB)
    assert budget.in_use == 0


def test_decoding_cost_counts_every_object_and_array() -> None:
    text = json.dumps({"text": "x" * 1000}).encode()
    objects = b"[" + b",".join([b"{}"] * 1000) + b"]"
    assert decoding_cost(text) < 2 * len(text)
    assert decoding_cost(objects) > 30 * len(objects)

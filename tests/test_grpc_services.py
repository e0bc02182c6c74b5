"""gRPC health and reflection beside A2AService, with grpcio's own clients.

grpcio-reflection's descriptor database (a bidirectional stream, one request
at a time) and grpcio-health-checking's stub run on worker threads against a
live server in this process, on the port every binding shares.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
import trio
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from psycopg import sql

from a2a_trio import A2AApp
from a2a_trio.protocol.proto import a2a_pb2

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card
from .postgres import admin_connect, fresh_database, postgres_url

SERVICE = "lf.a2a.v1.A2AService"
TIMEOUT = 10.0
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
T = TypeVar("T")


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())


def target(server: LiveServer) -> str:
    return server.url.removeprefix("http://")


async def on_channel(server: LiveServer, work: Callable[[grpc.Channel], T]) -> T:
    """``work(channel)`` on a worker thread, with a channel of its own."""

    def run() -> T:
        with grpc.insecure_channel(target(server)) as channel:
            return work(channel)

    return await trio.to_thread.run_sync(run)


def health(channel: grpc.Channel, service: str = "") -> Any:
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT).status


async def test_grpcio_reflection_lists_the_a2a_service_and_its_methods(tmp_path: Path) -> None:
    def discover(channel: grpc.Channel) -> tuple[list[str], list[str], list[str]]:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = list(database.get_services())
        pool = DescriptorPool(database)
        service = pool.FindServiceByName(SERVICE)
        task = pool.FindMessageTypeByName("lf.a2a.v1.Task")
        return services, [m.name for m in service.methods], [f.name for f in task.fields]

    async with live_server(tmp_path, mount) as server:
        services, methods, task_fields = await on_channel(server, discover)
    assert services[0] == SERVICE
    assert "grpc.health.v1.Health" in services
    assert {
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= set(services)
    declared = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
    assert methods == [method.name for method in declared.methods]
    assert task_fields == [field.name for field in a2a_pb2.Task.DESCRIPTOR.fields]


async def test_reflection_v1_answers_each_request_of_one_stream(tmp_path: Path) -> None:
    # v1 and v1alpha are the same messages under two packages.
    def ask(channel: grpc.Channel) -> list[Any]:
        call = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE),
            reflection_pb2.ServerReflectionRequest(file_by_filename="no/such.proto"),
        ]
        return list(call(iter(requests), timeout=TIMEOUT))

    async with live_server(tmp_path, mount) as server:
        listed, found, missing = await on_channel(server, ask)
    assert listed.list_services_response.service[0].name == SERVICE
    files = found.file_descriptor_response.file_descriptor_proto
    assert len(files) > 1  # a2a.proto, then the files it imports
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


async def test_health_of_an_unknown_service_is_not_found(tmp_path: Path) -> None:
    def check(channel: grpc.Channel) -> grpc.StatusCode:
        with pytest.raises(grpc.RpcError) as raised:
            health(channel, "no.such.Service")
        code: grpc.StatusCode = raised.value.code()
        return code

    async with live_server(tmp_path, mount) as server:
        assert await on_channel(server, lambda channel: health(channel, SERVICE)) == SERVING
        assert await on_channel(server, check) == grpc.StatusCode.NOT_FOUND


async def test_health_watch_sends_the_status_at_once(tmp_path: Path) -> None:
    def first(channel: grpc.Channel) -> Any:
        stub = health_pb2_grpc.HealthStub(channel)
        stream = stub.Watch(health_pb2.HealthCheckRequest(), timeout=TIMEOUT)
        status = next(stream).status
        stream.cancel()
        return status

    async with live_server(tmp_path, mount) as server:
        assert await on_channel(server, first) == SERVING


@asynccontextmanager
async def sqlite_server(tmp_path: Path) -> AsyncIterator[tuple[LiveServer, Any]]:
    path = tmp_path / "a2a.db"

    def database_down(down: bool) -> None:
        # The file moved away: a serving process would write to a file nobody finds.
        if down:
            os.rename(path, tmp_path / "moved.db")
        else:
            os.rename(tmp_path / "moved.db", path)

    async with live_server(tmp_path, mount, database=path) as server:
        yield server, database_down


@asynccontextmanager
async def postgres_server(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[LiveServer, Any]]:
    server_location = request.getfixturevalue("postgres")
    with fresh_database(server_location) as location:
        name = sql.Identifier(location.dbname)

        def database_down(down: bool) -> None:
            # Only this test's own database: no connection to it is allowed, and
            # those open are ended.
            with admin_connect(server_location) as admin:
                allow = sql.SQL("true" if not down else "false")
                admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(name, allow))
                if down:
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid()",
                        (location.dbname,),
                    )

        async with live_server(tmp_path, mount, database=postgres_url(location)) as server:
            yield server, database_down


async def wait_for_health(server: LiveServer, wanted: Any) -> Any:
    """The health status once it is ``wanted`` (or the last one seen, after a bound)."""
    status = None
    with trio.move_on_after(TIMEOUT):
        while True:
            status = await on_channel(server, health)
            if status == wanted:
                break
            await trio.sleep(0.1)  # the pool reconnects on its own schedule
    return status


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_health_follows_readiness_serving_then_not_while_the_database_is_down(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    serve = sqlite_server(tmp_path) if backend == "sqlite" else postgres_server(tmp_path, request)
    async with serve as (server, database_down):
        assert await on_channel(server, health) == SERVING
        database_down(True)
        try:
            assert await wait_for_health(server, NOT_SERVING) == NOT_SERVING
            ready = await server.client.get("/_a2a/health/ready")
            assert ready.status_code == 503
        finally:
            database_down(False)
        assert await wait_for_health(server, SERVING) == SERVING

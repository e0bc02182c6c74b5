"""Liveness and readiness endpoints, on both backends."""

from __future__ import annotations

from pathlib import Path

from a2a_trio import A2AApp

from .agents import ScriptedExecutor
from .conftest import live_server, make_card
from .postgres import execute, is_postgres


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())


async def test_a_serving_process_is_alive_and_ready(tmp_path: Path, database: str) -> None:
    async with live_server(tmp_path, mount, database=database) as server:
        live = await server.client.get("/_a2a/health/live")
        ready = await server.client.get("/_a2a/health/ready")
    assert (live.status_code, live.json()) == (200, {"status": "alive"})
    assert ready.status_code == 200
    checks = {"agents": "ok", "database": "ok", "storage": "ok"}
    if is_postgres(database):  # several processes: the wake-up connection too
        checks["listener"] = "ok"
    assert ready.json() == {"status": "ready", "checks": checks}


async def test_a_process_shutting_down_is_not_ready(tmp_path: Path, database: str) -> None:
    async with live_server(tmp_path, mount, database=database) as server:
        server.app.begin_shutdown()
        ready = await server.client.get("/_a2a/health/ready")
        live = await server.client.get("/_a2a/health/live")
    assert ready.status_code == 503
    assert ready.json()["checks"]["agents"] == "not running: default"
    assert live.status_code == 200


async def test_a_database_at_another_schema_version_is_not_ready(
    tmp_path: Path, database: str
) -> None:
    async with live_server(tmp_path, mount, database=database) as server:
        if is_postgres(database):
            execute(database, "UPDATE a2a_schema SET version = version + 1")
        else:
            server.app.store.db.execute("PRAGMA user_version = 99")  # type: ignore[attr-defined]
        ready = await server.client.get("/_a2a/health/ready")
        if is_postgres(database):
            execute(database, "UPDATE a2a_schema SET version = version - 1")
    assert ready.status_code == 503
    assert ready.json()["checks"]["database"].startswith("schema version ")

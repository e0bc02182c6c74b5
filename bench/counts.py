"""What one request costs in trio's terms: ``python -m bench.counts [MODE] [--seconds S]``.

Serves the bench app (:mod:`bench.trio_server`, SQLite in a temporary
directory) in this process under a :class:`trio.abc.Instrument`, puts load on
it from a child process for a few seconds (wrk with ``bench/lua/a2a.lua`` for
``jsonrpc``, ``rest`` and ``stream``; :mod:`bench.grpc_load` for ``grpc``), and
prints, per answered request: the trio tasks spawned, the task steps the
scheduler ran, the cancel scopes and nurseries entered, the sends on memory
channels, the calls of ``trio.to_thread.run_sync``, each store method
called, the pydantic models built, copied, validated and dumped to JSON, and
(SQLite) the SQL statements run, by their first words. Figures come from the
load's window only (the warm-up is excluded).

A measuring tool, not a benchmark: the counters cost CPU themselves, so no
timing is reported.
"""

from __future__ import annotations

import argparse
import collections
import functools
import inspect
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import trio
import trio.lowlevel
from hypercorn.config import Config
from hypercorn.trio import serve

from a2a_trio.protocol import ProtoModel
from a2a_trio.store.sqlite.database import Database

from .common import REPO
from .servers import free_port
from .trio_server import build_app

COUNTS: collections.Counter[str] = collections.Counter()
#: Also count each kind by where it comes from (``--detail``).
DETAIL = False


class _Counting(trio.abc.Instrument):
    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        COUNTS["tasks spawned"] += 1
        if DETAIL:
            COUNTS[f"  task {task.name}"] += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        COUNTS["task steps"] += 1


def _count_calls(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)
    if inspect.iscoroutinefunction(original):

        @functools.wraps(original)
        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            COUNTS[label] += 1
            if DETAIL:
                COUNTS[f"  {label} at {_caller()}"] += 1
            return await original(*args, **kwargs)

        setattr(owner, name, counted_async)
        return

    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        COUNTS[label] += 1
        if DETAIL:
            COUNTS[f"  {label} at {_caller()}"] += 1
        return original(*args, **kwargs)

    setattr(owner, name, counted)


def _caller() -> str:
    """The first frame outside trio and this module that led here."""
    frame = sys._getframe(2)
    while frame is not None and (
        "/trio/" in frame.f_code.co_filename
        or frame.f_code.co_filename == __file__
        or "contextlib" in frame.f_code.co_filename
    ):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "?"
    path = frame.f_code.co_filename
    short = path.split("site-packages/")[-1].split("/wt/speed/")[-1]
    return f"{short}:{frame.f_lineno} {frame.f_code.co_name}"


def _patch_trio() -> None:
    _count_calls(trio.CancelScope, "__enter__", "cancel scopes entered")
    _count_calls(trio._core._run.NurseryManager, "__aenter__", "nurseries opened")
    _count_calls(trio.MemorySendChannel, "send_nowait", "memory channel sends")
    _count_calls(trio.MemorySendChannel, "send", "memory channel sends (async)")
    _count_calls(trio.to_thread, "run_sync", "to_thread.run_sync")


def _patch_models() -> None:
    """Count what the wire models cost: constructions, copies, validations, dumps."""
    _count_calls(pydantic.BaseModel, "__init__", "models built (__init__)")
    _count_calls(pydantic.BaseModel, "model_copy", "models copied (model_copy)")
    validate = pydantic.BaseModel.__dict__["model_validate"].__func__

    def counted_validate(cls: Any, *args: Any, **kwargs: Any) -> Any:
        COUNTS["models validated (model_validate)"] += 1
        if DETAIL:
            COUNTS[f"  models validated (model_validate) at {_caller()}"] += 1
        return validate(cls, *args, **kwargs)

    pydantic.BaseModel.model_validate = classmethod(counted_validate)  # type: ignore[assignment]
    _count_calls(ProtoModel, "to_json", "models dumped (to_json)")


def _patch_sql() -> None:
    """Count each SQL statement the SQLite store runs (its connections' trace callback)."""
    opened = Database._new_connection

    def traced(self: Database) -> sqlite3.Connection:
        conn = opened(self)
        conn.set_trace_callback(_count_statement)
        return conn

    Database._new_connection = traced  # type: ignore[method-assign]


def _count_statement(statement: str) -> None:
    words = statement.split()
    head = " ".join(words[:3] if words[:1] in (["INSERT"], ["DELETE"]) else words[:2])
    COUNTS["sql statements"] += 1
    if DETAIL:
        COUNTS[f"  sql {head}"] += 1


def _patch_store(store: Any) -> None:
    for name in dir(type(store)):
        if name.startswith("_"):
            continue
        value = getattr(store, name, None)
        if inspect.iscoroutinefunction(value):
            _count_calls(store, name, f"store.{name}")


def _load_command(mode: str, port: int, seconds: int, connections: int) -> list[str]:
    nonce = uuid.uuid4().hex[:8]
    if mode == "grpc":
        return [
            sys.executable,
            "-m",
            "bench.grpc_load",
            f"127.0.0.1:{port}",
            str(seconds),
            str(connections),
            nonce,
        ]
    lua = str(REPO / "bench" / "lua" / "a2a.lua")
    url = f"http://127.0.0.1:{port}"
    return ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", lua, url, "--", mode, nonce]


async def _measure(mode: str, seconds: int, warmup: int, connections: int, db: Path) -> None:
    app = build_app(str(db))
    _patch_store(app.store)
    answered = collections.Counter[str]()
    port = free_port()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(serve, app, config))
        chained = app.request_observer

        def observe(agent: str, binding: str, operation: str, outcome: str, took: float) -> None:
            answered[outcome] += 1
            if chained is not None:
                chained(agent, binding, operation, outcome, took)

        app.request_observer = observe
        run: Callable[..., Any] = trio.run_process
        if warmup:
            await run(_load_command(mode, port, warmup, connections), capture_stdout=True, cwd=REPO)
        COUNTS.clear()
        answered.clear()
        completed = await run(
            _load_command(mode, port, seconds, connections), capture_stdout=True, cwd=REPO
        )
        counts = dict(COUNTS)
        requests = answered["ok"]
        nursery.cancel_scope.cancel()
    result = [line for line in completed.stdout.decode().splitlines() if "BENCH_RESULT" in line]
    print(f"mode {mode}, c={connections}, {seconds} s: {requests} requests {dict(answered)}")
    print(*result, sep="\n")
    for name, value in sorted(counts.items(), key=lambda item: item[0].lstrip()):
        if value / max(requests, 1) >= 0.05:
            print(f"  {name:70} {value / max(requests, 1):8.2f} per request")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "mode", nargs="?", default="jsonrpc", choices=["jsonrpc", "rest", "stream", "grpc"]
    )
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--detail", action="store_true", help="each count by where it comes from")
    options = parser.parse_args(argv)
    global DETAIL
    DETAIL = options.detail
    _patch_trio()
    _patch_models()
    _patch_sql()
    with tempfile.TemporaryDirectory() as directory:
        trio.run(
            _measure,
            options.mode,
            options.seconds,
            options.warmup,
            options.connections,
            Path(directory) / "counts.db",
            instruments=[_Counting()],
        )


if __name__ == "__main__":
    main()

"""The benchmark driver: ``python -m bench [options]`` (or ``nox -s bench -- [options]``).

For each selected server (a2a-trio and the a2a-sdk reference on SQLite, the
same two on PostgreSQL, the reference in memory, the bare HTTP floor) it
starts a fresh process on a fresh database -- a SQLite file in a temporary
directory, or a database created on the local PostgreSQL and dropped after --,
runs the selected load cases against it -- the wrk cases, then ``push`` and
``push-slow`` -- stops it, and runs ``streams`` against another fresh process
(so the memory baseline is not that of a server which just served thousands of
requests). Servers are pinned to one core and the load generators (wrk, and
this process for the Python cases) to another when ``taskset`` and two cores
are available; when a PostgreSQL server is selected, PostgreSQL is pinned to
the load generators' core for the run and restored after it
(:meth:`bench.postgres.LocalPostgres.pinned`).

A failing case is recorded with its reason and the run goes on; a server
that died is restarted (on a fresh database) for the next case. The report
is printed, written to ``bench/results/latest.md`` and, with ``--out``, the
whole document with every raw run to a JSON file.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .common import REPO, RESULTS_DIR, raise_nofile_limit
from .conversations import ConversationSettings, run_conversations
from .grpc_load import GRPC_CASE, GRPC_CONCURRENCY, grpc_target, run_grpc_load
from .postgres import DEFAULT_PG_URL, LocalPostgres, PostgresError
from .pycases import (
    FeedCaseSettings,
    PushCaseSettings,
    StreamSettings,
    run_feed,
    run_push,
    run_push_slow,
    run_streams,
)
from .report import render_markdown, wrk_summary
from .servers import (
    SERVERS,
    ServerKind,
    ServerProcess,
    on_baseline,
    running_server,
    start_server,
    with_cpu,
)
from .wrk import WRK_CASES, WrkCase, run_wrk, wrk_version

#: The module of the a2a-trio servers (the only ones with the feed).
TRIO_SERVER = "bench.trio_server"
#: The modules whose agent answers ``ask ...`` (the conversation case): a2a-trio's
#: and the a2a-sdk reference's.
ASKING_SERVERS = (TRIO_SERVER, "bench.reference_server")

PACKAGES = (
    "a2a-trio",
    "a2a-sdk",
    "trio",
    "hypercorn",
    "uvicorn",
    "uvloop",
    "httptools",
    "starlette",
    "sse-starlette",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "psycopg",
    "grpcio",
    "protobuf",
    "h2",
)


@dataclass(frozen=True, slots=True)
class Case:
    """A selectable case: its name, kind (wrk, streams, push, push-slow) and title."""

    name: str
    kind: str
    title: str
    unit: str = ""
    wrk: WrkCase | None = None


CASES: tuple[Case, ...] = (
    *(Case(c.name, "wrk", c.title, c.unit, c) for c in WRK_CASES),
    Case(
        GRPC_CASE,
        "grpc",
        "SendMessage over gRPC, 16 calls in flight (grpcio's client)",
        "req/s",
    ),
    Case("push", "push", "webhook deliveries for blocking SendMessage at c=16"),
    Case("push-slow", "push-slow", "SendMessage latency when the webhook takes 3 s"),
    Case("streams", "streams", "idle SubscribeToTask streams: server memory"),
    Case(
        "feed",
        "feed",
        "SendMessage at c=16 with 10 live feed clients (one stalled) vs none (a2a-trio only)",
    ),
    Case(
        "conversation",
        "conversation",
        "conversations of 1, 10 and 100 turns at c=16: turns/s, latency by turn",
    ),
)


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything that shapes a run (after ``--quick`` and explicit flags are combined)."""

    quick: bool
    runs: int
    duration_s: int
    warmup_s: int
    streams: int
    push_tasks: int
    push_concurrency: int
    slow_sends: int
    feed_sends: int
    conversation_turns: int
    conversation_history: int | None
    conversation_slices: int
    settle_bound_s: float
    push_bound_s: float
    server_core: int | None
    client_core: int | None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark a2a-trio against the a2a-sdk reference server.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="1 run x 3 s after a 1 s warm-up; 1,000 streams; 100 push tasks; 3 slow sends",
    )
    parser.add_argument("--runs", type=int, help="measured runs per wrk case (default 3)")
    parser.add_argument("--duration", type=int, help="seconds per wrk run (default 10)")
    parser.add_argument("--warmup", type=int, help="seconds of discarded warm-up (default 3)")
    parser.add_argument(
        "--cases",
        help="comma-separated case filters: substrings or globs of case names (see --list)",
    )
    parser.add_argument(
        "--servers",
        default=",".join(SERVERS),
        help=f"comma-separated servers (default {','.join(SERVERS)})",
    )
    parser.add_argument("--streams", type=int, help="idle streams to open (default 10000)")
    parser.add_argument("--push-tasks", type=int, help="tasks in the push case (default 500)")
    parser.add_argument("--slow-sends", type=int, help="sends each way in push-slow (default 10)")
    parser.add_argument(
        "--feed-sends", type=int, help="sends per measurement in the feed case (default 3000)"
    )
    parser.add_argument(
        "--conversation-turns",
        type=int,
        help="turns per conversation length in the conversation case (default 3200)",
    )
    parser.add_argument(
        "--conversation-history",
        type=int,
        help="historyLength every conversation turn sends (default: none)",
    )
    parser.add_argument(
        "--conversation-slices",
        type=int,
        default=1,
        help="run each conversation length in N parts, the lengths taking turns (default 1)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a directory holding another a2a_trio package (a checkout of an earlier commit): "
        "each selected a2a-trio server is run a second time with it, as NAME@base",
    )
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to cores")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="a superuser's URL of the local PostgreSQL the *-pg servers use: each server "
        f"process gets a database created and dropped on it (default {DEFAULT_PG_URL})",
    )
    parser.add_argument(
        "--no-pin-postgres",
        action="store_true",
        help="leave PostgreSQL's CPU affinity alone (by default it is pinned to the load "
        "generators' core while the run lasts, and restored after)",
    )
    parser.add_argument("--out", type=Path, help="also write the full JSON document here")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    return parser.parse_args(argv)


def choose_cores(no_pin: bool) -> tuple[int | None, int | None]:
    """(server core, load-generator core) when pinning is possible, else (None, None)."""
    if no_pin or shutil.which("taskset") is None:
        return None, None
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None, None
    return cores[0], cores[1]


def make_settings(args: argparse.Namespace) -> Settings:
    quick = bool(args.quick)

    def pick(value: int | None, normal: int, fast: int) -> int:
        return value if value is not None else (fast if quick else normal)

    server_core, client_core = choose_cores(args.no_pin)
    return Settings(
        quick=quick,
        runs=pick(args.runs, 3, 1),
        duration_s=pick(args.duration, 10, 3),
        warmup_s=pick(args.warmup, 3, 1),
        streams=pick(args.streams, 10_000, 1_000),
        push_tasks=pick(args.push_tasks, 500, 100),
        push_concurrency=16,
        slow_sends=pick(args.slow_sends, 10, 3),
        feed_sends=pick(args.feed_sends, 3000, 500),
        conversation_turns=pick(args.conversation_turns, 3200, 1600),
        conversation_history=args.conversation_history,
        conversation_slices=args.conversation_slices,
        settle_bound_s=10.0 if quick else 20.0,
        push_bound_s=20.0 if quick else 60.0,
        server_core=server_core,
        client_core=client_core,
    )


def select_cases(filters: str | None) -> list[Case]:
    if not filters:
        return list(CASES)
    patterns = [item.strip() for item in filters.split(",") if item.strip()]

    def wanted(name: str) -> bool:
        for pattern in patterns:
            glob = pattern if any(ch in pattern for ch in "*?[") else f"*{pattern}*"
            if fnmatch.fnmatchcase(name, glob):
                return True
        return False

    selected = [case for case in CASES if wanted(case.name)]
    if not selected:
        raise SystemExit(f"no case matches {filters!r}; see --list")
    return selected


def select_servers(names: str, baseline: Path | None = None) -> list[ServerKind]:
    """The servers named; with ``baseline``, each a2a-trio one preceded by its NAME@base twin."""
    chosen = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SERVERS]
    if unknown:
        raise SystemExit(f"unknown server(s) {unknown}; choose from {list(SERVERS)}")
    kinds = []
    for name in chosen:
        if baseline is not None and SERVERS[name].module == TRIO_SERVER:
            kinds.append(on_baseline(SERVERS[name], baseline))
        kinds.append(SERVERS[name])
    return kinds


# --- metadata ---------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_state() -> str:
    def git(*args: str) -> str:
        completed = subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
        )
        return completed.stdout.strip() if completed.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD")
    if not commit:
        return "not a git checkout"
    dirty = git("status", "--porcelain", "--", "a2a_trio")
    return commit + (" + uncommitted changes in a2a_trio/" if dirty else "")


def collect_meta(settings: Settings, postgres: LocalPostgres | None) -> dict[str, str]:
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
    }
    for package in PACKAGES:
        try:
            meta[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            meta[package] = "not installed"
    meta["a2a-trio"] += f" (git {_git_state()})"
    meta["wrk"] = wrk_version()
    meta["cpu"] = f"{_cpu_model()}, {os.cpu_count()} logical cores"
    meta["kernel"] = platform.release()
    if settings.server_core is not None:
        meta["pinning"] = (
            f"yes: servers on core {settings.server_core}; wrk and the Python "
            f"clients on core {settings.client_core}"
        )
    else:
        meta["pinning"] = "no (taskset or a second core unavailable, or --no-pin)"
    if postgres is not None:
        try:
            meta.update(postgres.describe())
        except PostgresError as error:
            meta["postgresql"] = f"unavailable: {error}"
    return meta


# --- running cases ----------------------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _leaves(error: BaseException) -> Iterator[BaseException]:
    """The errors a trio nursery's group holds (its own message says only how many)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


def _failed(error: BaseException, server: ServerProcess | None = None) -> dict[str, Any]:
    detail = "; ".join(
        "".join(traceback.format_exception_only(type(leaf), leaf)).strip()
        for leaf in _leaves(error)
    )
    if server is not None and not server.alive():
        detail = (
            f"server exited with {server.process.returncode}: {detail}\n"
            f"--- server log ---\n{server.log_tail()}"
        )
    return {"status": "failed", "error": detail}


def _nonce() -> str:
    return secrets.token_hex(4)


def run_wrk_case(case: WrkCase, server: ServerProcess, settings: Settings) -> dict[str, Any]:
    """Warm-up, then ``settings.runs`` measured runs; a dead server fails the case."""
    warmup = run_wrk(case, server.url, settings.warmup_s, _nonce(), settings.client_core)
    runs = []
    for number in range(1, settings.runs + 1):
        run = with_cpu(
            server,
            lambda: run_wrk(case, server.url, settings.duration_s, _nonce(), settings.client_core),
        )
        runs.append(run)
        log(
            f"  run {number}/{settings.runs}: {run['good_rps']:.0f} {case.unit}, "
            f"p50 {run['p50_ms']:.2f} ms, p99 {run['p99_ms']:.2f} ms, bad {run['bad']}, "
            f"server CPU {run['cpu_us_per_good']:.0f} us/resp"
        )
        if not server.alive():
            raise RuntimeError("the server exited during the run")
    return {"status": "ok", "warmup": warmup, "runs": runs, "summary": wrk_summary(runs)}


class ServerSession:
    """One server process for a sequence of cases, restarted (fresh database) if it dies."""

    def __init__(
        self, kind: ServerKind, workdir: Path, core: int | None, postgres: LocalPostgres | None
    ) -> None:
        self.kind = kind
        self.workdir = workdir
        self.core = core
        self.postgres = postgres
        self.server: ServerProcess | None = None
        self.starts = 0

    def ensure(self) -> ServerProcess:
        if self.server is not None and self.server.alive():
            return self.server
        if self.server is not None:
            log(f"  {self.kind.name} had exited ({self.server.process.returncode}); restarting")
            self.server.stop()
        self.starts += 1
        self.server = start_server(
            self.kind, self.workdir, f"load{self.starts}", self.core, self.postgres
        )
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def run_python_case(case: Case, server: ServerProcess, settings: Settings) -> dict[str, Any]:
    """``push``, ``push-slow`` or ``streams`` against ``server``; a dead server fails it."""
    push = PushCaseSettings(
        tasks=settings.push_tasks,
        concurrency=settings.push_concurrency,
        bound_s=settings.push_bound_s,
        slow_sends=settings.slow_sends,
    )
    if case.kind == "push":
        result = run_push(server.port, push, _nonce())
    elif case.kind == "push-slow":
        result = run_push_slow(server.port, push, _nonce())
    elif case.kind == "feed":
        result = run_feed(server.port, FeedCaseSettings(sends=settings.feed_sends), _nonce())
    elif case.kind == "conversation":
        conversation = ConversationSettings(
            total_turns=settings.conversation_turns,
            history_length=settings.conversation_history,
            slices=settings.conversation_slices,
        )
        result = run_conversations([server.port], [server.pid], conversation, _nonce())
        for length in result["lengths"]:
            log(
                f"  {length['length']} turns: {length['turns_per_s']:.0f} turns/s, "
                f"{length['cpu_us_per_turn']:.0f} us CPU/turn, follow-up p50 "
                f"{length['follow_up_p50_ms']:.1f} ms"
            )
    else:
        streams = StreamSettings(count=settings.streams, settle_bound_s=settings.settle_bound_s)
        result = run_streams(server.port, server.pid, streams, _nonce())
    if not server.alive():
        raise RuntimeError("the server exited during the case")
    return {"status": "ok", "result": result}


def run_grpc_case(server: ServerProcess, settings: Settings) -> dict[str, Any]:
    """As a wrk case, with grpcio's client at the card's GRPC interface (bench.grpc_load)."""
    target = grpc_target(server.url)
    warmup = run_grpc_load(target, settings.warmup_s, GRPC_CONCURRENCY, _nonce())
    runs = []
    for number in range(1, settings.runs + 1):
        run = with_cpu(
            server, lambda: run_grpc_load(target, settings.duration_s, GRPC_CONCURRENCY, _nonce())
        )
        runs.append(run)
        log(
            f"  run {number}/{settings.runs}: {run['good_rps']:.0f} req/s, "
            f"p50 {run['p50_ms']:.2f} ms, p99 {run['p99_ms']:.2f} ms, bad {run['bad']}, "
            f"server CPU {run['cpu_us_per_good']:.0f} us/resp"
        )
        if not server.alive():
            raise RuntimeError("the server exited during the run")
    return {"status": "ok", "warmup": warmup, "runs": runs, "summary": wrk_summary(runs)}


def run_one(case: Case, server: ServerProcess, settings: Settings) -> dict[str, Any]:
    if case.wrk is not None:
        return run_wrk_case(case.wrk, server, settings)
    if case.kind == "grpc":
        return run_grpc_case(server, settings)
    return run_python_case(case, server, settings)


def run_server(
    kind: ServerKind,
    cases: Sequence[Case],
    settings: Settings,
    workdir: Path,
    record: Callable[[Case, str, dict[str, Any]], None],
    postgres: LocalPostgres | None = None,
) -> None:
    """Every selected case against ``kind``; results go to ``record(case, server, entry)``."""
    if kind.load_only:
        cases = [case for case in cases if case.wrk is not None or case.kind == "grpc"]
    if kind.module != TRIO_SERVER:  # only a2a-trio has a live feed
        cases = [case for case in cases if case.kind != "feed"]
    if kind.module not in ASKING_SERVERS:
        cases = [case for case in cases if case.kind != "conversation"]
    load_cases = [case for case in cases if case.kind != "streams"]
    session = ServerSession(kind, workdir, settings.server_core, postgres)
    try:
        for case in load_cases:
            log(f"[{kind.name}] {case.name}")
            server: ServerProcess | None = None
            try:
                server = session.ensure()
                entry = run_one(case, server, settings)
            except Exception as error:
                entry = _failed(error, server)
                log(f"  FAILED: {entry['error'].splitlines()[0]}")
            record(case, kind.name, entry)
    finally:
        session.close()
    for case in cases:
        if case.kind != "streams":
            continue
        log(f"[{kind.name}] {case.name} (fresh process)")
        with contextlib.ExitStack() as stack:
            server = None
            try:
                server = stack.enter_context(
                    running_server(kind, workdir, "streams", settings.server_core, postgres)
                )
                entry = run_one(case, server, settings)
                result = entry["result"]
                log(
                    f"  {result['opened']} open, {result['kib_per_stream']:.1f} KiB/stream, "
                    f"after-before {result['after_minus_before_kib'] / 1024:.1f} MiB"
                )
            except Exception as error:
                entry = _failed(error, server)
                log(f"  FAILED: {entry['error'].splitlines()[0]}")
            record(case, kind.name, entry)


@contextlib.contextmanager
def pinned_to(core: int | None) -> Iterator[None]:
    """Run this process (the Python clients) on ``core`` while inside the block."""
    if core is None:
        yield
        return
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, previous)


@contextlib.contextmanager
def postgres_pinned(
    postgres: LocalPostgres | None, core: int | None, meta: dict[str, str]
) -> Iterator[None]:
    """PostgreSQL on the load generators' core while inside; what was done goes to ``meta``.

    A PostgreSQL that cannot be pinned (unreachable, not local, not ours to
    change) is noted and the run goes on unpinned.
    """
    with contextlib.ExitStack() as stack:
        if postgres is not None and core is None:
            meta["postgresql pinning"] = "no (no pinning in this run, or --no-pin-postgres)"
        elif postgres is not None and core is not None:
            try:
                pinned = stack.enter_context(postgres.pinned(core, log))
            except (PostgresError, OSError) as error:
                meta["postgresql pinning"] = f"no: {error}"
                log(f"PostgreSQL not pinned: {error}")
            else:
                meta["postgresql pinning"] = f"yes: {pinned.describe()}"
        yield


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for case in CASES:
            print(f"{case.name:22} {case.title}")
        return 0
    cases = select_cases(args.cases)
    kinds = select_servers(args.servers, args.baseline)
    settings = make_settings(args)
    raise_nofile_limit()
    if any(case.wrk for case in cases) and shutil.which("wrk") is None:
        log("wrk is not installed: the wrk cases will fail")
    postgres: LocalPostgres | None = None
    if any(kind.store == "postgres" for kind in kinds):
        try:
            postgres = LocalPostgres(args.pg_url)
        except PostgresError as error:
            raise SystemExit(str(error)) from None

    document: dict[str, Any] = {
        "meta": collect_meta(settings, postgres),
        "settings": dataclasses.asdict(settings),
        "servers": {kind.name: kind.description for kind in kinds},
        "cases": {
            case.name: {
                "name": case.name,
                "kind": case.kind,
                "title": case.title,
                "unit": case.unit,
                "results": {},
            }
            for case in cases
        },
    }

    def record(case: Case, server: str, entry: dict[str, Any]) -> None:
        document["cases"][case.name]["results"][server] = entry

    postgres_core = None if args.no_pin_postgres else settings.client_core
    with (
        pinned_to(settings.client_core),
        postgres_pinned(postgres, postgres_core, document["meta"]),
        tempfile.TemporaryDirectory(prefix="a2a-bench-") as tmp,
    ):
        for kind in kinds:
            run_server(kind, cases, settings, Path(tmp), record, postgres)

    markdown = render_markdown(document)
    print(markdown)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "latest.md").write_text(markdown)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2, default=str) + "\n")
        log(f"wrote {args.out}")
    log(f"wrote {RESULTS_DIR / 'latest.md'}")
    return 0

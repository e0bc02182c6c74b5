"""Python bytecodes per request, by package: ``python -m bench.opcodes MODE [...]``.

Starts a bench server (``a2a-trio``: :mod:`bench.trio_server` on a fresh
SQLite file; ``floor``: :mod:`bench.floor_server`) with a tracer that counts
every bytecode the interpreter runs (``sys.settrace`` with opcode events, in
every frame, from the start), sends ``--warmup`` requests as
:mod:`bench.callgrind` does, switches counting on (SIGUSR1), sends exactly
``--requests`` more, switches it off (SIGUSR2, which writes the counts), and
prints the bytecodes per request by package (h2, hpack, trio, a2a_trio's
rooms...), and with ``--top N`` the N functions that run the most.

What it counts is the Python the server runs, whatever the machine's load,
and where: the part of a request's work that the interpreter does, which
callgrind's totals (:mod:`bench.callgrind`) cannot split by Python function.
C code (pydantic-core, protobuf, SQLite, the socket) runs no bytecode and is
not in it. The tracer slows the server some tenfold.
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from .callgrind import load_options, send_grpc, send_http, to_the_client_core, wait_for_card
from .common import REPO
from .servers import free_port

#: Packages (path prefixes after site-packages, or in this repository) a count is grouped by.
GROUPS = (
    "h2/",
    "hpack/",
    "hyperframe/",
    "priority/",
    "h11/",
    "hypercorn/",
    "trio/",
    "pydantic/",
    "a2a_trio/server/hypercorn",
    "a2a_trio/server/h2_",
    "a2a_trio/server/grpc",
    "a2a_trio/protocol/protobuf",
    "a2a_trio/protocol/grpc",
    "a2a_trio/server",
    "a2a_trio/runtime",
    "a2a_trio/store",
    "a2a_trio/protocol",
    "a2a_trio/console",
    "a2a_trio",
    "bench/",
)


def _serve(argv: list[str]) -> None:
    """In the server process: count bytecodes while switched on, then run the server."""
    port, database, server, out = argv
    counts: collections.Counter[CodeType] = collections.Counter()
    on = [False]

    def local(frame: FrameType, event: str, _: Any) -> Any:
        if event == "opcode" and on[0]:
            counts[frame.f_code] += 1
        return local

    def trace(frame: FrameType, _event: str, _arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return local

    def stop(*_: Any) -> None:
        on[0] = False
        by_function: collections.Counter[tuple[str, str]] = collections.Counter()
        for code, count in counts.items():
            by_function[(code.co_filename, code.co_qualname)] += count
        part = Path(out + ".part")
        part.write_bytes(pickle.dumps(dict(by_function)))
        part.replace(out)  # whole when it appears

    signal.signal(signal.SIGUSR1, lambda *_: on.__setitem__(0, True))
    signal.signal(signal.SIGUSR2, stop)
    if server == "floor":
        from .floor_server import main
    else:
        from .trio_server import main
    sys.settrace(trace)
    threading.settrace(trace)
    main([port, database])


def _where(path: str) -> str:
    """``path`` as a group key: after site-packages, or relative to this repository."""
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    if path.startswith(str(REPO)):
        return path[len(str(REPO)) + 1 :]
    return path.rsplit("/", 1)[-1]


def group_of(path: str) -> str:
    where = _where(path)
    for prefix in GROUPS:
        if where.startswith(prefix):
            return prefix.rstrip("/")
    return "(other: stdlib, attrs, ...)"


def measure(args: argparse.Namespace, out_dir: Path) -> dict[tuple[str, str], int]:
    port = free_port()
    out = out_dir / "counts.pickle"
    command = [sys.executable, "-m", "bench.opcodes", "--serve", str(port)]
    command += [str(out_dir / "bench.db"), args.server, str(out)]
    if (os.cpu_count() or 1) >= 2:
        command = ["taskset", "-c", "0", *command]
    log = open(out_dir / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log, start_new_session=True)
    try:
        wait_for_card(port, process)

        def send(count: int) -> None:
            if args.mode == "grpc":
                send_grpc(port, count, args.connections)
            else:
                send_http(port, args.mode, count, args.connections)

        send(args.warmup)
        process.send_signal(signal.SIGUSR1)
        send(args.requests)
        process.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
        log.close()
    counts: dict[tuple[str, str], int] = pickle.loads(out.read_bytes())
    return counts


def main(argv: list[str]) -> None:
    if argv[:1] == ["--serve"]:
        _serve(argv[1:])
        return
    parser = argparse.ArgumentParser(
        prog="python -m bench.opcodes", description=__doc__.split("\n\n")[0]
    )
    load_options(parser, requests=400, warmup=100)
    parser.add_argument("--top", type=int, default=0, help="also the N busiest functions")
    args = parser.parse_args(argv)
    to_the_client_core()
    with tempfile.TemporaryDirectory(prefix="bench-opcodes-") as scratch:
        counts = measure(args, Path(scratch))
    groups: collections.Counter[str] = collections.Counter()
    for (path, _), count in counts.items():
        groups[group_of(path)] += count
    total = sum(groups.values())
    print(f"{args.server} {args.mode}: {total / args.requests:,.0f} bytecodes per request")
    for name, count in groups.most_common():
        print(f"  {count / args.requests:>9,.0f}  {count / total:6.1%}  {name}")
    if args.top:
        print(f"the {args.top} busiest functions, bytecodes per request:")
        busiest = sorted(counts.items(), key=lambda item: -item[1])[: args.top]
        for (path, name), count in busiest:
            print(f"  {count / args.requests:>9,.0f}  {_where(path)}:{name}")


if __name__ == "__main__":
    main(sys.argv[1:])

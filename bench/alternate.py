"""Alternated rounds: ``python -m bench.alternate [--servers A,B] [--case C,D] [--rounds N]``.

Starts every server at once, all on the server core (only the one under load
uses it), then runs each case against each server in turn (a wrk case, or
``send-grpc-c16``: :mod:`bench.grpc_load` at the card's GRPC interface),
round after round, the order reversed every other round. Each run's server
CPU per verified response is read from ``/proc`` around it. Within each
round, the first server's CPU is taken over each other server's for the
same case, and each other case's CPU over the first case's on the same
server (``--servers a2a-trio --case send-jsonrpc-c16,send-grpc-c16``: gRPC
over JSON-RPC). ``python -m bench`` runs one
server's runs together and the next server's minutes later; on a machine whose
speed drifts by a quarter between minutes (docs/benchmarks.md, 2026-11-27), a
ratio within a round compares the two servers at one moment.

``--baseline DIR`` puts ``NAME@base`` before every a2a-trio server named,
importing the ``a2a_trio`` package found in ``DIR`` (``run.select_servers``, as
``python -m bench`` does): the first server is then the baseline. Prints a line
per server (median CPU µs per response, the runs, the median of its system
part, median req/s) and, by round, the first server's CPU over each other's,
with their median.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from .grpc_load import GRPC_CASE, GRPC_CONCURRENCY, grpc_target, run_grpc_load
from .run import choose_cores, pinned_to, select_servers
from .servers import ServerKind, ServerProcess, running_server, with_cpu
from .wrk import WRK_CASES, WrkCase, run_wrk

WARMUP_S = 2


def _servers(names: str, baseline: str | None) -> list[ServerKind]:
    kinds = select_servers(names, Path(baseline) if baseline is not None else None)
    for kind in kinds:
        if kind.store == "postgres":
            raise SystemExit(f"{kind.name}: only servers without PostgreSQL are alternated here")
    return kinds


def _case(name: str) -> WrkCase | None:
    """The wrk case named ``name``; None for :data:`GRPC_CASE`."""
    if name == GRPC_CASE:
        return None
    for case in WRK_CASES:
        if case.name == name:
            return case
    known = ", ".join([*(c.name for c in WRK_CASES), GRPC_CASE])
    raise SystemExit(f"unknown case {name!r}; known: {known}")


def _load(
    case: WrkCase | None, server: ServerProcess, seconds: int, client_core: int | None
) -> dict[str, Any]:
    """One run of ``case`` against ``server`` from ``client_core``: a wrk-style result."""
    if case is not None:
        return run_wrk(case, server.url, seconds, secrets.token_hex(4), client_core)
    with pinned_to(client_core):  # grpc_load's process runs on this one's core
        return run_grpc_load(
            grpc_target(server.url), seconds, GRPC_CONCURRENCY, secrets.token_hex(4)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternate", description=__doc__)
    parser.add_argument("--servers", default="a2a-trio,hypercorn-floor")
    parser.add_argument("--case", default="send-jsonrpc-c16", help="one case or several, by comma")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=int, default=4, help="seconds of each run")
    parser.add_argument("--baseline", help="a directory holding another a2a_trio package")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args(argv)
    kinds = _servers(args.servers, args.baseline)
    names = args.case.split(",")
    cases = {name: _case(name) for name in names}
    server_core, client_core = choose_cores(args.no_pin)
    pairs = [(kind.name, name) for name in names for kind in kinds]
    cpu: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    rates: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    system: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    with tempfile.TemporaryDirectory(prefix="bench-alternate-") as work, ExitStack() as stack:
        servers = {
            kind.name: stack.enter_context(running_server(kind, Path(work), "alt", server_core))
            for kind in kinds
        }
        for server_name, name in pairs:
            _load(cases[name], servers[server_name], WARMUP_S, client_core)
        for number in range(args.rounds):
            for pair in pairs if number % 2 == 0 else pairs[::-1]:
                server = servers[pair[0]]
                run = with_cpu(
                    server, partial(_load, cases[pair[1]], server, args.duration, client_core)
                )
                if run["bad"] or not server.alive():
                    raise SystemExit(f"{pair}: bad answers or exited: {run}")
                cpu[pair].append(run["cpu_us_per_good"])
                system[pair].append(run["system_us_per_good"])
                rates[pair].append(run["good_rps"])
    print(f"{', '.join(names)}, {args.rounds} rounds of {args.duration} s, alternated")
    for pair in pairs:
        runs = cpu[pair]
        unit = "calls/s" if cases[pair[1]] is None else cases[pair[1]].unit  # type: ignore[union-attr]
        print(
            f"{pair[0]} {pair[1]}: {statistics.median(runs):,.0f} µs CPU a response"
            f" (runs {', '.join(f'{value:,.0f}' for value in runs)};"
            f" of it system {statistics.median(system[pair]):,.0f}),"
            f" {statistics.median(rates[pair]):,.0f} {unit}"
        )
    first = kinds[0].name
    for name in names:
        for kind in kinds[1:]:
            _ratios(f"{first} / {kind.name}, {name}", cpu[(first, name)], cpu[(kind.name, name)])
    for kind in kinds:
        for name in names[1:]:
            _ratios(
                f"{kind.name}, {name} / {names[0]}",
                cpu[(kind.name, name)],
                cpu[(kind.name, names[0])],
            )
    return 0


def _ratios(label: str, above: list[float], below: list[float]) -> None:
    ratios = [a / b for a, b in zip(above, below, strict=True)]
    print(
        f"{label} by round: {', '.join(f'{r:.2f}' for r in ratios)};"
        f" median {statistics.median(ratios):.2f}x"
    )


if __name__ == "__main__":
    sys.exit(main())

"""Alternated rounds: ``python -m bench.alternate [--servers A,B] [--case CASE] [--rounds N]``.

Starts every server at once, all on the server core (only the one under load
uses it), then runs one wrk case against each in turn, round after round,
the order reversed every other round. Each run's server CPU per verified
response is read from ``/proc`` around it, and the first server's CPU over
each other server's is taken within the round. ``python -m bench`` runs one
server's runs together and the next server's minutes later; on a machine whose
speed drifts by a quarter between minutes (docs/benchmarks.md, 2026-11-27), a
ratio within a round compares the two servers at one moment.

``--baseline DIR`` puts ``NAME@base`` before every a2a-trio server named,
importing the ``a2a_trio`` package found in ``DIR`` (``run.select_servers``, as
``python -m bench`` does): the first server is then the baseline. Prints a line
per server (median CPU µs per response, the runs, median req/s) and, by round,
the first server's CPU over each other's, with their median.
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

from .run import choose_cores, select_servers
from .servers import ServerKind, ServerProcess, running_server, with_cpu
from .wrk import WRK_CASES, WrkCase, run_wrk

WARMUP_S = 2


def _servers(names: str, baseline: str | None) -> list[ServerKind]:
    kinds = select_servers(names, Path(baseline) if baseline is not None else None)
    for kind in kinds:
        if kind.store == "postgres":
            raise SystemExit(f"{kind.name}: only servers without PostgreSQL are alternated here")
    return kinds


def _case(name: str) -> WrkCase:
    for case in WRK_CASES:
        if case.name == name:
            return case
    raise SystemExit(f"unknown case {name!r}; known: {', '.join(c.name for c in WRK_CASES)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.alternate", description=__doc__)
    parser.add_argument("--servers", default="a2a-trio,hypercorn-floor")
    parser.add_argument("--case", default="send-jsonrpc-c16")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=int, default=4, help="seconds of each run")
    parser.add_argument("--baseline", help="a directory holding another a2a_trio package")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args(argv)
    kinds, case = _servers(args.servers, args.baseline), _case(args.case)
    server_core, client_core = choose_cores(args.no_pin)
    cpu: dict[str, list[float]] = {kind.name: [] for kind in kinds}
    rates: dict[str, list[float]] = {kind.name: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="bench-alternate-") as work, ExitStack() as stack:
        servers: list[ServerProcess] = [
            stack.enter_context(running_server(kind, Path(work), "alt", server_core))
            for kind in kinds
        ]
        for server in servers:
            run_wrk(case, server.url, WARMUP_S, secrets.token_hex(4), client_core)
        for number in range(args.rounds):
            for server in servers if number % 2 == 0 else servers[::-1]:
                load = partial(
                    run_wrk, case, server.url, args.duration, secrets.token_hex(4), client_core
                )
                run = with_cpu(server, load)
                if run["bad"] or not server.alive():
                    raise SystemExit(f"{server.kind.name}: bad answers or exited: {run}")
                cpu[server.kind.name].append(run["cpu_us_per_good"])
                rates[server.kind.name].append(run["good_rps"])
    first = kinds[0].name
    print(f"{case.name}, {args.rounds} rounds of {args.duration} s, alternated")
    for kind in kinds:
        runs = cpu[kind.name]
        print(
            f"{kind.name}: {statistics.median(runs):,.0f} µs CPU a response"
            f" (runs {', '.join(f'{value:,.0f}' for value in runs)}),"
            f" {statistics.median(rates[kind.name]):,.0f} {case.unit}"
        )
    for kind in kinds[1:]:
        ratios = [a / b for a, b in zip(cpu[first], cpu[kind.name], strict=True)]
        print(
            f"{first} / {kind.name} by round: {', '.join(f'{r:.2f}' for r in ratios)};"
            f" median {statistics.median(ratios):.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

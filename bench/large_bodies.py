"""Does one large request stall everyone else? Card GETs timed while 10 MiB bodies arrive.

``python -m bench.large_bodies`` starts the a2a-trio bench server (pinned to
core 0, as the other cases), then for each body shape sends that body a few
times in a row on one connection while another connection GETs the card
every 5 ms; it reports the card GETs' p50/p99/max during the sends and how
the server answered each body. Target (issue 13): card p99 <= 100 ms.

Bounded: each shape is sent ``--rounds`` times (3 by default), 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import trio

from .servers import SERVERS, running_server

MIB = 1024 * 1024
#: Under the server's default 10 MiB body limit, with room for the envelope.
TARGET_BYTES = 10 * MIB - 4096


def _envelope(message: dict[str, object]) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    ).encode()


def _message(parts: list[dict[str, object]], **fields: object) -> dict[str, object]:
    return {"messageId": "big", "role": "ROLE_USER", "parts": parts, **fields}


def one_text_part() -> bytes:
    """A 10 MiB text in one part: accepted, stored, echoed back."""
    return _envelope(_message([{"text": "echo " + "y" * (TARGET_BYTES - 200)}]))


def thousand_parts() -> bytes:
    """1,000 parts of 10 KiB: the most parts a message may have; accepted."""
    size = TARGET_BYTES // 1000 - 40
    return _envelope(_message([{"text": "x" * size} for _ in range(1000)]))


def tiny_parts() -> bytes:
    """~9 MB of tiny parts (the hostile shape): refused by the parts limit."""
    count = TARGET_BYTES // len(b'{"text": "x"}, ')
    return _envelope(_message([{"text": "x"}] * count))


def wide_metadata() -> bytes:
    """Metadata of ~800,000 keys (a flat, hostile object): refused by json_items."""
    count = TARGET_BYTES // len(b'"k0000000": 0, ')
    metadata = {f"k{n:07d}": 0 for n in range(count)}
    return _envelope(_message([{"text": "echo wide"}], metadata=metadata))


SHAPES: dict[str, Callable[[], bytes]] = {
    "one-text-part": one_text_part,
    "1000-parts": thousand_parts,
    "tiny-parts": tiny_parts,
    "wide-metadata": wide_metadata,
}


async def _poll_card(url: str, stop: trio.Event, latencies: list[float]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            response = await client.get("/.well-known/agent-card.json")
            latencies.append(time.perf_counter() - started)
            assert response.status_code == 200
            await trio.sleep(0.005)


async def _measure(url: str, body: bytes, rounds: int) -> dict[str, object]:
    latencies: list[float] = []
    outcomes: list[str] = []
    send_seconds: list[float] = []
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_poll_card, url, stop, latencies)
        await trio.sleep(0.5)  # a baseline before the first body
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            for round_ in range(rounds):
                # A fresh messageId each time: a repeated one would be a retry.
                content = body.replace(b'"big"', f'"big-{round_}"'.encode(), 1)
                started = time.perf_counter()
                response = await client.post(
                    "/jsonrpc",
                    content=content,
                    headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
                )
                send_seconds.append(time.perf_counter() - started)
                answer = response.json()
                if "error" in answer:
                    outcomes.append(f"error {answer['error']['code']}")
                else:
                    outcomes.append(answer["result"]["task"]["status"]["state"])
        await trio.sleep(0.2)
        stop.set()
    ordered = sorted(latencies)
    return {
        "body_mib": round(len(body) / MIB, 2),
        "outcomes": sorted(set(outcomes)),
        "send_s": round(statistics.median(send_seconds), 3),
        "card_gets": len(ordered),
        "card_p50_ms": round(ordered[len(ordered) // 2] * 1000, 1),
        "card_p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 1),
        "card_max_ms": round(ordered[-1] * 1000, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--no-pin", action="store_true", help="do not pin the server to core 0")
    args = parser.parse_args(argv)
    bodies = {name: SHAPES[name]() for name in args.shapes.split(",")}
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        core = None if args.no_pin else 0
        with running_server(SERVERS["a2a-trio"], Path(workdir), "large", core) as server:
            for name, body in bodies.items():
                results[name] = trio.run(_measure, server.url, body, args.rounds)
                print(name, results[name], flush=True)
    worst = max(float(str(r["card_p99_ms"])) for r in results.values())
    print(f"worst card p99 while large bodies arrive: {worst} ms (target <= 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

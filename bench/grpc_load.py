"""The gRPC load generator: ``python -m bench.grpc_load TARGET SECONDS CONCURRENCY NONCE``.

grpcio's own client (its C core, on asyncio: the load generator is not under
test, and the fastest stock client keeps it from being the bottleneck) keeps
CONCURRENCY blocking ``SendMessage`` calls in flight on one channel to TARGET
(``host:port``, from the card's GRPC interface) for SECONDS, and prints one
``BENCH_RESULT {...}`` line shaped as the wrk script's: a call counts as good
only if it answers OK with a TASK_STATE_COMPLETED task.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import httpx

from .common import CARD_PATH, ECHO_TEXT, PROTOCOL_VERSION, REPO

RESULT_PREFIX = "BENCH_RESULT "
GRPC_CONCURRENCY = 16
#: The case's name in ``python -m bench`` and ``bench.alternate``.
GRPC_CASE = "send-grpc-c16"
CALL_TIMEOUT_S = 10.0
METADATA = (("a2a-version", PROTOCOL_VERSION),)


def grpc_target(base_url: str) -> str:
    """The ``host:port`` of the GRPC interface the server's card names."""
    card = httpx.get(base_url + CARD_PATH, timeout=10.0).json()
    for interface in card.get("supportedInterfaces", []):
        if interface.get("protocolBinding") == "GRPC":
            return str(interface["url"])
    raise RuntimeError("the server's card names no GRPC interface")


def run_grpc_load(target: str, seconds: float, concurrency: int, nonce: str) -> dict[str, Any]:
    """One run of this module in a child process (on this process's core); its result."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.grpc_load", target, str(seconds), str(concurrency), nonce],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=False,
    )
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
            return result
    raise RuntimeError(
        f"bench.grpc_load exited {completed.returncode} without a result: "
        f"{completed.stderr.strip()[-2000:]}"
    )


async def load(target: str, seconds: float, concurrency: int, nonce: str) -> dict[str, Any]:
    # Imported here: the harness imports this module without needing grpcio itself.
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    latencies: list[float] = []
    bad = 0
    errors = {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0}
    bad_sample = ""
    counter = 0
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        await channel.channel_ready()
        deadline = time.perf_counter() + seconds

        async def worker(number: int) -> None:
            nonlocal bad, bad_sample, counter
            while time.perf_counter() < deadline:
                counter += 1
                request = a2a_pb2.SendMessageRequest(
                    message=a2a_pb2.Message(
                        message_id=f"{nonce}-{number}-{counter}",
                        role=a2a_pb2.ROLE_USER,
                        parts=[a2a_pb2.Part(text=ECHO_TEXT)],
                    )
                )
                started = time.perf_counter()
                try:
                    answer = await stub.SendMessage(
                        request, metadata=METADATA, timeout=CALL_TIMEOUT_S
                    )
                except grpc.aio.AioRpcError as error:
                    code = error.code()
                    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                        errors["timeout"] += 1
                    elif code == grpc.StatusCode.UNAVAILABLE:
                        errors["connect"] += 1
                    else:
                        errors["status"] += 1
                    bad += 1
                    bad_sample = bad_sample or f"{code.name}: {error.details()}"
                    continue
                elapsed = time.perf_counter() - started
                if answer.task.status.state != a2a_pb2.TASK_STATE_COMPLETED:
                    bad += 1
                    bad_sample = bad_sample or str(answer)[:200]
                    continue
                latencies.append(elapsed)

        began = time.perf_counter()
        await asyncio.gather(*(worker(number) for number in range(concurrency)))
        wall = time.perf_counter() - began
    latencies.sort()

    def percentile(fraction: float) -> float:
        if not latencies:
            return float("nan")
        return latencies[min(len(latencies) - 1, int(fraction * len(latencies)))] * 1000

    return {
        "requests": len(latencies) + bad,
        "good": len(latencies),
        "good_rps": len(latencies) / wall,
        "bad": bad,
        "bad_sample": bad_sample,
        "p50_ms": percentile(0.50),
        "p99_ms": percentile(0.99),
        "duration_s": wall,
        "errors": errors,
    }


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        raise SystemExit("usage: python -m bench.grpc_load TARGET SECONDS CONCURRENCY NONCE")
    target, seconds, concurrency, nonce = argv
    result = asyncio.run(load(target, float(seconds), int(concurrency), nonce))
    print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Instructions per request, under callgrind: ``python -m bench.callgrind MODE [...]``.

Starts a bench server (``a2a-trio``: :mod:`bench.trio_server` on a fresh SQLite
file; ``floor``: :mod:`bench.floor_server`) under ``valgrind --tool=callgrind
--instr-atstart=no``, pinned to core 0 when there are two; sends ``--warmup``
requests over ``--connections`` keep-alive connections (this process, pinned
to core 1), switches instrumentation on (``callgrind_control -i on``), sends
exactly ``--requests`` more, each answer checked as the wrk script checks it,
dumps (``callgrind_control -d``), stops the server and prints the server's
instructions divided by the requests measured. MODE is ``jsonrpc``, ``rest``,
``stream`` (SendStreamingMessage, four events) or ``grpc`` (unary
SendMessage with grpcio's client on one channel).

The count does not move with the machine's load, unlike CPU time: the tool for
an A/B of a change on a busy machine. ``--baseline DIR`` measures the server
twice, first importing the ``a2a_trio`` package found in ``DIR`` (``git archive
COMMIT a2a_trio | tar -x -C DIR``), then this checkout's. ``--keep DIR`` keeps
the callgrind files (for ``callgrind_annotate``). Needs valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from .common import (
    CARD_PATH,
    COMPLETED,
    ECHO_TEXT,
    JSONRPC_PATH,
    PROTOCOL_VERSION,
    REPO,
    REST_SEND_PATH,
    VERSION_HEADER,
)
from .servers import free_port

MODES = ("jsonrpc", "rest", "stream", "grpc")
STARTUP_TIMEOUT = 240.0


def _message(nonce: str) -> str:
    return (
        f'{{"messageId":"{nonce}-{uuid.uuid4().hex}","role":"ROLE_USER",'
        f'"parts":[{{"text":"{ECHO_TEXT}"}}]}}'
    )


def _http_request(mode: str, nonce: str, number: int) -> tuple[str, str, dict[str, str]]:
    headers = {"Content-Type": "application/json", VERSION_HEADER: PROTOCOL_VERSION}
    if mode == "rest":
        return REST_SEND_PATH, f'{{"message":{_message(nonce)}}}', headers
    method = "SendMessage"
    if mode == "stream":
        method = "SendStreamingMessage"
        headers["Accept"] = "text/event-stream"
    body = (
        f'{{"jsonrpc":"2.0","id":{number},"method":"{method}",'
        f'"params":{{"message":{_message(nonce)}}}}}'
    )
    return JSONRPC_PATH, body, headers


def _good(mode: str, status: int, body: str) -> bool:
    if status != 200:
        return False
    if mode != "stream":
        return COMPLETED in body
    events = ("\n" + body).split("\ndata:")[1:]
    return len(events) == 4 and COMPLETED in events[-1]


def send_http(port: int, mode: str, count: int, connections: int) -> None:
    """``count`` requests over ``connections`` keep-alive connections; raise on a bad one."""
    remaining = [count]
    lock = threading.Lock()
    failures: list[str] = []
    nonce = uuid.uuid4().hex[:8]

    def worker() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            while True:
                with lock:
                    if remaining[0] == 0 or failures:
                        return
                    remaining[0] -= 1
                    number = remaining[0]
                path, body, headers = _http_request(mode, nonce, number)
                connection.request("POST", path, body, headers)
                answer = connection.getresponse()
                text = answer.read().decode()
                if not _good(mode, answer.status, text):
                    failures.append(f"{answer.status} {text[:300]}")
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} bad answers, the first: {failures[0]}")


def send_grpc(port: int, count: int, connections: int) -> None:
    """``count`` unary SendMessage calls, ``connections`` in flight on one channel."""
    import grpc
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    async def run() -> None:
        remaining = [count]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            await channel.channel_ready()

            async def worker() -> None:
                while remaining[0] > 0:
                    remaining[0] -= 1
                    request = a2a_pb2.SendMessageRequest(
                        message=a2a_pb2.Message(
                            message_id=uuid.uuid4().hex,
                            role=a2a_pb2.ROLE_USER,
                            parts=[a2a_pb2.Part(text=ECHO_TEXT)],
                        )
                    )
                    answer = await stub.SendMessage(
                        request, metadata=((VERSION_HEADER.lower(), PROTOCOL_VERSION),), timeout=120
                    )
                    if answer.task.status.state != a2a_pb2.TASK_STATE_COMPLETED:
                        raise RuntimeError(f"not completed: {answer}")

            await asyncio.gather(*(worker() for _ in range(connections)))

    asyncio.run(run())


def wait_for_card(port: int, process: subprocess.Popen[bytes]) -> None:
    """Until the server on ``port`` answers its card 200; RuntimeError if ``process`` exits."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", CARD_PATH)
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the server did not answer its card in time")


def _total_instructions(path: Path) -> int:
    # The last dump's "totals:" line (callgrind_control -d writes a file per dump).
    for line in path.read_text().splitlines():
        if match := re.match(r"(?:totals|summary):\s+(\d+)", line):
            return int(match.group(1))
    raise RuntimeError(f"no totals in {path}")


def measure(args: argparse.Namespace, code: str | None, out_dir: Path) -> float:
    """Instructions per request of one server process (``code``: another a2a_trio)."""
    port = free_port()
    module = "bench.floor_server" if args.server == "floor" else "bench.trio_server"
    database = str(out_dir / f"bench-{uuid.uuid4().hex[:8]}.db")
    if code is None:
        python = [sys.executable, "-m", module]
    else:
        start = (
            f"import runpy, sys; sys.path.insert(0, {code!r}); import a2a_trio;"
            f" sys.path.remove({code!r});"
            f" runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
        )
        python = [sys.executable, "-c", start]
    label = "base" if code else "this"
    out_file = out_dir / f"callgrind.{args.server}.{args.mode}.{label}.{uuid.uuid4().hex[:6]}"
    command = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out_file}",
        *python,
        str(port),
        database,
    ]
    if (os.cpu_count() or 1) >= 2:
        command = ["taskset", "-c", "0", *command]
    log = open(out_dir / f"server-{label}.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log, start_new_session=True)
    try:
        wait_for_card(port, process)
        connections: int = args.connections
        requests: int = args.requests

        def send(count: int) -> None:
            if args.mode == "grpc":
                send_grpc(port, count, connections)
            else:
                send_http(port, args.mode, count, connections)

        send(args.warmup)
        subprocess.run(
            ["callgrind_control", "-i", "on", str(process.pid)], check=True, capture_output=True
        )
        send(args.requests)
        subprocess.run(
            ["callgrind_control", "-d", str(process.pid)], check=True, capture_output=True
        )
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
    dumps = sorted(out_dir.glob(out_file.name + ".*"), key=lambda p: p.stat().st_mtime)
    dumps = [d for d in dumps if not d.name.endswith(".log")]
    if not dumps:
        raise RuntimeError(f"no callgrind dump beside {out_file}")
    return _total_instructions(dumps[0]) / requests


def load_options(parser: argparse.ArgumentParser, *, requests: int, warmup: int) -> None:
    """The options of a measured load: MODE, ``--server``, the requests and connections."""
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--server", choices=("a2a-trio", "floor"), default="a2a-trio")
    parser.add_argument("--requests", type=int, default=requests)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--connections", type=int, default=16)


def to_the_client_core() -> None:
    """Run this process (the load) on core 1 when there are two; the server gets core 0."""
    if (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {1})


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.callgrind", description=__doc__.split("\n\n")[0]
    )
    load_options(parser, requests=320, warmup=64)
    parser.add_argument("--baseline", help="a directory holding another a2a_trio package")
    parser.add_argument("--keep", help="keep the callgrind files in this directory")
    args = parser.parse_args(argv)
    to_the_client_core()
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as scratch:
        out_dir = Path(args.keep) if args.keep else Path(scratch)
        out_dir.mkdir(parents=True, exist_ok=True)
        results: list[tuple[str, float]] = []
        if args.baseline:
            results.append(("baseline", measure(args, str(Path(args.baseline).resolve()), out_dir)))
        results.append(("this checkout", measure(args, None, out_dir)))
    for label, figure in results:
        print(f"{args.server} {args.mode} {label}: {figure / 1e6:.3f} M instructions per request")
    if len(results) == 2:
        print(f"change: {(results[1][1] / results[0][1] - 1) * 100:+.1f} %")


if __name__ == "__main__":
    main(sys.argv[1:])

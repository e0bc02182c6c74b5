"""The ``conversation`` case: does a turn cost the same at turn 100 as at turn 2?

A conversation is a task the client keeps answering: its first message
(``ask ...``) creates a task that the bench agent pauses INPUT_REQUIRED with a
question, and each follow-up carries the task's id and pauses it again, so
every turn adds two messages to the task's history. 16 conversations run at
once (one keep-alive connection each, :class:`~bench.http1.Http1Client`), each
of ``turns`` blocking SendMessage calls over JSON-RPC, until about
``total_turns`` turns are done; then the same with the next length. Lengths 1
(every turn a new task), 10 and 100 are measured in one server process, one
after the other; with ``slices`` N above 1, each length's conversations are
cut in N parts, and the lengths take turns part by part, the order reversed
every other time (1, 10, 100, 100, 10, 1, ...): on a host whose speed drifts
between minutes, and a database that grows as the bench runs, each length
then meets the same spells and the same sizes, and the ratio of their turns/s
holds the lengths' difference, not the minutes'.

Reported per length: turns/s over the whole run, the server's CPU per turn
(``utime + stime`` of its process from ``/proc``), on PostgreSQL (when the
caller gives a :class:`DatabaseProbe`) the CPU of the backends serving the
bench's database and its committed transactions per turn, and the latency of the
turns by their number in the conversation (turn 1 creates the task, turn 2 is
the first follow-up). The targets (issue 25): turn 100's p50 within 1.25x of
turn 2's, and 100-turn conversations at >= 80 % of the turns/s of new tasks.

Follow-ups name no ``historyLength`` unless ``--conversation-history N`` says so:
the server then answers with the task's whole history window, as a client that
does not ask otherwise gets it.

A turn not answered as a paused task (an error, say the reference's SQLite
"database is locked" under this load) ends its conversation: it is counted
(``failed_turns``, with the first such answer), the next conversation starts,
and turns/s and latencies count the answered turns only, as the wrk cases
count verified responses only.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from .common import ASK_PREFIX, INPUT_REQUIRED, JSONRPC_PATH, cpu_seconds
from .http1 import Http1Client

__all__ = ["ConversationSettings", "DatabaseProbe", "render_conversations", "run_conversations"]

_ids = itertools.count(1)


class ConversationError(RuntimeError):
    """A turn was not answered as a paused task; the message says how it was."""


@dataclass(frozen=True, slots=True)
class ConversationSettings:
    #: The conversation lengths measured, in this order.
    lengths: tuple[int, ...] = (1, 10, 100)
    concurrency: int = 16
    #: Turns per length (rounded up to whole rounds of ``concurrency`` conversations).
    total_turns: int = 3200
    #: ``historyLength`` of every SendMessage (None: not sent).
    history_length: int | None = None
    #: Turns of 5-turn conversations run first and not measured.
    warmup_turns: int = 400
    #: The parts each length is run in, the lengths taking turns (module docstring).
    slices: int = 1


def _request(text: str, nonce: str, task_id: str | None, history: int | None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": f"{nonce}-{next(_ids)}",
        "role": "ROLE_USER",
        "parts": [{"text": f"{ASK_PREFIX} {text}"}],
    }
    if task_id is not None:
        message["taskId"] = task_id
    params: dict[str, Any] = {"message": message}
    if history is not None:
        params["configuration"] = {"historyLength": history}
    return {"jsonrpc": "2.0", "id": next(_ids), "method": "SendMessage", "params": params}


async def _turn(
    client: Http1Client, nonce: str, task_id: str | None, history: int | None
) -> tuple[str, int]:
    """One turn; the task's id and the size of the answer."""
    response = await client.request("POST", JSONRPC_PATH, _request("on", nonce, task_id, history))
    if response.status != 200:
        raise ConversationError(f"SendMessage answered {response.status}: {response.body[:300]!r}")
    task = response.json().get("result", {}).get("task")
    if not isinstance(task, dict) or task.get("status", {}).get("state") != INPUT_REQUIRED:
        raise ConversationError(f"not a paused task: {response.body[:300]!r}")
    return str(task["id"]), len(response.body)


@dataclass(frozen=True, slots=True)
class DatabaseProbe:
    """What PostgreSQL spent serving the bench's database, read before and after each length."""

    #: CPU seconds so far of each backend connected to the database, by PID.
    cpu: Callable[[], dict[int, float]]
    #: Transactions committed in the database so far (as its backends last reported).
    transactions: Callable[[], int]


def _database_spent(
    probe: DatabaseProbe, cpu_before: dict[int, float], transactions_before: int
) -> tuple[float, int]:
    """PostgreSQL's CPU seconds and committed transactions since the ``before`` readings.

    A backend connected meanwhile counts from zero; one gone meanwhile is lost.
    """
    cpu = sum(late - cpu_before.get(pid, 0.0) for pid, late in probe.cpu().items())
    time.sleep(1.0)  # the backends report their transaction counters within a second or so
    return cpu, probe.transactions() - transactions_before


@dataclass(slots=True)
class _Run:
    """What the conversations of one length gave: by turn number, and in all."""

    latencies: dict[int, list[float]]
    sizes: dict[int, int]
    failures: list[str]
    seconds: float = 0.0
    #: The servers' CPU seconds, and PostgreSQL's CPU seconds and transactions.
    cpu: float = 0.0
    database_cpu: float = 0.0
    transactions: int = 0

    def add(self, other: _Run) -> None:
        """``other``'s turns, counted as more of this one's."""
        for turn, values in other.latencies.items():
            self.latencies.setdefault(turn, []).extend(values)
        self.sizes.update(other.sizes)
        self.failures += other.failures
        self.seconds += other.seconds
        self.cpu += other.cpu
        self.database_cpu += other.database_cpu
        self.transactions += other.transactions


async def _converse(
    ports: Sequence[int],
    length: int,
    conversations: int,
    settings: ConversationSettings,
    nonce: str,
) -> _Run:
    """Run the conversations: latencies (s) and answer sizes by turn number, failed turns
    (each ends its conversation), and the wall time.

    With several ports (processes serving one database), turn N of conversation
    C goes to port (C + N) mod their number: every follow-up to another process.
    """
    run = _Run({turn: [] for turn in range(1, length + 1)}, {}, [])
    left = iter(range(conversations))

    async def worker() -> None:
        clients = [await Http1Client.connect(port) for port in ports]
        try:
            for conversation in left:
                task_id: str | None = None
                for turn in range(1, length + 1):
                    client = clients[(conversation + turn) % len(clients)]
                    began = time.perf_counter()
                    try:
                        task_id, size = await _turn(client, nonce, task_id, settings.history_length)
                    except ConversationError as failure:
                        run.failures.append(str(failure))
                        break
                    run.latencies[turn].append(time.perf_counter() - began)
                    run.sizes[turn] = size
        finally:
            for client in clients:
                await client.aclose()

    began = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(min(settings.concurrency, conversations)):
            nursery.start_soon(worker)
    run.seconds = time.perf_counter() - began
    return run


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _shown_turns(length: int) -> list[int]:
    return sorted({turn for turn in (1, 2, 3, 10, 25, 50, 75, 100) if turn <= length} | {length})


async def _measure(
    ports: Sequence[int],
    pids: Sequence[int],
    settings: ConversationSettings,
    nonce: str,
    database: DatabaseProbe | None,
) -> Any:
    await _converse(ports, 5, max(1, settings.warmup_turns // 5), settings, nonce + "w")
    runs: dict[int, _Run] = {}
    conversations: dict[int, int] = {}
    for length in settings.lengths:
        rounds = max(1, math.ceil(settings.total_turns / (length * settings.concurrency)))
        conversations[length] = rounds * settings.concurrency
    slices = max(1, settings.slices)
    for part in range(slices):
        for length in settings.lengths if part % 2 == 0 else settings.lengths[::-1]:
            # Whole rounds of concurrent conversations in each part, the rest in the last.
            rounds = conversations[length] // settings.concurrency
            share = rounds // slices + (rounds % slices if part == slices - 1 else 0)
            if share == 0:
                continue
            run = await _measured(
                ports, pids, length, share * settings.concurrency, settings, nonce, database
            )
            if length in runs:
                runs[length].add(run)
            else:
                runs[length] = run
    measured = database is not None
    results = [_figures(length, conversations[length], runs[length], measured) for length in runs]
    return {
        "history_length": settings.history_length,
        "slices": slices,
        "lengths": sorted(results, key=lambda entry: settings.lengths.index(entry["length"])),
    }


async def _measured(
    ports: Sequence[int],
    pids: Sequence[int],
    length: int,
    conversations: int,
    settings: ConversationSettings,
    nonce: str,
    database: DatabaseProbe | None,
) -> _Run:
    """:func:`_converse`, with what the servers and PostgreSQL spent meanwhile."""
    if database is not None:
        database_cpu, transactions = database.cpu(), database.transactions()
    cpu_before = sum(cpu_seconds(pid) for pid in pids)
    run = await _converse(ports, length, conversations, settings, nonce)
    run.cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
    if database is not None:
        run.database_cpu, run.transactions = _database_spent(database, database_cpu, transactions)
    return run


def _figures(length: int, conversations: int, run: _Run, database: bool) -> dict[str, Any]:
    """What is reported of one length's conversations (``database``: PostgreSQL's share too)."""
    latencies = run.latencies
    turns = sum(len(values) for values in latencies.values())  # answered ones
    by_turn = {
        turn: {
            "p50_ms": _percentile(latencies[turn], 0.5) * 1e3,
            "p99_ms": _percentile(latencies[turn], 0.99) * 1e3,
            "answer_bytes": run.sizes.get(turn, 0),
        }
        for turn in _shown_turns(length)
    }
    follow_ups = [value for turn in range(2, length + 1) for value in latencies[turn]]
    per_turn = (lambda value: value / turns) if turns else (lambda _: math.nan)
    figures: dict[str, Any] = {
        "length": length,
        "conversations": conversations,
        "turns": turns,
        "failed_turns": len(run.failures),
        "first_failure": run.failures[0][:300] if run.failures else None,
        "seconds": run.seconds,
        "turns_per_s": turns / run.seconds,
        "cpu_us_per_turn": per_turn(run.cpu * 1e6),
        "follow_up_p50_ms": _percentile(follow_ups, 0.5) * 1e3,
        "follow_up_p99_ms": _percentile(follow_ups, 0.99) * 1e3,
        "by_turn": {str(turn): shown for turn, shown in by_turn.items()},
    }
    if database:
        figures["postgres_cpu_us_per_turn"] = per_turn(run.database_cpu * 1e6)
        figures["transactions_per_turn"] = per_turn(run.transactions)
    return figures


def run_conversations(
    ports: Sequence[int],
    pids: Sequence[int],
    settings: ConversationSettings,
    nonce: str,
    database: DatabaseProbe | None = None,
) -> dict[str, Any]:
    """Every length of :class:`ConversationSettings` against the servers on ``ports``.

    CPU is summed over the processes ``pids``; PostgreSQL's is read from ``database``.
    """
    result: dict[str, Any] = trio.run(_measure, ports, pids, settings, nonce, database)
    return result


# --- the report ---------------------------------------------------------------------------------


def _num(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def conversation_targets(result: dict[str, Any]) -> dict[str, float]:
    """Turn 100's p50 / turn 2's, and 100-turn turns/s / new-task turns/s (when measured)."""
    by_length = {entry["length"]: entry for entry in result["lengths"]}
    targets: dict[str, float] = {}
    longest = by_length.get(100)
    if longest is not None:
        turns = longest["by_turn"]
        targets["p50_turn_100_over_turn_2"] = turns["100"]["p50_ms"] / turns["2"]["p50_ms"]
        if 1 in by_length:
            targets["turns_per_s_100_over_1"] = longest["turns_per_s"] / by_length[1]["turns_per_s"]
    return targets


def _sliced(results: dict[str, Any]) -> str:
    done = [entry["result"] for entry in results.values() if entry.get("status") == "ok"]
    slices = {result.get("slices", 1) for result in done}
    if slices == {1} or not slices:
        return ""
    return (
        f" Each length ran in {', '.join(map(str, sorted(slices)))} parts, the lengths taking"
        " turns part by part."
    )


def render_conversations(results: dict[str, Any]) -> list[str]:
    """Markdown for the case: per server, per length, then latency by turn."""
    lines = [
        "16 conversations at once, each a blocking SendMessage per turn (JSON-RPC); turn 1 "
        "creates the task, each later turn continues it. CPU: the server processes', per turn;"
        " PostgreSQL's: its backends serving the bench's database (— where not measured)."
        + _sliced(results),
        "",
        "| server | turns per conversation | turns/s | CPU µs/turn | PostgreSQL CPU µs/turn "
        "| transactions/turn | follow-up p50 ms | follow-up p99 ms | failed turns |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for server, entry in results.items():
        if entry.get("status") != "ok":
            lines.append(f"| {server} | FAILED: {str(entry.get('error'))[:120]} | | | | | | | |")
            continue
        for length in entry["result"]["lengths"]:
            follow = length["length"] > 1
            database = length.get("postgres_cpu_us_per_turn")
            transactions = length.get("transactions_per_turn")
            lines.append(
                f"| {server} | {length['length']} | {_num(length['turns_per_s'])} "
                f"| {_num(length['cpu_us_per_turn'])} "
                f"| {'—' if database is None else _num(database)} "
                f"| {'—' if transactions is None else f'{transactions:.2f}'} "
                f"| {_num(length['follow_up_p50_ms']) if follow else '—'} "
                f"| {_num(length['follow_up_p99_ms']) if follow else '—'} "
                f"| {length.get('failed_turns', 0)} |"
            )
    lines += [
        "",
        "| server | length | turn | p50 ms | p99 ms | answer bytes |",
        "|---|---|---|---|---|---|",
    ]
    for server, entry in results.items():
        if entry.get("status") != "ok":
            continue
        for length in entry["result"]["lengths"]:
            for turn, figures in length["by_turn"].items():
                lines.append(
                    f"| {server} | {length['length']} | {turn} | {_num(figures['p50_ms'])} "
                    f"| {_num(figures['p99_ms'])} | {figures['answer_bytes']:,} |"
                )
    lines.append("")
    for server, entry in results.items():
        if entry.get("status") != "ok":
            continue
        targets = conversation_targets(entry["result"])
        if targets:
            shown = ", ".join(f"{name} **{value:.2f}**" for name, value in targets.items())
            lines.append(f"- {server}: {shown} (targets: <= 1.25, >= 0.80)")
        for length in entry["result"]["lengths"]:
            if length.get("failed_turns"):
                lines.append(
                    f"- {server}, {length['length']} turns: {length['failed_turns']} turns"
                    f" failed, each ending its conversation; the first: "
                    f"`{length['first_failure']}`"
                )
    return lines

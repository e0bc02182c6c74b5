"""Turn the harness's result document into markdown tables.

The document (also written as JSON by ``--out``) holds ``meta`` (versions,
CPU, pinning), ``settings``, ``servers`` and ``cases``; every case holds one
entry per server, either ``{"status": "ok", ...}`` with its raw runs or
``{"status": "failed", "error": ...}``. A failure is shown as such in every
table it touches, never skipped.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from .conversations import conversation_targets, render_conversations

__all__ = ["RATIOS", "render_markdown", "wrk_summary"]

#: (subject, base): each pair run together gets a ratio column, on the same store.
RATIOS: tuple[tuple[str, str], ...] = (
    ("a2a-trio", "reference"),
    ("a2a-trio-pg", "reference-pg"),
    ("a2a-trio-bridged", "a2a-trio"),
)
#: (bridged, native): the same agent through the asyncio bridge and on trio;
#: their wrk cases also state the bridge's cost per request.
BRIDGE = ("a2a-trio-bridged", "a2a-trio")

Result = dict[str, Any]


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def wrk_summary(runs: Sequence[Result]) -> Result:
    """Median, min and max of good req/s, p50 and p99 over runs; bad and errors summed."""
    return {
        "rps": _spread([run["good_rps"] for run in runs]),
        # The server process's CPU per verified response (from /proc), when measured.
        "cpu_us": _spread([run.get("cpu_us_per_good", math.nan) for run in runs]),
        "p50_ms": _spread([run["p50_ms"] for run in runs]),
        "p99_ms": _spread([run["p99_ms"] for run in runs]),
        "requests": sum(run["requests"] for run in runs),
        "bad": sum(run["bad"] for run in runs),
        # status errors are already bad responses; these are the transport failures
        "errors": sum(
            run["errors"][kind] for run in runs for kind in ("connect", "read", "write", "timeout")
        ),
        "bad_sample": next((run["bad_sample"] for run in runs if run["bad_sample"]), ""),
    }


# --- number formatting ----------------------------------------------------------------------


def _num(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _spread_text(spread: Sequence[float], runs: int) -> str:
    median, low, high = spread
    if runs <= 1:
        return _num(median)
    return f"{_num(median)} ({_num(low)} to {_num(high)})"


def _ratio(subject: float | None, base: float | None) -> str:
    if subject is None or base is None or base == 0 or math.isnan(subject) or math.isnan(base):
        return "—"
    return f"{subject / base:.2f}x"


def _failure(entry: Result) -> str:
    reason = str(entry.get("error") or "unknown error").strip().splitlines()
    first = reason[0] if reason else "unknown error"
    return f"FAILED: {first[:160]}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return lines


# --- the headline number of each case kind --------------------------------------------------


def _headline(case: Result, entry: Result) -> float | None:
    """The number the summary table shows for one server, or None if it failed."""
    if entry.get("status") != "ok":
        return None
    kind = case["kind"]
    if kind in ("wrk", "grpc"):
        median: float = wrk_summary(entry["runs"])["rps"][0]
        return median
    result = entry["result"]
    key = {
        "streams": "kib_per_stream",
        "push": "deliveries_per_s",
        "push-slow": "added_ms",
        "feed": "ratio",
        "conversation": "",
    }[kind]
    if kind == "conversation":
        targets = conversation_targets(result)
        return targets.get("turns_per_s_100_over_1")
    value: float = result[key]
    return value


def _headline_label(case: Result) -> str:
    return {
        "wrk": f"{case.get('unit', 'req/s')} ↑",
        "grpc": f"{case.get('unit', 'req/s')} ↑",
        "streams": "KiB per open stream ↓",
        "push": "deliveries/s ↑",
        "push-slow": "ms added by a slow webhook ↓",
        "feed": "throughput watched / alone ↑",
        "conversation": "100-turn turns/s / new-task turns/s ↑",
    }[case["kind"]]


def _pairs(servers: Sequence[str]) -> list[tuple[str, str]]:
    """The ratio pairs whose two servers are both in this run."""
    return [(subject, base) for subject, base in RATIOS if subject in servers and base in servers]


def _summary(document: Result) -> list[str]:
    servers: list[str] = list(document["servers"])
    pairs = _pairs(servers)
    header = ["case", "metric", *servers, *(f"{subject} / {base}" for subject, base in pairs)]
    rows = []
    for case in document["cases"].values():
        if not case["results"]:
            continue
        row = [case["name"], _headline_label(case)]
        values: dict[str, float | None] = {}
        for server in servers:
            entry = case["results"].get(server)
            if entry is None:
                row.append("not run")
                continue
            values[server] = _headline(case, entry)
            value = values[server]
            row.append("FAILED" if value is None else _num(value))
        for subject, base in pairs:
            if case["kind"] in ("push-slow", "feed", "conversation"):
                row.append("—")  # a difference of near-zero numbers is no useful ratio
            else:
                row.append(_ratio(values.get(subject), values.get(base)))
        rows.append(row)
    return _table(header, rows)


# --- per-case detail tables -----------------------------------------------------------------


def _wrk_details(case: Result, servers: Sequence[str], runs: int) -> list[str]:
    unit = case.get("unit", "req/s")
    header = [
        "server",
        unit,
        "server CPU µs/resp",
        "p50 ms",
        "p99 ms",
        "responses",
        "bad",
        "transport errors",
    ]
    rows = []
    summaries: dict[str, Result] = {}
    samples = []
    for server in servers:
        entry = case["results"].get(server)
        if entry is None:
            continue
        if entry["status"] != "ok":
            rows.append([server, _failure(entry), "", "", "", "", "", ""])
            continue
        summary = summaries[server] = wrk_summary(entry["runs"])
        count = len(entry["runs"])
        rows.append(
            [
                server,
                _spread_text(summary["rps"], count),
                _spread_text(summary["cpu_us"], count),
                _spread_text(summary["p50_ms"], count),
                _spread_text(summary["p99_ms"], count),
                f"{summary['requests']:,}",
                str(summary["bad"]),
                str(summary["errors"]),
            ]
        )
        if summary["bad_sample"]:
            sample = " ".join(summary["bad_sample"].split()).replace("`", "'")[:200]
            samples.append(f"- {server}, first bad response: `{sample}`")
    lines = _table(header, rows)
    for subject_name, base_name in _pairs(servers):
        subject, base = summaries.get(subject_name), summaries.get(base_name)
        if subject and base:
            lines.append("")
            lines.append(
                f"{subject_name} / {base_name}: "
                f"**{_ratio(subject['rps'][0], base['rps'][0])}** "
                f"{unit}; p50 {_num(subject['p50_ms'][0])} vs {_num(base['p50_ms'][0])} ms, "
                f"p99 {_num(subject['p99_ms'][0])} vs {_num(base['p99_ms'][0])} ms."
            )
    bridged, native = (summaries.get(name) for name in BRIDGE)
    if bridged and native:
        lines += ["", _bridge_cost(bridged, native)]
    if samples:
        lines += ["", *samples]
    return lines


def _bridge_cost(bridged: Result, native: Result) -> str:
    """The asyncio bridge's cost per request: server time (1 / req/s, on one pinned
    core) and median latency, bridged minus native."""
    per_request_us = (1 / bridged["rps"][0] - 1 / native["rps"][0]) * 1e6
    p50_us = (bridged["p50_ms"][0] - native["p50_ms"][0]) * 1e3
    return (
        f"asyncio bridge cost per request: **{per_request_us:+,.0f} µs** of server time "
        f"(1 / req/s, {BRIDGE[0]} minus {BRIDGE[1]}), {p50_us:+,.0f} µs at the median latency."
    )


def _mib(kib: float) -> str:
    return _num(kib / 1024)


def _python_details(
    case: Result,
    servers: Sequence[str],
    header: Sequence[str],
    row_of: Callable[[Result], list[str]],
) -> list[str]:
    rows = []
    for server in servers:
        entry = case["results"].get(server)
        if entry is None:
            continue
        if entry["status"] != "ok":
            rows.append([server, _failure(entry), *[""] * (len(header) - 2)])
        else:
            rows.append([server, *row_of(entry["result"])])
    return _table(header, rows)


def _streams_row(result: Result) -> list[str]:
    opened = f"{result['opened']:,} / {result['requested']:,}"
    if result["failed"]:
        opened += f" ({result['failed']} failed: {result['first_error']})"
    fds = result["server_fds"]
    held = max(0, fds["after_close"] - fds["before"])
    if fds["after_close"] <= result["fds_released_at_most"]:
        released = f"yes, within {_num(result['close_wait_s'])} s"
    else:
        released = f"NO: {held:,} still held after {_num(result['close_wait_s'])} s"
    return [
        opened,
        _num(result["open_seconds"]),
        f"**{_num(result['kib_per_stream'])}**",
        " / ".join(
            _mib(result[key]) for key in ("rss_before_kib", "rss_open_kib", "rss_after_close_kib")
        ),
        _mib(result["after_minus_before_kib"]),
        released,
        _second_round(result),
        f"{_mib(result['rss_after_cancel_kib'])} MiB, "
        f"{max(0, result['fds_after_cancel'] - fds['before']):,} held",
    ]


def _second_round(result: Result) -> str:
    second = result.get("second_round")
    if not second:
        return ""
    return (
        f"{_mib(second['rss_open_kib'])} / {_mib(second['rss_after_close_kib'])} "
        f"(growth {_mib(result['growth_kib'])})"
    )


STREAMS_HEADER = [
    "server",
    "streams open",
    "open time s",
    "KiB per stream",
    "RSS MiB before / all open / after close",
    "after close - before MiB",
    "connections released after close",
    "second round: all open / after close MiB",
    "after the task is cancelled",
]


def _push_row(result: Result) -> list[str]:
    sent = f"{result['sent_ok']:,} / {result['tasks']:,}"
    if result["bad_sends"]:
        sent += f" ({result['bad_sends']} bad: {result['first_bad']})"
    waited = "bound hit" if result["wait_timed_out"] else "settled"
    lag = result["last_delivery_after_sends_s"]
    return [
        sent,
        _num(result["send_seconds"]),
        f"{result['deliveries']:,}",
        _num(result["deliveries_per_s"]),
        _num(result["deliveries_per_task"]),
        f"{result['tasks_notified']:,}",
        f"{result['tasks_completion_notified']:,}",
        # Negative: the last delivery came before the last answer (delivered inline).
        f"{_num(lag if math.isnan(lag) else max(0.0, lag))} ({waited})",
        str(result["bad_tokens"]),
    ]


PUSH_HEADER = [
    "server",
    "tasks sent ok",
    "send time s",
    "deliveries",
    "deliveries/s",
    "per task",
    "tasks notified",
    "completions notified",
    "last delivery after sends s",
    "wrong token",
]


def _push_slow_row(result: Result) -> list[str]:
    return [
        str(result["sends"]),
        _num(result["plain_median_ms"]),
        _num(result["slow_median_ms"]),
        f"**{_num(result['added_ms'])}**",
        str(result["slow_deliveries_started"]),
    ]


PUSH_SLOW_HEADER = [
    "server",
    "sends each",
    "median ms, no webhook",
    "median ms, 3 s webhook",
    "added by a 3 s webhook ms",
    "webhook calls received while sending",
]


def _feed_row(result: Result) -> list[str]:
    return [
        f"{result['sends']:,} x {len(result['alone_per_s'])}",
        " / ".join(_num(v) for v in result["alone_per_s"]),
        " / ".join(_num(v) for v in result["watched_per_s"]),
        f"**{result['ratio']:.3f}** (medians {result.get('median_ratio', math.nan):.3f})",
        str(result["stalled_received"]),
        _num(result["feed_clients_dropped"]),
    ]


FEED_HEADER = [
    "server",
    "sends per measurement",
    "SendMessage/s, no feed client",
    "SendMessage/s, 10 clients (1 stalled)",
    "best watched / best alone",
    "events the stalled client took",
    "feed clients dropped (since start)",
]


def _meta(document: Result) -> list[str]:
    meta = document["meta"]
    settings = document["settings"]
    rows = [[key, str(value)] for key, value in meta.items()]
    rows.append(
        [
            "runs",
            f"{settings['runs']} x {settings['duration_s']} s per wrk case after a "
            f"{settings['warmup_s']} s warm-up; streams {settings['streams']:,}; "
            f"push {settings['push_tasks']:,} tasks at c={settings['push_concurrency']}; "
            f"push-slow {settings['slow_sends']} sends each"
            + (" (quick mode)" if settings["quick"] else ""),
        ]
    )
    lines = _table(["item", "value"], rows)
    lines += ["", "Servers:", ""]
    lines += [f"- **{name}**: {text}" for name, text in document["servers"].items()]
    return lines


NOTES = [
    "req/s and streams/s count verified responses only: a SendMessage must answer 200 with a "
    "TASK_STATE_COMPLETED task, a stream must carry exactly 4 events ending COMPLETED, the card "
    "must answer 200 with a name. Cells are median (min to max) over the runs. wrk: one thread, "
    "pinned; latencies are wrk's, from request sent to response complete. gRPC: grpcio's "
    "client (bench/grpc_load.py) on the same core as wrk, 16 calls in flight on one HTTP/2 "
    "connection to the card's GRPC interface; a call counts if it ends OK with a "
    "TASK_STATE_COMPLETED task.",
]


def render_markdown(document: Result) -> str:
    """The whole report: metadata, the summary, then one table per case."""
    servers = list(document["servers"])
    runs = document["settings"]["runs"]
    lines = [f"# a2a-trio benchmark — {document['meta']['date']}", "", *_meta(document), ""]
    lines += ["## Summary", "", *_summary(document), "", *NOTES, "", "## Cases"]
    for case in document["cases"].values():
        if not case["results"]:
            continue  # no server selected ran it (a wrk-only server, say)
        lines += ["", f"### {case['name']} — {case['title']}", ""]
        kind = case["kind"]
        if kind in ("wrk", "grpc"):
            lines += _wrk_details(case, servers, runs)
        elif kind == "streams":
            lines += _python_details(case, servers, STREAMS_HEADER, _streams_row)
        elif kind == "push":
            lines += _python_details(case, servers, PUSH_HEADER, _push_row)
        elif kind == "feed":
            lines += _python_details(case, servers, FEED_HEADER, _feed_row)
        elif kind == "conversation":
            lines += render_conversations(case["results"])
        else:
            lines += _python_details(case, servers, PUSH_SLOW_HEADER, _push_slow_row)
        for server in servers:
            entry = case["results"].get(server, {})
            if entry.get("status") == "failed" and "\n" in str(entry.get("error", "")):
                lines += ["", f"<details><summary>{server} failure</summary>", "", "```"]
                lines += [str(entry["error"])[-3000:], "```", "", "</details>"]
    return "\n".join(lines) + "\n"

"""The console's tallies expose what prometheus_client's own metrics would."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from a2a_trio.console.tallies import CounterTally, HistogramTally, Tallies

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def exposition(registry: CollectorRegistry) -> str:
    """The text, each ``_created`` timestamp (a metric's first use) replaced by ``T``."""
    text = generate_latest(registry).decode()
    return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", text)


def test_tallies_expose_the_text_of_prometheus_clients_counter_and_histogram() -> None:
    theirs = CollectorRegistry(auto_describe=True)
    counter = Counter("a2a_requests", "Requests.", ["agent", "outcome"], registry=theirs)
    histogram = Histogram("a2a_seconds", "Time.", ["agent"], buckets=BUCKETS, registry=theirs)
    ours = CollectorRegistry(auto_describe=True)
    counted = CounterTally("a2a_requests", "Requests.", ["agent", "outcome"])
    timed = HistogramTally("a2a_seconds", "Time.", ["agent"], BUCKETS)
    ours.register(Tallies(counted, timed))
    # On the bounds, between them, past the last, and a label needing escapes.
    for seconds in (0.0005, 0.001, 0.0025, 0.003, 0.2, 1, 30, 31, 0.0):
        counter.labels("echo", "ok").inc()
        counted.inc(("echo", "ok"))
        histogram.labels("echo").observe(seconds)
        timed.observe(("echo",), seconds)
    counter.labels('a "quoted"\nagent', "é").inc(2.5)
    counted.inc(('a "quoted"\nagent', "é"), 2.5)
    histogram.labels("other").observe(7)
    timed.observe(("other",), 7)

    assert exposition(ours) == exposition(theirs)
    assert 'a2a_seconds_bucket{agent="echo",le="0.001"} 3.0' in exposition(ours)


def test_an_unused_tally_exposes_its_family_without_samples() -> None:
    ours = CollectorRegistry(auto_describe=True)
    ours.register(Tallies(CounterTally("a2a_none", "Nothing yet.", ["agent"])))
    theirs = CollectorRegistry(auto_describe=True)
    Counter("a2a_none", "Nothing yet.", ["agent"], registry=theirs)

    assert exposition(ours) == exposition(theirs)

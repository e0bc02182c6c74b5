"""The live feed: every committed event of every agent over WebSocket, filtered, resumable."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from a2a_trio.console import ConsoleSettings, FeedFilter, FeedHub

from .conftest import LiveServer, user_message
from .console_helpers import TOKEN, console_server, events_until, feed, feed_url


def _ended(event: dict[str, object]) -> bool:
    return event["kind"] == "execution.ended"


async def test_feed_carries_every_event_of_a_task_in_order(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _), feed(server) as ws:
        reply = await server.jsonrpc("SendMessage", {"message": user_message("echo hello")})
        task_id = reply["result"]["task"]["id"]
        events = await events_until(ws, _ended)
    kinds = [event["kind"] for event in events]
    assert kinds[:2] == ["execution.started", "task.created"]
    assert kinds.count("task.artifact") == 1
    assert kinds[-1] == "execution.ended"
    statuses = [e["state"] for e in events if e["kind"] == "task.status"]
    assert statuses[-1] == "TASK_STATE_COMPLETED"
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for event in events:
        assert event["agent"] == "scripted"
        assert event["task"] == task_id
        assert event["owner"] == ""  # the anonymous caller
        assert event["time"].endswith("Z")
    created = events[1]
    assert created["text"] == "echo hello"
    artifact = next(e for e in events if e["kind"] == "task.artifact")
    assert "hello" in artifact["text"]


async def test_feed_filters_by_task_and_kind(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        first = await server.jsonrpc("SendMessage", {"message": user_message("echo one")})
        first_id = first["result"]["task"]["id"]
        async with feed(server, "kind=task.status&state=completed") as ws:
            second = await server.jsonrpc("SendMessage", {"message": user_message("echo two")})
            second_id = second["result"]["task"]["id"]
            [event] = await events_until(ws, lambda e: True)
        assert event["kind"] == "task.status"
        assert event["task"] == second_id != first_id
        assert event["state"] == "TASK_STATE_COMPLETED"


async def _watched_once(server: LiveServer) -> None:
    """A client came and went: for a minute the feed keeps everything for its resume."""
    async with feed(server):
        pass


async def test_feed_resumes_after_a_sequence(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, console, _):
        await _watched_once(server)
        await server.jsonrpc("SendMessage", {"message": user_message("echo one")})
        middle = console.hub.seq
        await server.jsonrpc("SendMessage", {"message": user_message("echo two")})
        last = console.hub.seq
        async with feed(server, f"after={middle}&epoch={console.hub.epoch}") as ws:
            events = await events_until(ws, lambda e: e["seq"] == last)
    assert [e["seq"] for e in events] == list(range(middle + 1, last + 1))


async def test_feed_resume_past_the_backlog_starts_with_a_gap(tmp_path: Path) -> None:
    settings = ConsoleSettings(token=TOKEN, backlog=3, buffer=3)
    async with console_server(tmp_path, settings=settings) as (server, console, _):
        await _watched_once(server)
        await server.jsonrpc("SendMessage", {"message": user_message("echo one")})
        last = console.hub.seq
        assert last > 4
        async with feed(server, "after=1") as ws:
            events = await events_until(ws, lambda e: e["seq"] == last)
    gap = events[0]
    assert gap["kind"] == "feed.gap"
    assert gap["oldest"] == last - 2
    assert [e["seq"] for e in events[1:]] == [last - 2, last - 1, last]


async def test_feed_resume_from_another_process_starts_with_a_gap(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, console, _):
        await _watched_once(server)
        await server.jsonrpc("SendMessage", {"message": user_message("echo one")})
        async with feed(server, "after=1&epoch=not-this-one") as ws:
            events = await events_until(ws, lambda e: e["seq"] == console.hub.seq)
    assert events[0]["kind"] == "feed.gap"
    assert events[1]["seq"] == 1


async def test_a_client_whose_buffer_overflows_is_dropped_with_a_close_reason(
    tmp_path: Path,
) -> None:
    # One event of room: a round of several events overflows it at once.
    settings = ConsoleSettings(token=TOKEN, buffer=1)
    async with console_server(tmp_path, settings=settings) as (server, console, _):
        async with feed(server) as ws:
            await server.jsonrpc("SendMessage", {"message": user_message("echo hello")})
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    await ws.get_message()
        reason = closed.value.reason
        assert reason is not None and reason.reason is not None
        assert reason.code == 1013
        assert reason.reason.startswith("too slow: more than 1 events behind")
        assert console.hub.dropped == 1
        assert not console.hub.subscribers
        # The server goes on: the next message is answered.
        reply = await server.jsonrpc("SendMessage", {"message": user_message("echo again")})
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_feed_refuses_a_wrong_token(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, _, _):
        with pytest.raises(ConnectionRejected) as rejected:
            async with feed(server, token="wrong"):
                pass
        assert rejected.value.status_code == 401
        with pytest.raises(ConnectionRejected):
            async with open_websocket_url(feed_url(server)):
                pass


async def test_the_feed_takes_the_token_from_the_query_for_browsers(tmp_path: Path) -> None:
    async with (
        console_server(tmp_path) as (server, _, _),
        open_websocket_url(feed_url(server, f"token={TOKEN}")) as ws,
    ):
        assert json.loads(await ws.get_message())["kind"] == "feed.hello"


async def test_a_subscriber_too_far_behind_is_dropped_and_the_others_go_on() -> None:
    hub = FeedHub(buffer=2)
    slow = hub.subscribe(FeedFilter())
    fast = hub.subscribe(FeedFilter(kinds=frozenset({"task"})))
    for number in range(3):
        hub.publish({"kind": "task.status", "agent": "a", "task": str(number), "state": None})
        assert len(await fast.next()) == 1
    with pytest.raises(trio.EndOfChannel):
        await slow.next()
    assert slow.dropped == "too slow: more than 2 events behind; resume after 0"
    assert hub.subscribers == {fast} and hub.dropped == 1


async def test_a_subscriber_takes_what_piled_up_in_one_go_and_only_what_it_wants() -> None:
    hub = FeedHub()
    mine = hub.subscribe(FeedFilter(tasks=frozenset({"t-2"})))
    for _ in range(5):
        for task in ("t-1", "t-2"):
            hub.publish({"kind": "task.status", "agent": "a", "task": task, "state": None})
    texts = await mine.next(most=3)
    assert [json.loads(text)["seq"] for text in texts] == [2, 4, 6]
    assert [json.loads(text)["seq"] for text in await mine.next(most=10)] == [8, 10]
    assert mine.sent_seq == 10


async def test_a_waiting_subscriber_wakes_at_the_next_event() -> None:
    hub = FeedHub()
    subscriber = hub.subscribe(FeedFilter())
    got: list[str] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            got.extend(await subscriber.next())

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert not got
        hub.publish({"kind": "task.status", "agent": "a", "task": "t", "state": None})
    assert json.loads(got[0])["seq"] == 1


async def test_with_nobody_watching_events_are_counted_not_kept_and_a_resume_gets_a_gap() -> None:
    hub = FeedHub()
    hub.execution_started("a", "t", "")
    hub.execution_ended("a", "t", "", None)
    assert hub.seq == 2
    subscriber = hub.subscribe(FeedFilter(), after=0, epoch=hub.epoch)
    [gap] = await subscriber.next()
    assert json.loads(gap)["kind"] == "feed.gap"
    hub.execution_started("a", "u", "")  # watched now: kept
    assert [json.loads(text)["seq"] for text in await subscriber.next()] == [3]


async def test_a_client_that_left_a_minute_ago_or_less_resumes_without_a_loss() -> None:
    hub = FeedHub()
    hub.subscribe(FeedFilter()).close()
    hub.execution_started("a", "t", "")
    resumed = hub.subscribe(FeedFilter(), after=0, epoch=hub.epoch)
    assert [json.loads(text)["kind"] for text in await resumed.next()] == ["execution.started"]


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown event kind nope"):
        FeedFilter.parse({"kind": "task,nope"})


async def test_a_client_that_leaves_is_forgotten_without_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with console_server(tmp_path) as (server, console, _):
        async with feed(server):
            assert len(console.hub.subscribers) == 1
        with trio.fail_after(5):
            while console.hub.subscribers:  # noqa: ASYNC110 (the server notices the close)
                await trio.sleep(0.01)
        reply = await server.jsonrpc("SendMessage", {"message": user_message("echo after")})
        assert "result" in reply
    assert console.hub.dropped == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_the_servers_shutdown_closes_the_feed_at_once(tmp_path: Path) -> None:
    async with console_server(tmp_path) as (server, console, _), feed(server) as ws:
        server.app.begin_shutdown()
        with trio.fail_after(5), pytest.raises(ConnectionClosed) as closed:
            await ws.get_message()
        reason = closed.value.reason
        assert reason is not None
        assert (reason.code, reason.reason) == (1001, "the server is shutting down")
        assert console.hub.dropped == 0  # not counted as a slow client

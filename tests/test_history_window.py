"""A task's history is a window on its conversation; its event log keeps every message.

Messages live once, in the log; the task's row holds no history, so a turn of
a long conversation writes as much as the first did. What a response shows is
the window (``history_messages``, ``history_bytes`` in ``[limits]``) read from
the log. See docs/protocol.md, "Limits".
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from a2a_trio import A2AApp, HostSettings, Limits

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message
from .postgres import is_postgres, rows

QUESTION = "What is your name?"  # ScriptedExecutor's "ask"


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())


async def converse(server: LiveServer, *texts: str) -> str:
    """Send each text to one task (the first creates it, paused by "ask"); its id."""
    answer = await server.jsonrpc("SendMessage", {"message": user_message(texts[0])})
    task_id: str = answer["result"]["task"]["id"]
    for text in texts[1:]:
        message = user_message(text, taskId=task_id)
        answer = await server.jsonrpc("SendMessage", {"message": message})
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task_id


async def history_texts(server: LiveServer, task_id: str) -> list[str]:
    task = (await server.jsonrpc("GetTask", {"id": task_id}))["result"]
    return [message["parts"][0]["text"] for message in task.get("history", [])]


async def test_a_long_conversation_keeps_its_most_recent_messages(tmp_path: Path) -> None:
    settings = HostSettings(limits=Limits(history_messages=4))
    async with live_server(tmp_path, mount, host_settings=settings) as server:
        task_id = await converse(server, *(f"ask {n}" for n in range(6)))

        assert await history_texts(server, task_id) == ["ask 4", QUESTION, "ask 5", QUESTION]

        # The task's event log still holds every message it was sent.
        assert logged_messages(tmp_path / "a2a.db", task_id) == [f"ask {n}" for n in range(1, 6)]


async def test_a_history_keeps_its_bytes_within_the_limit_but_always_its_newest_message(
    tmp_path: Path,
) -> None:
    settings = HostSettings(limits=Limits(history_bytes=1_000))
    async with live_server(tmp_path, mount, host_settings=settings) as server:
        big = "ask " + "x" * 3_000
        task_id = await converse(server, "ask small", big)
        assert await history_texts(server, task_id) == [QUESTION]

        await converse_more(server, task_id, "ask again")
        texts = await history_texts(server, task_id)
        assert texts == [QUESTION, "ask again", QUESTION]
        task = (await server.jsonrpc("GetTask", {"id": task_id}))["result"]
        assert len(json.dumps(task["history"])) <= 1_000


def logged_messages(database: Path, task_id: str) -> list[str]:
    """The texts of the message events in the task's log (the first came with the task)."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        rows = connection.execute(
            "SELECT payload FROM task_events WHERE task_id = ? AND kind = 'message' ORDER BY seq",
            (task_id,),
        ).fetchall()
    return [json.loads(payload)["parts"][0]["text"] for (payload,) in rows]


async def converse_more(server: LiveServer, task_id: str, text: str) -> dict[str, Any]:
    message = user_message(text, taskId=task_id)
    answer: dict[str, Any] = await server.jsonrpc("SendMessage", {"message": message})
    return answer


# --- a turn writes what it adds, never the conversation ---------------------------------


def written(database: str, task_id: str) -> tuple[int, int]:
    """The task row's snapshot size, and the characters its log holds, as stored."""
    text = "snapshot::text" if is_postgres(database) else "snapshot"
    payload = "payload::text" if is_postgres(database) else "payload"
    [(row,)] = rows(database, f"SELECT length({text}) FROM tasks WHERE id = ?", task_id)
    [(log,)] = rows(
        database, f"SELECT sum(length({payload})) FROM task_events WHERE task_id = ?", task_id
    )
    return int(row), int(log)


async def test_a_turn_writes_as_much_at_turn_40_as_at_turn_2(database: str, tmp_path: Path) -> None:
    async with live_server(tmp_path, mount, database=database) as server:
        task_id = await converse(server, "ask 0", "ask 1")
        row_before, log_before = written(database, task_id)
        await converse_more(server, task_id, "ask 2")
        row_at_2, log_at_2 = written(database, task_id)
        for n in range(3, 40):
            await converse_more(server, task_id, f"ask {n}")
        _, log_at_39 = written(database, task_id)
        await converse_more(server, task_id, "ask 40")
        row_at_40, log_at_40 = written(database, task_id)

        # The row does not grow with the conversation (the texts differ by a digit)...
        assert row_at_40 <= row_at_2 + 8
        # ... and the log grows by the turn's own events, as much at turn 40 as at turn 2.
        assert log_at_40 - log_at_39 <= (log_at_2 - log_before) + 8
        # Yet every message is shown, read from the log.
        texts = await history_texts(server, task_id)
        assert texts[-4:] == ["ask 39", QUESTION, "ask 40", QUESTION]
        assert len(texts) == 2 * 41
        assert row_before <= row_at_2 + 8


async def test_an_answer_shows_the_history_get_task_shows(tmp_path: Path) -> None:
    # A new task's answer and a turn's last messages come from what the server just
    # recorded; a longer window from the log: the same window either way.
    settings = HostSettings(limits=Limits(history_messages=3))
    async with live_server(tmp_path, mount, host_settings=settings) as server:
        first = await server.jsonrpc("SendMessage", {"message": user_message("ask 0")})
        task = first["result"]["task"]
        got = await server.jsonrpc("GetTask", {"id": task["id"]})
        assert task["history"] == got["result"]["history"]
        for length in (None, 1, 2, 5):
            params: dict[str, Any] = {"message": user_message("ask more", taskId=task["id"])}
            if length is not None:
                params["configuration"] = {"historyLength": length}
            answer = (await server.jsonrpc("SendMessage", params))["result"]["task"]
            query: dict[str, Any] = {"id": task["id"]}
            if length is not None:
                query["historyLength"] = length
            got = await server.jsonrpc("GetTask", query)
            assert answer["history"] == got["result"]["history"]
            assert len(answer["history"]) == min(length or 3, 3)

"""What a follow-up writes, transaction by transaction.

On SQLite (one process holds the database) a follow-up's message is written
with its executor's first events, in one transaction. On PostgreSQL every
process is a member of a cluster: an execution holds its task's lease. A
follow-up takes it with its request's read (same round trip) and writes its
message with its executor's events, letting the lease go in the transaction
that records its last event; a new task answered in one round takes none.
Triggers note the transaction of every lease and event row written, and the
statement that committed a lease taken.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from a2a_trio import A2AApp
from a2a_trio.store.sqlite import SqliteStore
from a2a_trio.store.url import PostgresLocation

from .agents import ScriptedExecutor
from .conftest import live_server, make_card, user_message
from .postgres import database_for, postgres_changes, rows

NOTED = [
    "CREATE TABLE noted_writes (n bigserial PRIMARY KEY, tbl text, op text, xact bigint,"
    " task_id text, seq int, kind text, at timestamptz)",
    "CREATE FUNCTION note_event() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " INSERT INTO noted_writes (tbl, op, xact, task_id, seq, kind)"
    " VALUES ('event', TG_OP, txid_current(), NEW.task_id, NEW.seq, NEW.kind);"
    " RETURN NULL; END $$",
    "CREATE FUNCTION note_lease() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " INSERT INTO noted_writes (tbl, op, xact, task_id, at)"
    " VALUES ('lease', TG_OP, txid_current(), coalesce(NEW.task_id, OLD.task_id),"
    " statement_timestamp());"
    " RETURN NULL; END $$",
    # Fires as the lease's transaction commits: in the statement that took it
    # if that was the transaction's only one, else in a COMMIT sent after it.
    "CREATE FUNCTION note_lease_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    " INSERT INTO noted_writes (tbl, op, xact, task_id, at)"
    " VALUES ('lease', 'COMMIT', txid_current(), NEW.task_id, statement_timestamp());"
    " RETURN NULL; END $$",
    "CREATE TRIGGER noted_events AFTER INSERT ON task_events"
    " FOR EACH ROW EXECUTE FUNCTION note_event()",
    "CREATE TRIGGER noted_leases AFTER INSERT OR DELETE ON task_leases"
    " FOR EACH ROW EXECUTE FUNCTION note_lease()",
    "CREATE CONSTRAINT TRIGGER noted_lease_commits AFTER INSERT ON task_leases"
    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_lease_commit()",
]
UNNOTED = [
    "DROP TRIGGER IF EXISTS noted_events ON task_events",
    "DROP TRIGGER IF EXISTS noted_leases ON task_leases",
    "DROP TRIGGER IF EXISTS noted_lease_commits ON task_leases",
    "DROP FUNCTION IF EXISTS note_lease_commit()",
    "DROP FUNCTION IF EXISTS note_event()",
    "DROP FUNCTION IF EXISTS note_lease()",
    "DROP TABLE IF EXISTS noted_writes",
]


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())


def noted(database: str, task_id: str) -> list[tuple[str, str, int, int | None, str | None]]:
    found = rows(
        database,
        "SELECT tbl, op, xact, seq, kind FROM noted_writes WHERE task_id = ? ORDER BY n",
        task_id,
    )
    return [(str(t), str(o), int(x), s, k) for t, o, x, s, k in found]


async def test_a_follow_up_takes_and_lets_go_of_its_lease_with_its_own_writes(
    request: pytest.FixtureRequest, postgres: PostgresLocation, tmp_path: Path
) -> None:
    database = database_for("postgresql", tmp_path, request)
    async with live_server(tmp_path, mount, database=database) as server:
        with postgres_changes(postgres, NOTED, UNNOTED):
            answer = await server.jsonrpc("SendMessage", {"message": user_message("ask")})
            task = answer["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            created = noted(database, task["id"])
            message = user_message("ask again", taskId=task["id"])
            answer = await server.jsonrpc("SendMessage", {"message": message})
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            followed = noted(database, task["id"])[len(created) :]
            taking = rows(
                database,
                "SELECT op, at FROM noted_writes WHERE task_id = ? AND xact = (SELECT xact"
                " FROM noted_writes WHERE task_id = ? AND (tbl, op) = ('lease', 'INSERT'))"
                " ORDER BY n",
                task["id"],
                task["id"],
            )

    # The new task was answered in its rounds: it never held a lease.
    assert [op for tbl, op, *_ in created if tbl == "lease"] == []
    # The follow-up: its lease taken with the request's read (a statement of
    # its own in the read's round trip), nothing else in that transaction ...
    [taken] = [xact for tbl, op, xact, *_ in followed if (tbl, op) == ("lease", "INSERT")]
    assert {tbl for tbl, _, xact, *_ in followed if xact == taken} == {"lease"}
    # ... committed by that statement, its transaction's only one: no BEGIN
    # before it nor COMMIT after it (two more round trips).
    [(_, took), (commit, committed)] = taking
    assert (commit, committed) == ("COMMIT", took)
    # ... then one transaction for the rest: its message, the agent's events
    # (its question last) and the lease let go with them.
    [let_go] = [xact for tbl, op, xact, *_ in followed if (tbl, op) == ("lease", "DELETE")]
    events = [(seq, kind, xact) for tbl, _, xact, seq, kind in followed if tbl == "event"]
    assert events[0][1] == "message" and len(events) >= 2
    assert {xact for *_, xact in events} == {let_go}


async def test_on_sqlite_a_follow_up_writes_its_message_with_its_agents_events(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, mount) as server:
        store = server.app.store
        assert isinstance(store, SqliteStore)
        answer = await server.jsonrpc("SendMessage", {"message": user_message("ask")})
        task = answer["result"]["task"]
        before = store.commits
        message = user_message("ask again", taskId=task["id"])
        answer = await server.jsonrpc("SendMessage", {"message": message})
        after = store.commits
        history = await server.jsonrpc("GetTask", {"id": task["id"]})

    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # One commit: the message and the agent's events (its question again), where
    # writing the message first and waiting for it cost a transaction of its own.
    assert after - before == 1
    texts = [m["parts"][0]["text"] for m in history["result"]["history"]]
    assert texts[-2:] == ["ask again", "What is your name?"]


async def test_on_sqlite_follow_ups_sent_at_once_each_take_their_turn_in_the_history(
    tmp_path: Path,
) -> None:
    async with live_server(tmp_path, mount) as server:
        answer = await server.jsonrpc("SendMessage", {"message": user_message("ask")})
        task_id = answer["result"]["task"]["id"]
        states: list[str] = []

        async def follow_up(number: int) -> None:
            message = user_message(f"ask {number}", taskId=task_id)
            answered = await server.jsonrpc("SendMessage", {"message": message})
            states.append(answered["result"]["task"]["status"]["state"])

        async with trio.open_nursery() as nursery:
            for number in range(12):
                nursery.start_soon(follow_up, number)
        # An agent that returns without a word, then one that fails before one.
        silent = await server.jsonrpc(
            "SendMessage", {"message": user_message("silent", taskId=task_id)}
        )
        failed = await server.jsonrpc(
            "SendMessage", {"message": user_message("raise-now", taskId=task_id)}
        )
        read = await server.jsonrpc("GetTask", {"id": task_id, "historyLength": 100})

    assert states == ["TASK_STATE_INPUT_REQUIRED"] * 12
    assert silent["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert failed["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"
    texts = [m["parts"][0]["text"] for m in read["result"]["history"]]
    # Each follow-up's message, then the agent's question: no turn interleaved.
    asked = texts[: 2 + 2 * 12]
    assert asked[:2] == ["ask", "What is your name?"]
    assert asked[3::2] == ["What is your name?"] * 12
    assert sorted(asked[2::2]) == sorted(f"ask {n}" for n in range(12))
    assert texts[26:28] == ["silent", "raise-now"]

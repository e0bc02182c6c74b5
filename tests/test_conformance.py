"""The conformance agent plays each a2a-tck scenario (checked here without the kit)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from a2a_trio import A2AApp
from a2a_trio.cli.tck import ProfileRun, exit_status, keep_reports, report_stamps, summarise
from a2a_trio.conformance import (
    ConformanceExecutor,
    conformance_card,
    extended_conformance_card,
    scenario_for,
)

from .conftest import LiveServer, live_server, user_message


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    def mount(app: A2AApp) -> None:
        app.mount(
            "",
            card=conformance_card(),
            executor=ConformanceExecutor(),
            extended_card=extended_conformance_card(),
        )

    async with live_server(tmp_path, mount) as live:
        yield live


async def send(server: LiveServer, message_id: str, **fields: Any) -> dict[str, Any]:
    message = user_message("TCK", messageId=message_id, **fields)
    body = await server.jsonrpc("SendMessage", {"message": message})
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def test_the_longest_prefix_wins() -> None:
    assert scenario_for("tck-artifact-file-url-1a2b") != scenario_for("tck-artifact-file-1a2b")
    assert scenario_for("tck-artifact-file-url-1a2b")[1].parts[0].url


async def test_complete_task_completes_with_its_greeting(server: LiveServer) -> None:
    task = (await send(server, "tck-complete-task-abc-jsonrpc"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"] == [{"text": "Hello from TCK"}]
    assert task["status"]["message"]["role"] == "ROLE_AGENT"


async def test_an_unknown_prefix_completes_naming_it(server: LiveServer) -> None:
    task = (await send(server, "tck-something-else"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"] == [
        {"text": "Unhandled messageId prefix: tck-something-else"}
    ]


@pytest.mark.parametrize(
    ("prefix", "part"),
    [
        ("tck-artifact-text", {"text": "Generated text content"}),
        (
            "tck-artifact-file",
            {"raw": "dGNr", "filename": "output.txt", "mediaType": "text/plain"},
        ),
        (
            "tck-artifact-file-url",
            {
                "url": "https://example.com/output.txt",
                "filename": "output.txt",
                "mediaType": "text/plain",
            },
        ),
        ("tck-artifact-data", {"data": {"key": "value", "count": 42}}),
    ],
)
async def test_artifact_scenarios_complete_with_their_part(
    server: LiveServer, prefix: str, part: dict[str, Any]
) -> None:
    task = (await send(server, f"{prefix}-0000"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["artifactId"]
    assert task["artifacts"][0]["parts"] == [part]


async def test_message_response_is_a_message_and_no_task(server: LiveServer) -> None:
    result = await send(server, "tck-message-response-0000")
    assert list(result) == ["message"]
    assert result["message"]["parts"] == [{"text": "Direct message response"}]
    assert result["message"]["contextId"]


async def test_input_required_waits_and_a_follow_up_with_the_same_prefix_waits_again(
    server: LiveServer,
) -> None:
    task = (await send(server, "tck-input-required-0000"))["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    again = (await send(server, "tck-input-required-0000", taskId=task["id"]))["task"]
    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = (await send(server, "tck-complete-task-0000", taskId=task["id"]))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_history_keeps_follow_ups_that_reuse_a_message_id(server: LiveServer) -> None:
    task = (await send(server, "tck-input-required-S"))["task"]
    for text in ("TCK history message 1", "TCK history message 2"):
        message = user_message(text, messageId="tck-input-required-S", taskId=task["id"])
        await server.jsonrpc("SendMessage", {"message": message})
    await send(server, "tck-complete-task-S", taskId=task["id"])
    body = await server.jsonrpc("GetTask", {"id": task["id"], "historyLength": 10})
    texts = [
        part.get("text")
        for message in body["result"]["history"]
        for part in message["parts"]
        if part.get("text", "").startswith("TCK history")
    ]
    assert texts == ["TCK history message 1", "TCK history message 2"]


async def test_reject_task_is_rejected(server: LiveServer) -> None:
    task = (await send(server, "tck-reject-task-0000"))["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert task["status"]["message"]["parts"] == [{"text": "rejected"}]


@pytest.mark.parametrize(
    ("prefix", "texts"),
    [
        ("tck-stream-001", ["Stream hello from TCK"]),
        ("tck-stream-002", []),
        ("tck-stream-003", ["Stream task lifecycle"]),
        ("tck-stream-ordering-001", ["Ordered output"]),
        ("tck-stream-artifact-text", ["Streamed text content"]),
        ("tck-stream-artifact-chunked", ["chunk-1 ", "chunk-2"]),
    ],
)
async def test_stream_scenarios_relay_working_artifacts_then_completed(
    server: LiveServer, prefix: str, texts: list[str]
) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": user_message("TCK", messageId=f"{prefix}-0000")},
    }
    frames = [frame["result"] for frame in await server.sse("POST", "/jsonrpc", json=request)]
    assert frames[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert frames[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
    artifacts = [f["artifactUpdate"] for f in frames if "artifactUpdate" in f]
    assert [a["artifact"]["parts"][0]["text"] for a in artifacts] == texts
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    if prefix.endswith("chunked"):
        assert artifacts[1]["append"] is True and artifacts[1]["lastChunk"] is True
        assert artifacts[0]["artifact"]["artifactId"] == artifacts[1]["artifact"]["artifactId"]


async def test_the_extended_card_adds_a_skill(server: LiveServer) -> None:
    body = await server.jsonrpc("GetExtendedAgentCard", {})
    assert [s["id"] for s in body["result"]["skills"]] == ["tck-scenarios", "tck-extended"]


def test_profiles_declare_what_the_kit_looks_for() -> None:
    default = conformance_card("default").capabilities
    assert default.streaming and default.push_notifications and default.extended_agent_card
    assert not default.extensions
    bare = conformance_card("no-streaming").capabilities
    assert not (bare.streaming or bare.push_notifications or bare.extended_agent_card)
    required = conformance_card("required-extension").capabilities.extensions or []
    assert [(e.uri, e.required) for e in required] == [("urn:a2a:tck:required-extension", True)]
    with pytest.raises(ValueError, match="unknown profile"):
        conformance_card("loud")  # type: ignore[arg-type]


def test_summary_merges_profiles_and_counts_per_level(tmp_path: Path) -> None:
    runs = [
        ProfileRun(
            "default",
            0,
            tmp_path,
            {
                "CORE-SEND-001": {"level": "MUST", "status": "PASS"},
                "CORE-CAP-002": {"level": "MUST", "status": "SKIPPED"},
                "CARD-CACHE-001": {"level": "SHOULD", "status": "PASS"},
            },
        ),
        ProfileRun(
            "no-streaming",
            0,
            tmp_path,
            {
                "CORE-SEND-001": {"level": "MUST", "status": "PASS"},
                "CORE-CAP-002": {"level": "MUST", "status": "PASS"},
                "CORE-CAP-004": {"level": "MUST", "status": "FAIL"},
            },
        ),
    ]
    counts, names = summarise(runs)
    assert counts["MUST"] == {"PASS": 2, "FAIL": 1}
    assert counts["SHOULD"] == {"PASS": 1}
    assert names["MUST FAIL"] == ["CORE-CAP-004"]


def test_tck_command_refuses_a_directory_that_is_not_the_kit(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "a2a_trio.cli", "tck", "--tck-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "does not look like an a2a-tck checkout" in result.stderr
    assert "run_tck.py" in result.stderr


def test_a_profile_that_selects_no_test_fails_nothing(tmp_path: Path) -> None:
    # --level should: the required-extension profile's one test is a MUST test,
    # so pytest collects nothing and exits 5.
    runs = [
        ProfileRun(
            "default", 0, tmp_path, {"CARD-CACHE-001": {"level": "SHOULD", "status": "PASS"}}
        ),
        ProfileRun("required-extension", 5, tmp_path),
    ]
    assert runs[1].selected_nothing
    assert not runs[1].broken
    assert exit_status(runs) == 0


def test_a_failed_must_requirement_fails_the_command(tmp_path: Path) -> None:
    runs = [
        ProfileRun("default", 1, tmp_path, {"CORE-SEND-001": {"level": "MUST", "status": "FAIL"}})
    ]
    assert exit_status(runs) == 1


@pytest.mark.parametrize("kit_status", [2, 3, 4], ids=["interrupted", "internal", "usage"])
def test_a_kit_that_could_not_run_fails_the_command(tmp_path: Path, kit_status: int) -> None:
    runs = [
        ProfileRun("default", 0, tmp_path, {"CORE-SEND-001": {"level": "MUST", "status": "PASS"}}),
        ProfileRun("no-streaming", kit_status, tmp_path),
    ]
    assert runs[1].broken
    assert exit_status(runs) == 1


def an_earlier_runs(report: Path, text: str) -> None:
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)
    os.utime(report, (time.time() - 3600,) * 2)


def test_reports_the_kit_did_not_write_in_this_run_are_not_kept(tmp_path: Path) -> None:
    # The kit writes compatibility.json only when some test ran: a run that
    # selected nothing leaves the previous profile's file in place.
    source, kept = tmp_path / "kit" / "reports", tmp_path / "tck-reports" / "required-extension"
    an_earlier_runs(source / "compatibility.json", '{"per_requirement": {}}')
    an_earlier_runs(source / "junitreport.xml", "<testsuites>earlier</testsuites>")
    an_earlier_runs(kept / "compatibility.json", "kept by an earlier a2a-trio tck")
    before = report_stamps(source)

    (source / "junitreport.xml").write_text("<testsuites>this run</testsuites>")
    (source / "tck_report.html").write_text("<html>this run</html>")
    keep_reports(source, before, kept)

    assert sorted(path.name for path in kept.iterdir()) == ["junitreport.xml", "tck_report.html"]
    assert (kept / "junitreport.xml").read_text() == "<testsuites>this run</testsuites>"


def test_no_reports_directory_keeps_an_empty_one(tmp_path: Path) -> None:
    kept = tmp_path / "tck-reports" / "default"
    an_earlier_runs(kept / "compatibility.json", "kept by an earlier a2a-trio tck")
    keep_reports(tmp_path / "kit" / "reports", {}, kept)
    assert list(kept.iterdir()) == []

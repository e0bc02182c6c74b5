"""The console page in headless Chromium (Debian's, driven by Playwright): the issue's acceptance.

Playwright's sync API runs in a worker thread while the server runs in the
test's trio run. The screenshot is written to the test's directory, and to
docs/console.png when ``A2A_TRIO_UPDATE_SCREENSHOT`` is set.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from a2a_trio.push import PushSettings

from .agents import ScriptedExecutor
from .conftest import VERSION_HEADERS, user_message
from .console_helpers import TOKEN, console_server
from .webhooks import Reply, WebhookReceiver, webhook_receiver

playwright = pytest.importorskip("playwright.sync_api", reason="the dev extra installs Playwright")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DOCS = Path(__file__).resolve().parent.parent / "docs"
WAIT_MS = 15_000

pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="no chromium on PATH (apt-get install chromium; .ci/run does)",
)


def send(url: str, text: str, **params: Any) -> str:
    """SendMessage over JSON-RPC from the browser's thread; the task id."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": user_message(text), **params},
    }
    reply = httpx.post(f"{url}/jsonrpc", json=body, headers=VERSION_HEADERS, timeout=10).json()
    task_id: str = reply["result"]["task"]["id"]
    return task_id


def drive(url: str, hook: WebhookReceiver, executor: ScriptedExecutor, shot: Path) -> None:
    """Every acceptance step, in the page, as an operator would take it."""
    expect = playwright.expect
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(WAIT_MS)
            # Open with the token: the feed goes live.
            page.goto(f"{url}/_a2a/console#token={TOKEN}")
            expect(page.get_by_test_id("feed-status")).to_have_text("feed: live")
            expect(page.get_by_test_id("agents")).to_contain_text("Test Agent")

            # A SendMessage appears in the task list without a reload.
            echoed = send(url, "echo hello console")
            row = page.locator(f'#tasks tr[data-task="{echoed}"]')
            expect(row.get_by_test_id("state")).to_have_text("COMPLETED")

            # Its timeline shows each event.
            row.click()
            expect(page.locator("#task-id")).to_have_text(echoed)
            entries = page.get_by_test_id("timeline-entry")
            expect(entries).to_have_count(4)
            kinds = [entries.nth(i).get_attribute("data-kind") for i in range(4)]
            assert kinds == ["task", "status", "artifact", "status"]
            expect(page.get_by_test_id("timeline")).to_contain_text("hello console")

            # A failing webhook shows its attempts and a dead letter.
            config = {"url": hook.url_for("/hook"), "token": "hook-secret-token"}
            hooked = send(
                url,
                "echo hooked",
                configuration={"taskPushNotificationConfig": config, "returnImmediately": True},
            )
            page.locator(f'#tasks tr[data-task="{hooked}"]').click()
            expect(page.locator("#task-id")).to_have_text(hooked)
            deliveries = page.get_by_test_id("task-deliveries")
            dead = deliveries.get_by_test_id("delivery").filter(has_text="dead letter")
            expect(dead.first).to_be_visible()
            expect(dead.first.get_by_test_id("attempt")).to_have_count(2)
            expect(dead.first).to_contain_text("HTTP 500")

            # Redrive delivers it to a receiver that now answers 200.
            hook.default = Reply(200)
            # That delivery by its id: ``dead.first`` is looked up again at each
            # use, and another of the task's four deliveries may die in between.
            delivery_id = dead.first.get_attribute("data-delivery")
            redriven = deliveries.locator(f'[data-delivery="{delivery_id}"]')
            redriven.get_by_test_id("redrive").click()
            expect(redriven.get_by_test_id("delivery-state")).to_have_text("delivered")
            expect(redriven.get_by_test_id("attempt")).to_have_count(3)

            # Cancel ends a running task CANCELED.
            held = send(url, "hold", configuration={"returnImmediately": True})
            held_row = page.locator(f'#tasks tr[data-task="{held}"]')
            expect(held_row.get_by_test_id("state")).to_have_text("WORKING")
            held_row.click()
            expect(page.get_by_test_id("task-state")).to_have_text("WORKING")
            page.get_by_test_id("cancel").click()
            expect(page.get_by_test_id("task-state")).to_have_text("CANCELED")
            expect(held_row.get_by_test_id("state")).to_have_text("CANCELED")
            assert not executor.gate.release.is_set()  # it was cancelled, not let go

            # The picture for docs/console.md: the echoed task's timeline.
            page.locator(f'#tasks tr[data-task="{echoed}"]').click()
            expect(page.locator("#task-id")).to_have_text(echoed)
            expect(entries).to_have_count(4)
            page.screenshot(path=str(shot), full_page=True)

            # A wrong token gets 401.
            wrong = browser.new_page()
            wrong.set_default_timeout(WAIT_MS)
            answers: list[int] = []
            wrong.on("response", lambda r: answers.append(r.status) if "/api/" in r.url else None)
            wrong.goto(f"{url}/_a2a/console#token=wrong")
            expect(wrong.get_by_test_id("banner")).to_contain_text("401")
            assert answers and set(answers) == {401}
        finally:
            browser.close()


async def test_the_console_in_a_browser(tmp_path: Path) -> None:
    push = PushSettings(allowed_hosts=("127.0.0.1",), max_attempts=2, backoff=0)
    shot = tmp_path / "console.png"
    async with (
        webhook_receiver(default=Reply(500)) as hook,
        console_server(tmp_path, push_settings=push) as (server, _, executor),
    ):
        with trio.fail_after(120):
            await trio.to_thread.run_sync(drive, server.url, hook, executor, shot)
    assert shot.stat().st_size > 10_000
    if os.environ.get("A2A_TRIO_UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, DOCS / "console.png")


def watch_storm(url: str, storm_started: trio.Event, seconds: float) -> dict[str, int]:
    """Open the page, let the test start the storm, and read the page while it lasts."""
    expect = playwright.expect
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(f"{url}/_a2a/console#token={TOKEN}")
            expect(page.get_by_test_id("feed-status")).to_have_text("feed: live")
            trio.from_thread.run_sync(storm_started.set)
            rows = 0
            deadline = trio.from_thread.run_sync(trio.current_time) + seconds
            while trio.from_thread.run_sync(trio.current_time) < deadline:
                # The page keeps answering scripts while the events pour in.
                rows = max(rows, page.evaluate("document.querySelectorAll('#tasks tr').length"))
            expect(page.get_by_test_id("feed-status")).to_have_text("feed: live")
            page.wait_for_timeout(500)  # the last batch
            shown = page.locator('#tasks tr[data-task="storm-last"]').count()
            return {"rows": rows, "last_shown": shown}
        finally:
            browser.close()


async def test_the_page_keeps_up_with_a_thousand_events_a_second(tmp_path: Path) -> None:
    seconds = 3.0
    async with console_server(tmp_path) as (server, console, _):
        started = trio.Event()
        published = 0

        async def storm() -> None:
            nonlocal published
            await started.wait()
            end = trio.current_time() + seconds
            while trio.current_time() < end:
                for _ in range(10):  # 10 events every 10 ms
                    published += 1
                    console.hub.publish(
                        {
                            "kind": "task.status",
                            "agent": "scripted",
                            "task": f"storm-{published % 2000}",
                            "owner": "load",
                            "state": "TASK_STATE_WORKING",
                            "time": "2026-01-01T00:00:00.000Z",
                        }
                    )
                await trio.sleep(0.01)
            console.hub.publish(
                {
                    "kind": "task.status",
                    "agent": "scripted",
                    "task": "storm-last",
                    "owner": "load",
                    "state": "TASK_STATE_COMPLETED",
                    "time": "2026-01-01T00:00:03.000Z",
                }
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(storm)
            with trio.fail_after(60):
                seen = await trio.to_thread.run_sync(watch_storm, server.url, started, seconds)
        assert console.hub.dropped == 0  # the page took every event
    assert published >= 1000 * seconds * 0.5
    assert seen["rows"] <= 200
    assert seen["last_shown"] == 1

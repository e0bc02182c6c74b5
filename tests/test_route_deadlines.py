"""Every route the app serves has the same body deadline, Quart's own included (issue 31).

A body trickled to ``/metrics``, ``/_a2a/*`` or a path no route has was
never cut off (150 s measured); and POSTs with a body to Quart's 404/405
routes went unanswered 1-2 % of the time under 16 keep-alive clients, a
quart-trio fault (docs/upstream/quart-trio-unread-body.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import pytest
import trio

from a2a_trio import A2AApp, ServerSettings
from a2a_trio.console import ConsoleSettings, attach_console

from .agents import ScriptedExecutor
from .conftest import live_server, make_card
from .servers import ServerProcess

BODY_TIMEOUT = 1.0
CALLS_PER_CLIENT = 60


def mount_with_console(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=ScriptedExecutor())
    attach_console(app, ConsoleSettings(token="operator-token"))


@pytest.mark.parametrize("path", ["/metrics", "/_a2a/health/live", "/nowhere"])
async def test_a_body_trickled_to_a_route_quart_serves_is_cut_off_in_time(
    tmp_path: Path, path: str
) -> None:
    settings = ServerSettings(body_timeout=BODY_TIMEOUT)
    async with live_server(tmp_path, mount_with_console, settings=settings) as server:
        host, port = server.url.removeprefix("http://").split(":")
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n".encode()
            )
            started = trio.current_time()
            answer = b""

            async def trickle() -> None:
                for _ in range(100):  # a byte a second, for longer than allowed
                    await trio.sleep(1)
                    await stream.send_all(b" ")

            with trio.fail_after(BODY_TIMEOUT + 2):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trickle)
                    while b"\r\n\r\n" not in answer:
                        data = await stream.receive_some(4096)
                        assert data, "closed without an answer"
                        answer += data
                    nursery.cancel_scope.cancel()
        elapsed = trio.current_time() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert BODY_TIMEOUT - 0.1 < elapsed < BODY_TIMEOUT + 2
        assert (await server.client.get("/_a2a/health/live")).status_code == 200


async def test_posts_to_quarts_404_and_405_routes_are_all_answered_on_kept_alive_connections(
    tmp_path: Path,
) -> None:
    # Served as an operator serves it (the echo agent, its console and
    # /metrics): stock quart-trio left some 10 % of these unanswered on this
    # machine, each a ReadTimeout here; a bare quart-trio app the same.
    with ServerProcess.configured_app_served(tmp_path) as server:
        outcomes: Counter[int | str] = Counter()

        async def client() -> None:
            async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
                for n in range(CALLS_PER_CLIENT):
                    path = "/metrics" if n % 2 else "/nowhere"
                    try:
                        response = await http.post(path, content=b'{"x": 1}')
                    except httpx.HTTPError as error:
                        outcomes[type(error).__name__] += 1
                    else:
                        outcomes[response.status_code] += 1

        async with trio.open_nursery() as nursery:
            for _ in range(16):
                nursery.start_soon(client)
        half = 16 * CALLS_PER_CLIENT // 2
        assert outcomes == {404: half, 405: half}

"""SIGTERM stops ``a2a-trio serve`` at once when all a client holds is an idle connection.

The last request on a kept-alive connection may have been served by Quart
(a path no route has, ``/metrics``) rather than by the app's own ASGI code:
hypercorn then started the connection's idle timer inside Quart's cancelled
request, so the timer never ran, and the connection stayed until the
shutdown's ``graceful_timeout`` (grace + 5 s) ran out
(a2a_trio/server/hypercorn_tcp.py, fault 5).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from .servers import ServerProcess, serve_command
from .test_keep_alive import answer_status

#: runtime.shutdown_grace, as the deployment sets it (serve waits this + 5 s).
GRACE = 10.0


@pytest.mark.parametrize("request_line", [b"GET /nowhere", b"GET /metrics", b"POST /metrics"])
async def test_sigterm_stops_serve_at_once_with_an_idle_connection_after_a_quart_route(
    tmp_path: Path, request_line: bytes
) -> None:
    (tmp_path / "a2a.toml").write_text(f"[runtime]\nshutdown_grace = {GRACE}\n")
    request = request_line + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
    with ServerProcess.configured_app_served(tmp_path, command=serve_command) as server:
        async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
            status = await answer_status(stream, request)
            assert status.split()[1] in (b"200", b"404", b"405")
            # The connection is idle, kept alive; the server is told to stop.
            server.process.terminate()
            try:
                await trio.to_thread.run_sync(server.process.wait, GRACE / 2)
            except subprocess.TimeoutExpired:
                pytest.fail(f"serve still runs {GRACE / 2} s after SIGTERM:\n{server.output()}")
            assert server.process.returncode == 0, server.output()

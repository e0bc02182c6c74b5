"""The test servers' own harness (tests/servers.py): whose socket a port is."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from .servers import free_port, listens_on


def test_a_port_is_ours_only_when_our_session_listens_on_it() -> None:
    group = os.getpgrp()
    port = free_port()
    assert not listens_on(group, port)  # free
    with socket.create_server(("127.0.0.1", port)):
        assert listens_on(group, port)
    assert not listens_on(group, port)
    # Another session's server on the port: not ours, though the port answers.
    script = (
        f"import socket, sys; server = socket.create_server(('127.0.0.1', {port}));"
        " print('up', flush=True); sys.stdin.read()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as other:
        try:
            assert other.stdout is not None and other.stdout.readline() == "up\n"
            assert listens_on(other.pid, port)
            assert not listens_on(group, port)
        finally:
            other.kill()

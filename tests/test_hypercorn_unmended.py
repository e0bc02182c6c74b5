"""On a hypercorn release the mends were not written for, the server says so and stays safe.

The server runs on hypercorn 0.17.3 from a virtualenv of its own: only
hypercorn is installed there; every other package comes from this
interpreter's site-packages through a ``.pth`` file. It is built once per
interpreter and kept in the temporary directory. Where it cannot be built
(no package index) the tests skip, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import httpx
import pytest
import trio

from a2a_trio.server.hypercorn_release import MENDED_VERSIONS

from .conftest import user_message
from .servers import CARD_PATH, ServerProcess, hypercorn_command

UNMENDED = "0.17.3"
REQUIREMENT = f"hypercorn=={UNMENDED}"
PIP = (sys.executable, "-m", "pip")
TIMEOUT = 10.0


def _unmended_python() -> Path:
    """The interpreter of a virtualenv holding hypercorn UNMENDED and reaching our packages."""
    key = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"a2a-trio-hypercorn-{UNMENDED}-{key}"
    python = root / "bin" / "python"
    if (root / "ready").exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    subprocess.run(
        [*PIP, "--python", str(python), "install", "--quiet", "--no-deps", REQUIREMENT],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site_packages = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # After the venv's own site-packages, so its hypercorn is the one imported.
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site_packages) / "a2a_trio_tests_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in sorted(ours))
    )
    (root / "ready").touch()
    return python


@pytest.fixture(scope="module")
def unmended_python() -> Path:
    try:
        return _unmended_python()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        detail = getattr(error, "stderr", b"") or b""
        reason = f"cannot build a virtualenv with hypercorn {UNMENDED}: {error} {detail[-500:]!r}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def server(
    unmended_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("unmended")

    def command(port: int) -> list[str]:
        return hypercorn_command("a2a_trio:app", port, python=str(unmended_python))

    with ServerProcess.configured_app_served(directory, command=command) as process:
        yield process


def test_the_release_is_one_the_mends_do_not_cover() -> None:
    assert UNMENDED not in MENDED_VERSIONS


def test_starting_the_app_logs_an_error_naming_what_is_unprotected(
    server: ServerProcess,
) -> None:
    # hypercorn configures logging only after the app's start-up: the record
    # reaches the output through logging's last resort (WARNING and above).
    output = server.output()
    [line] = [line for line in output.splitlines() if "mends cover" in line]
    assert line.startswith(f"hypercorn {UNMENDED} is not a release a2a-trio's mends cover"), output
    for open_fault in ("stops the worker", "hypercorn#225", "HTTP/2 is refused", "send_timeout"):
        assert open_fault in line


def test_the_record_is_an_error_of_the_server_logger(unmended_python: Path) -> None:
    ran = subprocess.run(
        [
            unmended_python,
            "-c",
            "import logging; logging.basicConfig(format='%(levelname)s %(name)s: %(message)s'); "
            "from a2a_trio.server.hypercorn_release import log_unprotected; log_unprotected()",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert ran.stderr.startswith(f"ERROR a2a_trio.server: hypercorn {UNMENDED} is not"), ran.stderr


async def test_http_1_1_is_served(server: ServerProcess) -> None:
    async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as client:
        card = await client.get(server.url + CARD_PATH)
        sent = await client.post(
            server.url + "/jsonrpc",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": user_message("over HTTP/1.1")},
            },
            headers={"A2A-Version": "1.0"},
        )
    assert card.http_version == sent.http_version == "HTTP/1.1"
    assert card.json()["name"] == "Echo Agent"
    task = sent.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "over HTTP/1.1"


async def test_http_2_is_refused_with_http_1_1_required(server: ServerProcess) -> None:
    # Prior knowledge (gRPC's insecure channel): the connection is refused
    # as a whole before any stream, since stock faults let one client stop
    # the process.
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    stream_id = connection.get_next_available_stream_id()
    connection.send_headers(
        stream_id,
        [(":method", "GET"), (":scheme", "http"), (":authority", "127.0.0.1"), (":path", "/")],
        end_stream=True,
    )
    sock = trio.socket.socket()
    await sock.connect(("127.0.0.1", server.port))
    terminated: list[h2.events.ConnectionTerminated] = []
    async with trio.SocketStream(sock) as stream:
        await stream.send_all(connection.data_to_send())
        with trio.fail_after(TIMEOUT):
            while data := await stream.receive_some():
                events = connection.receive_data(data)
                terminated += [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    assert [event.error_code for event in terminated] == [h2.errors.ErrorCodes.HTTP_1_1_REQUIRED]
    await server.assert_still_serving()


def test_the_unmended_interpreter_really_runs_that_release(unmended_python: Path) -> None:
    ran = subprocess.run(
        [unmended_python, "-c", "import importlib.metadata as m; print(m.version('hypercorn'))"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert ran.stdout.strip() == UNMENDED

"""h2's check of received header characters, by regular expressions.

The module: a2a_trio/server/h2_header_checks.py.

The replacement must refuse exactly what h2's own refuses, with the same
error: compared on random headers (Hypothesis) and on the bytes that
matter, then on the wire, where the served app must still refuse a request
whose headers break RFC 9113 (8.2.1) and serve the next connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest
import trio
from h2.exceptions import ProtocolError
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_trio.server import h2_header_checks
from a2a_trio.server.h2_header_checks import H2_OWN, reject_illegal_characters

from .servers import CARD_PATH, ServerProcess

#: Bytes around every boundary RFC 9113 (8.2.1) draws, and some ordinary ones.
EDGES = bytes([0x00, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x21, 0x3A, 0x40, 0x41, 0x5A, 0x5B])
EDGES += bytes([0x60, 0x61, 0x7A, 0x7E, 0x7F, 0x80, 0xFF]) + b"abc-:/ "
TIMEOUT = 20.0


def outcome(check: object, headers: list[tuple[bytes, bytes]]) -> object:
    """What ``check`` yields for ``headers``, or the message of the error it raises."""
    try:
        return list(check(headers, None))  # type: ignore[operator]
    except ProtocolError as error:
        return f"ProtocolError: {error}"


field = st.binary(max_size=12) | st.lists(st.sampled_from(EDGES), max_size=12).map(bytes)


@settings(max_examples=3_000, deadline=None)
@given(st.lists(st.tuples(field, field), max_size=6))
def test_it_refuses_what_h2_refuses_with_the_same_error(
    headers: list[tuple[bytes, bytes]],
) -> None:
    assert outcome(reject_illegal_characters, headers) == outcome(H2_OWN, headers)


@pytest.mark.parametrize(
    "header",
    [
        (b"content-type", b"application/grpc"),
        (b":path", b"/lf.a2a.v1.A2AService/SendMessage"),
        (b"user-agent", b"grpc-python/1.76 grpc-c/51.0.0 (linux; chttp2)"),
        (b"x-empty", b""),
        (b"Content-Type", b"x"),
        (b"con tent", b"x"),
        (b"caf\xc3\xa9", b"x"),
        (b"a:b", b"x"),
        (b"::path", b"x"),
        (b"x", b"a\x00b"),
        (b"x", b"a\nb"),
        (b"x", b"a\rb"),
        (b"x", b" a"),
        (b"x", b"a\t"),
        (b"x", b"caf\xc3\xa9 \x7f"),
        (b"x", b"\t"),
    ],
)
def test_each_rule_of_rfc_9113_8_2_1_as_h2_applies_it(header: tuple[bytes, bytes]) -> None:
    assert outcome(reject_illegal_characters, [header]) == outcome(H2_OWN, [header])


def test_it_is_installed_for_the_h2_in_use() -> None:
    # Fails on an h2 release it was not compared with: run this file against
    # that release and extend CHECKED_VERSIONS, or let h2's own stay.
    assert h2_header_checks.install()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess.configured_app_served(tmp_path_factory.mktemp("h2-checks")) as process:
        yield process


@pytest.mark.parametrize(
    "header", [("X-Upper", "1"), ("x-nul", "a\x00b"), ("x-blank", " a"), ("bad name", "1")]
)
async def test_the_served_app_refuses_a_request_whose_headers_break_the_rules(
    server: ServerProcess, header: tuple[str, str]
) -> None:
    # The client's h2 neither lowercases nor checks what it sends.
    config = h2.config.H2Configuration(
        client_side=True, normalize_outbound_headers=False, validate_outbound_headers=False
    )
    client = h2.connection.H2Connection(config)
    client.initiate_connection()
    headers = [(":method", "GET"), (":path", CARD_PATH), (":scheme", "http")]
    headers += [(":authority", "127.0.0.1"), header]
    client.send_headers(1, headers, end_stream=True)
    refused: int | None = None
    answered = False
    with trio.fail_after(TIMEOUT):
        async with await trio.open_tcp_stream("127.0.0.1", server.port) as stream:
            await stream.send_all(client.data_to_send())
            while refused is None and not answered:
                data = await stream.receive_some(65_536)
                if not data:
                    break
                for event in client.receive_data(data):
                    if isinstance(event, h2.events.ConnectionTerminated | h2.events.StreamReset):
                        refused = event.error_code
                    elif isinstance(event, h2.events.ResponseReceived):
                        answered = True

    assert (answered, refused) == (False, h2.errors.ErrorCodes.PROTOCOL_ERROR)
    await server.assert_still_serving()

"""Bad input gets a precise protocol error, reaches no executor, and the next request works."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from a2a_trio import A2AApp, ServerSettings

from .agents import ScriptedExecutor
from .conftest import LiveServer, live_server, make_card, user_message

EXECUTOR = ScriptedExecutor()


def mount(app: A2AApp) -> None:
    app.mount("", card=make_card(), executor=EXECUTOR)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    EXECUTOR.executions = 0
    async with live_server(
        tmp_path, mount, settings=ServerSettings(max_body_bytes=64 * 1024)
    ) as live:
        yield live


async def post_jsonrpc(server: LiveServer, content: bytes | str, **headers: str) -> dict[str, Any]:
    response = await server.client.post(
        "/jsonrpc",
        content=content,
        headers={"Content-Type": "application/json", **headers},
    )
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    return body


async def assert_still_serving(server: LiveServer) -> None:
    body = await server.jsonrpc("SendMessage", {"message": user_message("echo still here")})
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_malformed_json_is_a_parse_error(server: LiveServer) -> None:
    body = await post_jsonrpc(server, b'{"jsonrpc": "2.0", "method": ')
    assert body["error"]["code"] == -32700
    assert body["id"] is None
    assert EXECUTOR.executions == 0
    await assert_still_serving(server)


async def test_a_wrong_envelope_is_an_invalid_request(server: LiveServer) -> None:
    body = await post_jsonrpc(server, '{"jsonrpc": "1.0", "id": 7, "method": "GetTask"}')
    assert body["error"]["code"] == -32600
    assert body["id"] == 7
    await assert_still_serving(server)


async def test_a_batch_is_an_invalid_request(server: LiveServer) -> None:
    body = await post_jsonrpc(server, '[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]')
    assert body["error"]["code"] == -32600
    await assert_still_serving(server)


async def test_an_unknown_method_is_method_not_found(server: LiveServer) -> None:
    # Neither version has it: 0.3 has no ListTasks, 1.0 spells it ListTasks.
    body = await server.jsonrpc("tasks/list", {"message": user_message("echo")})
    assert body["error"]["code"] == -32601
    assert "tasks/list" in body["error"]["message"]
    assert EXECUTOR.executions == 0
    await assert_still_serving(server)


async def test_invalid_params_name_the_field(server: LiveServer) -> None:
    message = user_message("echo")
    del message["messageId"]
    body = await server.jsonrpc("SendMessage", {"message": message})
    assert body["error"]["code"] == -32602
    assert "message.messageId" in body["error"]["message"]
    assert EXECUTOR.executions == 0
    await assert_still_serving(server)


async def test_a_part_with_two_contents_is_invalid_params(server: LiveServer) -> None:
    message = user_message("echo")
    message["parts"] = [{"text": "a", "url": "https://example.com/x"}]
    body = await server.jsonrpc("SendMessage", {"message": message})
    assert body["error"]["code"] == -32602
    assert "message.parts.0" in body["error"]["message"]
    await assert_still_serving(server)


async def test_a_non_json_content_type_is_content_type_not_supported(server: LiveServer) -> None:
    response = await server.client.post(
        "/jsonrpc", content="{'not': 'json'}", headers={"Content-Type": "text/plain"}
    )
    body = response.json()
    assert body["error"]["code"] == -32005
    assert body["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    await assert_still_serving(server)


async def test_a_non_json_content_type_on_rest_is_415(server: LiveServer) -> None:
    response = await server.rest(
        "POST",
        "/message:send",
        content='{"message": {}}',
        headers={"Content-Type": "text/plain"},
    )
    assert response.status_code == 415
    assert response.json()["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    await assert_still_serving(server)


async def test_an_unknown_task_is_task_not_found_on_both_bindings(server: LiveServer) -> None:
    body = await server.jsonrpc("GetTask", {"id": "no-such-task"})
    assert body["error"]["code"] == -32001
    assert body["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
    response = await server.rest("GET", "/tasks/no-such-task")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == 404
    await assert_still_serving(server)


async def test_a_body_over_the_limit_is_refused(server: LiveServer) -> None:
    message = user_message("echo " + "x" * (70 * 1024))
    response = await server.client.post(
        "/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
    )
    body = response.json()
    assert body["error"]["code"] == -32600
    assert body["error"]["data"][0]["reason"] == "PAYLOAD_TOO_LARGE"
    # Refused unread, the rest of the body is still coming: the connection
    # closes, and says so, or the client's next request on it finds it gone.
    assert response.headers["connection"] == "close"
    response = await server.rest("POST", "/message:send", json={"message": message})
    assert response.status_code == 413
    assert response.headers["connection"] == "close"
    response = await server.client.post("/metrics", content=b"x" * (70 * 1024))
    assert response.status_code == 413
    assert response.headers["connection"] == "close"
    assert EXECUTOR.executions == 0
    await assert_still_serving(server)


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("POST", "/jsonrpc", {"Content-Type": "text/plain"}, 200),
        ("GET", "/jsonrpc", {"Content-Type": "application/json"}, 405),
        ("POST", "/rest/message:send", {"A2A-Version": "9.9"}, 400),
    ],
    ids=["media-type", "method", "version"],
)
async def test_a_body_refused_before_any_of_it_is_read_closes_the_connection(
    server: LiveServer, method: str, path: str, headers: dict[str, str], status: int
) -> None:
    # Refused on its headers alone, the body is still on its way: the server
    # closes the connection after the answer, which must say so, or a client
    # that sends its next request on it (pipelined, or reused at that instant)
    # loses it.
    body = b'{"x": "' + b"x" * (48 * 1024) + b'"}'
    response = await server.client.request(method, path, content=body, headers=headers)
    assert response.status_code == status, response.text
    assert response.headers.get("connection") == "close", response.headers
    await assert_still_serving(server)


async def test_a_body_read_to_its_end_keeps_the_connection(server: LiveServer) -> None:
    response = await server.client.post(
        "/jsonrpc", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.json()["error"]["code"] == -32700
    assert "connection" not in response.headers
    response = await server.client.post("/metrics", content=b"x" * 1024)
    assert response.status_code == 405
    assert "connection" not in response.headers


async def test_an_unsupported_version_is_refused_on_both_bindings(server: LiveServer) -> None:
    message = {"message": user_message("echo")}
    body = await server.jsonrpc("SendMessage", message, headers={"A2A-Version": "99.0"})
    assert body["error"]["code"] == -32009
    response = await server.rest(
        "POST", "/message:send", json=message, headers={"A2A-Version": "99.0"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert EXECUTOR.executions == 0
    await assert_still_serving(server)


async def test_a_missing_version_means_0_3_which_is_not_served(server: LiveServer) -> None:
    response = await server.client.post(
        "/jsonrpc",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
        headers={"A2A-Version": ""},
    )
    assert response.json()["error"]["code"] == -32009
    await assert_still_serving(server)


async def test_a_patch_version_is_served_as_its_minor(server: LiveServer) -> None:
    body = await server.jsonrpc(
        "SendMessage", {"message": user_message("echo")}, headers={"A2A-Version": "1.0.7"}
    )
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_version_may_be_a_query_parameter(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.url) as bare:
        assert (await bare.get("/rest/tasks", params={"A2A-Version": "1.0"})).status_code == 200
        assert (await bare.get("/rest/tasks")).status_code == 400


async def test_unknown_fields_are_ignored(server: LiveServer) -> None:
    message = user_message("echo tolerant", futureField={"nested": True})
    body = await server.jsonrpc("SendMessage", {"message": message, "tckExtraParam": 42})
    task = body["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "futureField" not in task["history"][0]


async def test_a_wrong_http_method_on_rest_is_405_with_allow(server: LiveServer) -> None:
    response = await server.rest("GET", "/message:send")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == 405


async def test_an_unknown_rest_path_is_a_json_404(server: LiveServer) -> None:
    response = await server.rest("GET", "/nothing/here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == 404


async def test_a_get_on_the_jsonrpc_endpoint_is_a_json_405(server: LiveServer) -> None:
    response = await server.client.get("/jsonrpc")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == -32601


async def test_an_agent_role_on_a_client_message_is_invalid_params(server: LiveServer) -> None:
    body = await server.jsonrpc("SendMessage", {"message": user_message("echo", role="ROLE_AGENT")})
    assert body["error"]["code"] == -32602
    assert EXECUTOR.executions == 0


async def test_an_invalid_page_token_is_invalid_params(server: LiveServer) -> None:
    response = await server.rest("GET", "/tasks", params={"pageToken": "not-a-token"})
    assert response.status_code == 400
    body = await server.jsonrpc("ListTasks", {"pageToken": "%%%"})
    assert body["error"]["code"] == -32602


async def test_a_page_size_out_of_range_is_invalid_params(server: LiveServer) -> None:
    body = await server.jsonrpc("ListTasks", {"pageSize": 101})
    assert body["error"]["code"] == -32602
    assert "pageSize" in body["error"]["message"]


#: Each integer field of a request, sent as a JSON boolean (Python's bool is an int).
BOOLEAN_INTEGERS = [
    ("SendMessage", {"configuration": {"historyLength": True}}, "configuration.historyLength"),
    ("GetTask", {"id": "x", "historyLength": True}, "historyLength"),
    ("ListTasks", {"historyLength": True}, "historyLength"),
    ("ListTasks", {"pageSize": True}, "pageSize"),
    ("ListTasks", {"pageSize": False}, "pageSize"),
    ("ListTaskPushNotificationConfigs", {"taskId": "x", "pageSize": True}, "pageSize"),
]


@pytest.mark.parametrize(("method", "params", "field"), BOOLEAN_INTEGERS)
async def test_a_boolean_for_an_integer_is_invalid_params_on_jsonrpc(
    server: LiveServer, method: str, params: dict[str, Any], field: str
) -> None:
    if method == "SendMessage":
        params = {"message": user_message("echo"), **params}
    body = await server.jsonrpc(method, params)
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith(f"{field}: expected an integer, got ")
    assert EXECUTOR.executions == 0


async def test_a_boolean_history_length_in_a_rest_body_is_a_400(server: LiveServer) -> None:
    configuration = {"historyLength": True}
    response = await server.rest(
        "POST",
        "/message:send",
        json={"message": user_message("echo"), "configuration": configuration},
    )
    assert response.status_code == 400
    assert "configuration.historyLength: expected an integer" in response.text
    assert EXECUTOR.executions == 0


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/tasks/x", {"historyLength": "true"}),
        ("/tasks", {"historyLength": "true"}),
        ("/tasks", {"pageSize": "true"}),
        ("/tasks/x/pushNotificationConfigs", {"pageSize": "true"}),
    ],
)
async def test_true_in_the_query_string_for_an_integer_is_a_400(
    server: LiveServer, path: str, query: dict[str, str]
) -> None:
    response = await server.rest("GET", path, params=query)
    assert response.status_code == 400
    assert f"{next(iter(query))}: " in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        (
            "SendMessage",
            {"configuration": {"returnImmediately": 1}},
            "configuration.returnImmediately",
        ),
        (
            "SendMessage",
            {"configuration": {"returnImmediately": "yes"}},
            "configuration.returnImmediately",
        ),
        ("ListTasks", {"includeArtifacts": 0}, "includeArtifacts"),
    ],
)
async def test_a_number_or_a_word_for_a_boolean_is_invalid_params(
    server: LiveServer, method: str, params: dict[str, Any], field: str
) -> None:
    if method == "SendMessage":
        params = {"message": user_message("echo"), **params}
    body = await server.jsonrpc(method, params)
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith(f"{field}: expected true or false")
    assert "expected true or false" in body["error"]["message"]
    assert EXECUTOR.executions == 0


async def test_a_boolean_in_the_query_string_is_true_or_false(server: LiveServer) -> None:
    refused = await server.rest("GET", "/tasks", params={"includeArtifacts": "1"})
    assert refused.status_code == 400
    assert "includeArtifacts: expected true or false" in refused.json()["error"]["message"]
    for word in ("true", "false"):
        response = await server.rest("GET", "/tasks", params={"includeArtifacts": word})
        assert response.status_code == 200


@pytest.mark.parametrize(
    "value", ["yesterday", "+5", "5_0", "5 5", "0x10", "5.0", "9223372036854775808", "9" * 40]
)
async def test_a_malformed_last_event_id_is_invalid_params(server: LiveServer, value: str) -> None:
    # int() alone reads "+5" and "5_0"; past 2**63 no event id column holds it.
    body = await server.jsonrpc("SubscribeToTask", {"id": "x"}, headers={"Last-Event-ID": value})
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith("Last-Event-ID: ")


#: Texts Python's int() reads but no ProtoJSON parser takes, and numbers past int32.
NOT_INT32 = [" 5", "5 ", "+5", "5_0", "\u0665", "0x10", "1e3", "", "2147483648", "9" * 30]


@pytest.mark.parametrize("value", NOT_INT32)
async def test_an_integer_field_takes_only_an_int32_in_the_query_string(
    server: LiveServer, value: str
) -> None:
    response = await server.rest("GET", "/tasks", params={"historyLength": value})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith("historyLength: ")


async def test_an_integer_text_past_pythons_digit_limit_is_out_of_range(
    server: LiveServer,
) -> None:
    # int() refuses texts past 4,300 digits, with a message naming its own setting.
    body = await server.jsonrpc("ListTasks", {"historyLength": "9" * 5000})
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith("historyLength: out of range for an int32: ")


@pytest.mark.parametrize("value", [*NOT_INT32, 2**31, -(2**31) - 1, 1e20])
async def test_an_integer_field_takes_only_an_int32_on_jsonrpc(
    server: LiveServer, value: str | int | float
) -> None:
    body = await server.jsonrpc("ListTasks", {"pageSize": 5, "historyLength": value})
    assert body["error"]["code"] == -32602
    assert body["error"]["message"].startswith("historyLength: ")


@pytest.mark.parametrize(("value", "read"), [("7", 7), ("7.0", 7), (7.0, 7)])
async def test_an_integer_field_takes_what_protojson_writes(
    server: LiveServer, value: str | float, read: int
) -> None:
    body = await server.jsonrpc("ListTasks", {"pageSize": value})
    assert body["result"]["pageSize"] == read


async def test_a_body_that_trickles_in_past_the_timeout_is_a_408(tmp_path: Path) -> None:
    settings = ServerSettings(body_timeout=0.5)
    async with live_server(tmp_path, mount, settings=settings) as server:
        host, port = server.url.removeprefix("http://").split(":")
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            await stream.send_all(
                b"POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'A2A-Version: 1.0\r\nContent-Length: 100\r\n\r\n{"jsonrpc":'
            )
            started = trio.current_time()
            answer = b""
            with trio.fail_after(5):
                while b"\r\n\r\n" not in answer:
                    answer += await stream.receive_some(4096)
        assert answer.startswith(b"HTTP/1.1 408")
        assert 0.4 < trio.current_time() - started < 3
        await assert_still_serving(server)


@pytest.mark.parametrize("host", ["agents.example.com:99999", "agents.example.com:abc", "[::1"])
async def test_a_host_no_url_can_hold_still_gets_the_card(server: LiveServer, host: str) -> None:
    # The card's interfaces echo the Host the client used; the gRPC one
    # parses its port, which raised on these (a 500 and a traceback each).
    response = await server.client.get("/.well-known/agent-card.json", headers={"Host": host})

    assert response.status_code == 200
    grpc = [i for i in response.json()["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    assert [interface["url"] for interface in grpc] == [host]
    await assert_still_serving(server)


async def test_a_method_no_version_has_is_not_found_even_without_a_version(
    server: LiveServer,
) -> None:
    # Without A2A-Version a call is 0.3's; a method neither 0.3 nor 1.0 has
    # is still not found (-32601), not refused for its version (-32009).
    for method in ("nonsense", "tasks/list"):
        response = await server.client.post(
            "/jsonrpc",
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {}},
            headers={"A2A-Version": ""},
        )
        assert response.json()["error"]["code"] == -32601, method
    await assert_still_serving(server)


async def test_a_body_sent_a_byte_at_a_time_is_refused_after_a_bounded_number_of_pieces(
    server: LiveServer,
) -> None:
    # Each piece of a body costs the server ~15 µs however small: one byte
    # at a time, a 10 MiB body cost minutes of CPU. The same body in one
    # piece is served.
    call = b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}'
    body = call + b" " * (3_000 - len(call))
    host, port = server.url.removeprefix("http://").split(":")

    async def send(pieces: list[bytes]) -> bytes:
        head = (
            b"POST /jsonrpc HTTP/1.1\r\nHost: x\r\nA2A-Version: 1.0\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
        async with await trio.open_tcp_stream(host, int(port)) as stream:
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.send_all(head + chunked + b"0\r\n\r\n")
            answer = b""
            with trio.fail_after(10):
                while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                    received = await stream.receive_some()
                    if not received:
                        break
                    answer += received
        return answer

    whole = await send([body])
    assert b"-32001" in whole  # served: the task is not found
    dripped = await send([body[n : n + 1] for n in range(len(body))])
    assert b"-32600" in dripped and b"pieces" in dripped, dripped[-300:]
    await assert_still_serving(server)

"""Error mapping: every JSON-RPC code to its typed exception; transport failures."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from apcore_a2a.client import (
    A2AAuthenticationError,
    A2AClient,
    A2AClientError,
    A2AConnectionError,
    A2ARemoteError,
    A2AServerError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from tests._support import free_port, running_server
from tests.client._apcore_agent import build_our_app
from tests.client._sdk_agent import build_sdk_app
from tests.client._stub_agent import CARD_V10, StubAgent, json_reply, rpc_error

STUB = "http://stub.local"

CODES: list[tuple[int, type[A2ARemoteError]]] = [
    (-32001, TaskNotFoundError),
    (-32002, TaskNotCancelableError),
    (-32003, PushNotificationNotSupportedError),
    (-32004, UnsupportedOperationError),
    (-32005, ContentTypeNotSupportedError),
    (-32006, InvalidAgentResponseError),
    (-32007, ExtendedAgentCardNotConfiguredError),
    (-32008, ExtensionSupportRequiredError),
    (-32009, VersionNotSupportedError),
    (-32700, JSONParseError),
    (-32600, InvalidRequestError),
    (-32601, MethodNotFoundError),
    (-32602, InvalidParamsError),
    (-32603, A2AServerError),
    (-32000, A2AServerError),
    (7, A2AServerError),
]


@pytest.mark.parametrize(("code", "cls"), CODES, ids=[str(c) for c, _ in CODES])
async def test_every_code_maps_to_its_exception(code: int, cls: type[A2ARemoteError]) -> None:
    data = [{"reason": "WHY", "n": code}]
    stub = StubAgent(rpc=lambda _b: rpc_error(code, f"message {code}", data))
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(A2AClientError) as err:
            await client.get_task("t-1")
    assert type(err.value) is cls
    assert isinstance(err.value, A2ARemoteError)
    assert err.value.code == code
    assert err.value.message == f"message {code}"
    assert err.value.data == data


@pytest.mark.parametrize(
    "error",
    ["oops", {"code": "x", "message": "bad code"}, {"code": True}, {"message": ""}],
    ids=["string", "code-not-int", "code-bool", "no-code"],
)
async def test_malformed_error_members_become_server_errors(error: Any) -> None:
    stub = StubAgent(rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "error": error}))
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(A2AServerError) as err:
            await client.get_task("t-1")
    assert err.value.code == -32603


@pytest.mark.parametrize(
    ("reply", "cls", "status"),
    [
        ((500, {"content-type": "text/plain"}, [b"upstream broke"]), A2AConnectionError, 500),
        ((502, {}, []), A2AConnectionError, 502),
        ((401, {"content-type": "text/plain"}, [b"no token"]), A2AAuthenticationError, 401),
        ((403, {}, []), A2AAuthenticationError, 403),
    ],
    ids=["500", "502", "401", "403"],
)
async def test_non_2xx_is_a_connection_error(
    reply: Any, cls: type[A2AConnectionError], status: int
) -> None:
    stub = StubAgent(rpc=lambda _b: reply)
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(cls) as err:
            await client.send_message("hi")
    assert err.value.status_code == status
    assert isinstance(err.value, A2AConnectionError)
    assert str(status) in err.value.message


@pytest.mark.parametrize(
    "reply",
    [
        (200, {"content-type": "application/json"}, [b"{not json"]),
        json_reply([1, 2]),
        json_reply({"id": 1}),
        json_reply({"jsonrpc": "2.0", "id": 1, "result": {"no": "id"}}),
        json_reply({"jsonrpc": "2.0", "id": 1, "result": {"task": {"id": 5}}}),
    ],
    ids=["invalid-json", "array", "no-result", "task-without-id", "task-id-not-str"],
)
async def test_unusable_replies_are_invalid_agent_responses(reply: Any) -> None:
    stub = StubAgent(rpc=lambda _b: reply)
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(InvalidAgentResponseError):
            await client.get_task("t-1")


async def test_what_an_agent_says_keeps_its_spaces_on_one_line() -> None:
    """Its lines are joined (each stripped), the spaces inside one kept: a refusal quoting
    ``'a  b'`` does not say ``'a b'`` (as the server's own messages: ``message_line``)."""
    refusal = {"error": {"message": "no value  'a  b'\n   on line  2 "}}
    # a2a-sdk's 0.3 transport refuses it in pydantic's words: several lines, quoting it
    task = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "no  such"}}
    stub = StubAgent(rpc=lambda _b: json_reply(refusal, 500), card_paths=())
    async with running_server(stub) as url, A2AClient(url, protocol="0.3") as client:
        with pytest.raises(A2AConnectionError) as refused:
            await client.get_task("t-1")
        stub.rpc = lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": task})
        with pytest.raises(InvalidAgentResponseError) as invalid:
            await client.get_task("t-1")
    assert refused.value.message == f"HTTP 500 from {url}: no value  'a  b' on line  2"
    said = invalid.value.message
    assert "\n" not in said and "Task status.state Input" in said
    assert "input_value='no  such'" in said, said


async def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with A2AClient(url, protocol="1.0") as client:
        with pytest.raises(A2AConnectionError) as err:
            await client.get_task("t-1")
    assert err.value.status_code is None


class _SlowApp:
    """Answers the card at once and every POST only once the test releases it."""

    def __init__(self) -> None:
        # No card: the pinned protocol then posts to the agent's own URL.
        self.stub = StubAgent(rpc=lambda _b: rpc_error(-32001), card_paths=())
        self.release = asyncio.Event()
        self.posts = 0
        self.replied = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.posts += 1
            await self.release.wait()
            self.replied += 1
        await self.stub(scope, receive, send)


async def _expect_timeout(client: A2AClient, app: _SlowApp) -> None:
    try:
        async with client:
            with pytest.raises(A2AConnectionError, match="timed out"):
                await client.get_task("t-1")
        # The client's 0.3 s timeout fired while the server still held the request (order,
        # not a stopwatch): a reply never came.
        assert (app.posts, app.replied) == (1, 0)
    finally:
        app.release.set()


@pytest.mark.parametrize("direct", [False, True], ids=["socket", "direct"])
async def test_timeout_is_a_connection_error(direct: bool) -> None:
    app = _SlowApp()
    if direct:
        await _expect_timeout(A2AClient(STUB, app=app, timeout=0.3, protocol="1.0"), app)
    else:
        async with running_server(app) as url:
            await _expect_timeout(A2AClient(url, timeout=0.3, protocol="1.0"), app)


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
@pytest.mark.parametrize("kind", ["sdk", "ours"])
async def test_push_not_supported(kind: str, protocol: str) -> None:
    url = "http://nopush.local"
    if kind == "sdk":
        app, message, skill = build_sdk_app(url, push=False), "hello", None
    else:
        app, message, skill = build_our_app(push_notifications=False), "hello", "demo.echo"
    async with A2AClient(url, app=app, protocol=protocol) as client:  # type: ignore[arg-type]
        task = await client.send_message(message, skill_id=skill)
        with pytest.raises(PushNotificationNotSupportedError) as err:
            await client.set_push_config(task["id"], "http://127.0.0.1:9/hook")
        with pytest.raises(PushNotificationNotSupportedError):
            await client.list_push_configs(task["id"])
    assert err.value.code == -32003


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_sdk_agent_failures_map_to_typed_errors(protocol: str) -> None:
    url = "http://sdk.local"
    app = build_sdk_app(url, validate_input_modes=True)
    async with A2AClient(url, app=app, protocol=protocol) as client:  # type: ignore[arg-type]
        with pytest.raises(A2AServerError) as internal:
            await client.send_message("boom")
        with pytest.raises(InvalidAgentResponseError) as invalid:
            await client.send_message("bad-agent")
        with pytest.raises(InvalidParamsError) as params:
            await client.send_message("reject-params")
        image = {"type": "file", "raw": b"\x89PNG", "mediaType": "image/png"}
        with pytest.raises(ContentTypeNotSupportedError) as content:
            await client.send_message([image])
    assert (internal.value.code, internal.value.message) == (-32603, "kaboom")
    assert invalid.value.code == -32006
    assert params.value.code == -32602 and "rejected" in params.value.message
    assert content.value.code == -32005


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_our_server_failures(protocol: str) -> None:
    url = "http://ours.local"
    async with A2AClient(url, app=build_our_app(), protocol=protocol) as client:  # type: ignore[arg-type]
        with pytest.raises(MethodNotFoundError) as unknown:
            await client.send_message("hi", skill_id="no.such.skill")
        with pytest.raises(InvalidParamsError) as bad_input:
            await client.send_message({"a": "x"}, skill_id="demo.add")
        failed = await client.send_message({"reason": "kaboom"}, skill_id="demo.fail")
    assert unknown.value.code == -32601
    assert bad_input.value.code == -32602 and bad_input.value.data
    # A failing module is a failed task, not a protocol error.
    assert failed["status"]["state"] == "failed"
    assert failed["status"]["message"]["role"] == "agent"
    assert failed["status"]["message"]["parts"][0]["type"] == "text"


# -- A2A 1.0.1 answers and 1.0.0-era ones: the same typed errors ---------------------------

REST_CARD = {
    **CARD_V10,
    "supportedInterfaces": [
        {"url": "http://rest.local", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    ],
}
A2A_JSON = {"content-type": "application/a2a+json"}


def _status(code: int, status: str, message: str, reason: str | None) -> bytes:
    info = (
        [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "a2a-protocol.org",
                "metadata": {},
            }
        ]
        if reason
        else []
    )
    error = {"code": code, "status": status, "message": message}
    return json.dumps({"error": error | ({"details": info} if info else {})}).encode()


#: (what the call meets, the 1.0.1 answer, the 1.0.0-era answer, the error raised either way)
ANSWERS = [
    (
        "cancel-finished",
        (
            400,
            A2A_JSON,
            [_status(400, "FAILED_PRECONDITION", "not cancelable", "TASK_NOT_CANCELABLE")],
        ),
        (409, {}, [_status(409, "FAILED_PRECONDITION", "not cancelable", "TASK_NOT_CANCELABLE")]),
        TaskNotCancelableError,
    ),
    (
        "content-type",
        (
            400,
            A2A_JSON,
            [_status(400, "INVALID_ARGUMENT", "send JSON", "CONTENT_TYPE_NOT_SUPPORTED")],
        ),
        (415, {}, [_status(415, "INVALID_ARGUMENT", "send JSON", None)]),
        ContentTypeNotSupportedError,
    ),
    (
        "invalid-agent-response",
        (500, A2A_JSON, [_status(500, "INTERNAL", "bad events", "INVALID_AGENT_RESPONSE")]),
        (502, {}, [_status(502, "INTERNAL", "bad events", "INVALID_AGENT_RESPONSE")]),
        InvalidAgentResponseError,
    ),
    (
        "push-not-supported",
        (
            400,
            A2A_JSON,
            [_status(400, "FAILED_PRECONDITION", "no push", "PUSH_NOTIFICATION_NOT_SUPPORTED")],
        ),
        (
            400,
            {},
            [_status(400, "FAILED_PRECONDITION", "no push", "PUSH_NOTIFICATION_NOT_SUPPORTED")],
        ),
        PushNotificationNotSupportedError,
    ),
]


class _RestStub:
    """A REST agent: the card, then *reply* for every other request."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.stub = StubAgent(card=REST_CARD)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/.well-known/"):
            status, headers, chunks = self.reply
            start = {"type": "http.response.start", "status": status}
            raw = {"content-type": "application/json", **headers}
            await send(start | {"headers": [(k.encode(), v.encode()) for k, v in raw.items()]})
            await send({"type": "http.response.body", "body": b"".join(chunks)})
            return
        await self.stub(scope, receive, send)


@pytest.mark.parametrize("era", ["1.0.1", "1.0.0"])
@pytest.mark.parametrize(
    ("new", "old", "cls"), [a[1:] for a in ANSWERS], ids=[a[0] for a in ANSWERS]
)
async def test_rest_errors_of_either_era_are_the_same_typed_error(
    era: str, new: Any, old: Any, cls: type[A2ARemoteError]
) -> None:
    async with A2AClient("http://rest.local", app=_RestStub(new if era == "1.0.1" else old)) as c:
        with pytest.raises(A2AClientError) as err:
            await c.cancel_task("t-1")
    assert type(err.value) is cls
    assert err.value.code == cls.default_code and err.value.message


@pytest.mark.parametrize("status", [200, 415], ids=["1.0.1", "1.0.0"])
async def test_json_rpc_content_type_refusal_of_either_era(status: int) -> None:
    # 1.0.1: the JSON-RPC error object; apcore-a2a before it: the same object with HTTP 415.
    reply = json_reply(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32005, "message": "send JSON"}}, status
    )
    async with A2AClient(STUB, app=StubAgent(rpc=lambda _b: reply)) as client:
        with pytest.raises(ContentTypeNotSupportedError) as err:
            await client.get_task("t-1")
    assert (err.value.code, err.value.message) == (-32005, "send JSON")


async def test_rest_answers_in_a2a_json_are_read() -> None:
    task = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}
    reply = (200, A2A_JSON, [json.dumps(task).encode()])
    async with A2AClient("http://rest.local", app=_RestStub(reply)) as client:
        got = await client.get_task("t-1")
    assert (got["id"], got["status"]["state"]) == ("t-1", "completed")


async def test_a_real_sdk_agent_over_rest_answers_1_0_1() -> None:
    url = "http://sdk.local"
    app = build_sdk_app(url, versions=("1.0",), binding="HTTP+JSON")
    async with A2AClient(url, app=app) as client:
        task = await client.send_message("hello")
        with pytest.raises(TaskNotCancelableError) as err:
            await client.cancel_task(task["id"])
        with pytest.raises(TaskNotFoundError):
            await client.get_task("no-such-task")
    assert err.value.code == -32002


@pytest.mark.parametrize(
    "body",
    [
        {
            "error": {
                "code": 401,
                "status": "UNAUTHENTICATED",
                "message": "Missing or invalid API key",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "UNAUTHENTICATED",
                        "domain": "a2a-protocol.org",
                    }
                ],
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32093, "message": "Missing or invalid API key"},
        },
        {"detail": "Missing or invalid API key"},
    ],
    ids=["rest-status", "json-rpc", "problem"],
)
async def test_a_refusal_says_what_the_agent_said_in_one_line(body: Any) -> None:
    reply = json_reply(body, 401)
    async with A2AClient(STUB, app=StubAgent(rpc=lambda _b: reply)) as client:
        with pytest.raises(A2AAuthenticationError) as err:
            await client.get_task("t-1")
    assert err.value.message == "HTTP 401 from http://stub.local/rpc: Missing or invalid API key"

"""Error mapping: every JSON-RPC code to its typed exception; transport failures."""

from __future__ import annotations

import asyncio
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
from tests.client._stub_agent import StubAgent, json_reply, rpc_error

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

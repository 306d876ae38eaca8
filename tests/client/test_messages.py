"""What the client puts on the wire for each accepted message form, and what it refuses."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from apcore_a2a.client import A2AClient
from tests.client._stub_agent import StubAgent, json_reply

STUB = "http://stub.local"
V10_TASK = {"task": {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_COMPLETED"}}}
V03_TASK = {"kind": "task", "id": "t-1", "contextId": "c-1", "status": {"state": "completed"}}


def _stub(protocol: str) -> StubAgent:
    result = V10_TASK if protocol == "1.0" else V03_TASK
    return StubAgent(rpc=lambda _b: json_reply({"jsonrpc": "2.0", "id": 1, "result": result}))


async def _sent(message: Any, protocol: str = "1.0", **kwargs: Any) -> dict[str, Any]:
    stub = _stub(protocol)
    async with A2AClient(STUB, app=stub, protocol=protocol) as client:  # type: ignore[arg-type]
        task = await client.send_message(message, **kwargs)
    assert task["id"] == "t-1" and task["status"]["state"] == "completed"
    params = stub.seen[-1].params
    assert isinstance(params, dict)
    return params


PNG = b"\x89PNG\r\n"
PNG_B64 = base64.b64encode(PNG).decode()

# (input, expected 1.0 parts, expected 0.3 parts)
FORMS: list[tuple[str, Any, list[dict[str, Any]], list[dict[str, Any]]]] = [
    ("str", "hi", [{"text": "hi"}], [{"kind": "text", "text": "hi"}]),
    (
        "dict-is-data",
        {"a": 1},
        [{"data": {"a": 1}}],
        [{"kind": "data", "data": {"a": 1}}],
    ),
    (
        "bytes",
        PNG,
        [{"raw": PNG_B64, "mediaType": "application/octet-stream"}],
        [{"kind": "file", "file": {"bytes": PNG_B64, "mimeType": "application/octet-stream"}}],
    ),
    (
        "seed-shape",
        {"role": "user", "parts": [{"type": "text", "text": "t"}, {"type": "data", "data": [1]}]},
        [{"text": "t"}, {"data": [1]}],
        [
            {"kind": "text", "text": "t"},
            {"kind": "data", "data": {"value": [1]}, "metadata": {"data_part_compat": True}},
        ],
    ),
    (
        "v03-shape",
        {
            "kind": "message",
            "role": "user",
            "messageId": "m-9",
            "parts": [
                {
                    "kind": "file",
                    "file": {"uri": "https://x/y.png", "mimeType": "image/png", "name": "y.png"},
                }
            ],
        },
        [{"url": "https://x/y.png", "mediaType": "image/png", "filename": "y.png"}],
        [
            {
                "kind": "file",
                "file": {"uri": "https://x/y.png", "mimeType": "image/png", "name": "y.png"},
            }
        ],
    ),
    (
        "v10-shape",
        {
            "role": "ROLE_USER",
            "parts": [
                {
                    "raw": PNG_B64,
                    "mediaType": "image/png",
                    "filename": "p.png",
                    "metadata": {"k": 1},
                }
            ],
        },
        [{"raw": PNG_B64, "mediaType": "image/png", "filename": "p.png", "metadata": {"k": 1}}],
        [
            {
                "kind": "file",
                "file": {"bytes": PNG_B64, "mimeType": "image/png", "name": "p.png"},
                "metadata": {"k": 1},
            }
        ],
    ),
    (
        "list-of-parts",
        [{"text": "a"}, {"type": "file", "raw": PNG}],
        [{"text": "a"}, {"raw": PNG_B64}],
        [{"kind": "text", "text": "a"}, {"kind": "file", "file": {"bytes": PNG_B64}}],
    ),
]


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
@pytest.mark.parametrize(("form", "given", "v10", "v03"), FORMS, ids=[f[0] for f in FORMS])
async def test_message_forms(protocol: str, form: str, given: Any, v10: Any, v03: Any) -> None:
    params = await _sent(given, protocol)
    message = params["message"]
    assert message["parts"] == (v10 if protocol == "1.0" else v03)
    assert message["role"] == ("ROLE_USER" if protocol == "1.0" else "user")
    assert isinstance(message["messageId"], str) and message["messageId"]
    if form == "v03-shape":
        assert message["messageId"] == "m-9"


@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_ids_skill_metadata_and_blocking(protocol: str) -> None:
    params = await _sent(
        {"parts": [{"text": "x"}], "contextId": "old", "metadata": {"m": 1}},
        protocol,
        context_id="ctx-1",
        task_id="t-1",  # the task the stub answers with
        skill_id="demo.echo",
        metadata={"req": True},
        return_immediately=True,
    )
    message = params["message"]
    assert message["contextId"] == "ctx-1" and message["taskId"] == "t-1"
    assert message["metadata"] == {"m": 1, "skillId": "demo.echo"}
    assert params["metadata"] == {"req": True}
    if protocol == "1.0":
        assert params["configuration"] == {"returnImmediately": True}
        assert "kind" not in message
    else:
        assert params["configuration"] == {"blocking": False}
        assert message["kind"] == "message"


async def test_blocking_is_the_default() -> None:
    assert not (await _sent("x", "1.0")).get("configuration", {}).get("returnImmediately")
    assert (await _sent("x", "0.3"))["configuration"] == {"blocking": True}


async def test_push_config_forms_on_the_wire() -> None:
    stub = StubAgent(
        rpc=lambda b: json_reply(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": b["params"] if b["method"].startswith("Create") else {},
            }
        )
    )
    config = {
        "url": "https://hook",
        "id": "p",
        "token": "t",
        "authentication": {"schemes": ["Bearer"]},
    }
    async with A2AClient(STUB, app=stub) as client:
        created = await client.set_push_config("t-1", config)
        await client.set_push_config("t-1", "https://plain")
    assert stub.seen[1].params == {
        "taskId": "t-1",
        "url": "https://hook",
        "id": "p",
        "token": "t",
        "authentication": {"scheme": "Bearer"},
    }
    assert stub.seen[2].params == {"taskId": "t-1", "url": "https://plain"}
    assert created["authentication"] == {"scheme": "Bearer", "credentials": None}
    assert "status" not in created and "statusReason" not in created


BAD_MESSAGES: list[tuple[str, Any]] = [
    ("none", None),
    ("int", 42),
    ("parts-not-list", {"parts": "text"}),
    ("part-not-mapping", {"parts": ["text"]}),
    ("part-without-content", [{"metadata": {}}]),
    ("part-two-contents", [{"text": "a", "data": {}}]),
    ("text-not-str", [{"type": "text", "text": 5}]),
    ("data-missing", [{"type": "data"}]),
    ("unknown-type", [{"type": "video", "url": "x"}]),
    ("file-without-source", [{"type": "file", "name": "a"}]),
    ("file-both-sources", [{"type": "file", "raw": b"x", "url": "https://x"}]),
    ("file-bad-base64", [{"type": "file", "raw": "not base64!"}]),
    ("file-url-not-str", [{"url": 5}]),
    ("bad-role", {"role": "system", "parts": [{"text": "x"}]}),
    ("metadata-not-mapping", {"parts": [{"text": "x"}], "metadata": [1]}),
    ("part-metadata-not-mapping", [{"text": "x", "metadata": "m"}]),
    # JSON has no NaN or Infinity: protobuf would hold them and fail writing the request.
    ("data-nan", {"a": float("nan")}),
    ("data-infinity-deep", [{"data": {"x": [1, {"y": float("inf")}]}}]),
    ("metadata-infinity", {"parts": [{"text": "x"}], "metadata": {"n": float("-inf")}}),
]


@pytest.mark.parametrize(("case", "message"), BAD_MESSAGES, ids=[c for c, _ in BAD_MESSAGES])
async def test_bad_messages_are_refused_before_any_request(case: str, message: Any) -> None:
    # Something that is no message at all is a TypeError; a message with bad content a
    # ValueError.
    expected = TypeError if case in ("none", "int") else ValueError
    stub = _stub("1.0")
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(expected) as sent:
            await client.send_message(message)
        with pytest.raises(expected) as streamed:
            client.stream_message(message)
    assert type(sent.value) is type(streamed.value) is expected
    assert stub.seen == []


async def test_request_metadata_without_a_json_number_is_refused() -> None:
    stub = _stub("1.0")
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(ValueError, match="request metadata holds nan"):
            await client.send_message("x", metadata={"n": [float("nan")]})
    assert stub.seen == []


@pytest.mark.parametrize(
    "options",
    [
        {"auth": "tök-secret"},
        {"headers": {"X-API-Key": "é-secret"}},
        {"headers": {"X": "a\r\nB: 1"}},
        {"auth": "secret "},
        {"headers": {"X-API-Key": "\tsecret"}},
        {"headers": {"X-API-Key": "se\x7fcret"}},
    ],
    ids=[
        "token-not-ascii",
        "header-not-ascii",
        "header-with-line-break",
        "token-with-a-space-at-the-end",
        "header-with-a-tab-at-the-start",
        "header-with-a-control-character",
    ],
)
def test_credentials_that_are_no_header_value_are_refused_without_showing_them(
    options: dict[str, Any],
) -> None:
    """At construction, as a ValueError naming the header (not at the first request, as an
    encoding error or as a connection error), and the value is not in the message."""
    with pytest.raises(ValueError, match="ASCII text without line breaks") as refused:
        A2AClient(STUB, **options)
    assert "secret" not in str(refused.value) and "B: 1" not in str(refused.value)


def test_a_timeout_that_is_not_a_number_of_seconds_is_refused() -> None:
    for timeout in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            A2AClient(STUB, timeout=timeout)


@pytest.mark.parametrize(
    ("config", "exc"),
    [
        ({}, ValueError),
        ({"url": ""}, ValueError),
        ({"url": "https://h", "authentication": "Bearer"}, ValueError),
        ({"url": "https://h", "authentication": {"credentials": "c"}}, ValueError),
        (42, TypeError),
    ],
)
async def test_bad_push_configs_are_refused(config: Any, exc: type[Exception]) -> None:
    stub = _stub("1.0")
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(exc):
            await client.set_push_config("t-1", config)
    assert stub.seen == []


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.get_task(""),
        lambda c: c.get_task("t", history_length=-1),
        lambda c: c.cancel_task(None),
        lambda c: c.list_tasks(limit=0),
        lambda c: c.list_tasks(limit=True),
        lambda c: c.get_push_config("t", ""),
        lambda c: c.delete_push_config("", "p"),
    ],
    ids=[
        "get-empty",
        "history-negative",
        "cancel-none",
        "limit-0",
        "limit-bool",
        "push-get",
        "push-del",
    ],
)
async def test_bad_arguments_are_refused(call: Any) -> None:
    stub = _stub("1.0")
    async with A2AClient(STUB, app=stub) as client:
        with pytest.raises(ValueError):
            await call(client)
    assert [s for s in stub.seen if s.method == "POST"] == []

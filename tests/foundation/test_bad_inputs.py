"""Every bad input gets its documented code, and the server keeps serving."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests._support import TLS

SEND = "SendMessage"


def post(url: str, body: Any, *, content_type: str = "application/json") -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": content_type, "A2A-Version": "1.0"}
    return httpx.post(url + "/", content=raw, headers=headers, timeout=20, verify=TLS)


def send_params(parts: list[dict[str, Any]], skill: str | None = "math.add") -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": "m", "role": "ROLE_USER", "parts": parts}
    if skill:
        message["metadata"] = {"skillId": skill}
    return {"message": message}


def rpc_error(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    payload = response.json()
    assert "result" not in payload
    return payload["error"]


def assert_clean(text: str) -> None:
    assert "Traceback" not in text
    assert "/work/" not in text and ".py" not in text


CASES: list[tuple[str, Any, int]] = [
    ("empty parts", {"jsonrpc": "2.0", "id": 1, "method": SEND, "params": send_params([])}, -32602),
    (
        "part does not fit schema",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": SEND,
            "params": send_params([{"data": {"a": "two", "b": 1}}]),
        },
        -32602,
    ),
    (
        "missing required field",
        {"jsonrpc": "2.0", "id": 1, "method": SEND, "params": send_params([{"data": {"a": 1}}])},
        -32602,
    ),
    (
        "invalid JSON text",
        {"jsonrpc": "2.0", "id": 1, "method": SEND, "params": send_params([{"text": "{nope"}])},
        -32602,
    ),
    (
        # Python's decoder raised RecursionError on it: -32603 (REST 500) and a logged traceback.
        "JSON text nested deeper than Python decodes",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": SEND,
            "params": send_params([{"text": '{"a": ' + "[" * 5000 + "]" * 5000 + "}"}]),
        },
        -32602,
    ),
    (
        "plain text where no string field exists",
        {"jsonrpc": "2.0", "id": 1, "method": SEND, "params": send_params([{"text": "add them"}])},
        -32602,
    ),
    (
        "data part that is not an object",
        {"jsonrpc": "2.0", "id": 1, "method": SEND, "params": send_params([{"data": [1, 2]}])},
        -32602,
    ),
    (
        "conflicting data parts",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": SEND,
            "params": send_params([{"data": {"a": 1, "b": 2}}, {"data": {"a": 5}}]),
        },
        -32602,
    ),
    (
        "file part to a skill without binary input",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": SEND,
            "params": send_params([{"raw": "aGVsbG8=", "mediaType": "text/plain"}]),
        },
        -32005,  # ContentTypeNotSupportedError (A2A §3.3.2)
    ),
    (
        "unknown skill",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": SEND,
            "params": send_params([{"text": "x"}], skill="no.such"),
        },
        -32601,
    ),
    (
        "missing skill on a multi-skill agent",
        {"jsonrpc": "2.0", "id": 1, "method": SEND, "params": send_params([{"text": "x"}], None)},
        -32602,
    ),
    ("malformed JSON", b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700),
    ("missing method", {"jsonrpc": "2.0", "id": 1, "params": {}}, -32600),
    ("missing id", {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}}, -32600),
    ("missing jsonrpc", {"id": 1, "method": "GetTask", "params": {"id": "x"}}, -32600),
    ("batch", [{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}], -32600),
    (
        "unknown method",
        {"jsonrpc": "2.0", "id": 1, "method": "tasks/explode", "params": {}},
        -32601,
    ),
    (
        "0.3 body on a 1.0 method",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": SEND,
            "params": {
                "message": {
                    "kind": "message",
                    "messageId": "m",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "hi"}],
                },
                "metadata": {"skillId": "text.shout"},
            },
        },
        -32602,
    ),
    (
        "unknown task",
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}},
        -32001,
    ),
    (
        "cancel unknown task",
        {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "nope"}},
        -32001,
    ),
    (
        "wrong param type",
        {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": {"deep": 1}}},
        -32602,
    ),
]


@pytest.mark.parametrize(("name", "body", "code"), CASES, ids=[c[0] for c in CASES])
def test_bad_request_gets_documented_code(agent_url: str, name: str, body: Any, code: int) -> None:
    error = rpc_error(post(agent_url, body))
    assert error["code"] == code, error
    assert_clean(json.dumps(error))


def test_missing_skill_lists_available_skills(agent_url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": SEND, "params": send_params([{"text": "x"}], None)}
    error = rpc_error(post(agent_url, body))
    assert error["message"] == (
        "Missing required parameter: metadata.skillId (the message fits several skills: "
        "errors.raise, text.shout, text.stats)"
    )
    # ErrorInfo.metadata is map<string, string>: a list goes as its JSON text.
    metadata = error["data"][0]["metadata"]
    assert json.loads(metadata["matchingSkills"]) == ["errors.raise", "text.shout", "text.stats"]
    assert json.loads(metadata["availableSkills"]) == sorted(
        ["math.add", "text.stats", "errors.raise", "text.shout", "data.pair"]
    )


def test_schema_error_has_field_errors(agent_url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": SEND,
        "params": send_params([{"data": {"a": "two", "b": 1}}]),
    }
    error = rpc_error(post(agent_url, body))
    info, bad_request = error["data"]
    assert info["metadata"]["type"] == "SchemaValidationError"
    assert json.loads(info["metadata"]["errors"]) == [
        {"field": "/a", "message": "Input should be a valid integer"}
    ]
    assert bad_request["fieldViolations"][0]["field"] == "/a"


def test_oversized_body_is_413(agent_url: str) -> None:
    big = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": SEND,
        "params": send_params([{"text": "x" * (11 * 1024 * 1024)}], "text.shout"),
    }
    response = post(agent_url, big)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600


def test_oversized_chunked_body_is_413(agent_url: str) -> None:
    def chunks():  # no Content-Length: the limit is enforced while reading
        for _ in range(12):
            yield b"x" * (1024 * 1024)

    response = httpx.post(
        agent_url + "/",
        content=chunks(),
        headers={"content-type": "application/json"},
        timeout=20,
        verify=TLS,
    )
    assert response.status_code == 413


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_wrong_content_type_is_content_type_not_supported(
    agent_url: str, content_type: str
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    response = post(agent_url, body, content_type=content_type)
    assert rpc_error(response)["code"] == -32005  # A2A 1.0.1: an error object, not HTTP 415
    rest = httpx.post(
        agent_url + "/message:send",
        content=b"{}",
        headers={"content-type": content_type, "A2A-Version": "1.0"},
        timeout=10,
        verify=TLS,
    )
    assert rest.status_code == 400
    assert rest.json()["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"


def test_rest_errors(agent_url: str) -> None:
    missing = httpx.get(
        agent_url + "/tasks/not-a-task", headers={"A2A-Version": "1.0"}, timeout=10, verify=TLS
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["status"] == "NOT_FOUND"
    bad = httpx.post(
        agent_url + "/message:send",
        content=b"{oops",
        headers={"content-type": "application/json", "A2A-Version": "1.0"},
        timeout=10,
        verify=TLS,
    )
    assert bad.status_code == 400
    assert_clean(bad.text)


def test_server_keeps_serving_after_bad_inputs(agent_url: str) -> None:
    for _, body, _ in CASES:
        post(agent_url, body)
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": SEND,
        "params": send_params([{"data": {"a": 40, "b": 2}}]),
    }
    response = post(agent_url, body)
    assert response.json()["result"]["task"]["artifacts"][0]["parts"] == [{"data": {"sum": 42}}]

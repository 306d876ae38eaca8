"""File bytes on REST 0.3 and gRPC 0.3, on the raw wire (issue 19, item 1).

The spec's single base64 (REST proto JSON) and raw bytes (gRPC) reach the module exactly
and come back that way; the Python SDK's double encoding is accepted only from a caller
that identifies as a Python stack and only when the once-decoded field is canonical base64.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as grpc03
from a2a.compat.v0_3 import conversions, proto_utils
from a2a.compat.v0_3 import types as a2a_v03_types

from apcore_a2a.upstream.file_bytes import (
    is_python_client,
    looks_base64,
    proto_request_to_sdk,
    rest_request_to_sdk,
    rest_response_to_wire,
)
from tests._support import TLS
from tests.interop._runs import Target

BINARY = bytes(range(256)) + b"\x00tail"
B64TEXT = b"aGVsbG8gaW50ZXJvcAo="  # a file whose content is itself base64 text
SPEC_CLIENT = {"User-Agent": "spec-client/1.0", "A2A-Version": "0.3"}
PY_CLIENT = {"User-Agent": "python-httpx/0.28.1", "A2A-Version": "0.3"}


def _facts(data: bytes) -> dict[str, Any]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _rest_body(wire_value: str) -> dict[str, Any]:
    return {
        "request": {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "content": [
                {"file": {"fileWithBytes": wire_value, "mimeType": "application/octet-stream"}}
            ],
            "metadata": {"skillId": "interop.files"},
        }
    }


def _rest_send(agent: Target, wire_value: str, headers: dict[str, str]) -> dict[str, Any]:
    response = httpx.post(
        agent.url + "/v1/message:send",
        json=_rest_body(wire_value),
        headers=headers,
        timeout=30,
        verify=TLS,
    )
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def _module_saw(task: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = task["artifacts"][0]["parts"][0]["data"]["data"]
    return {"size": int(data["size"]), "sha256": data["sha256"]}


def _history_bytes(task: dict[str, Any]) -> str:
    value: str = task["history"][0]["content"][0]["file"]["fileWithBytes"]
    return value


@pytest.mark.parametrize("payload", [BINARY, B64TEXT, b"x"], ids=["binary", "b64text", "one"])
def test_rest03_spec_encoding_reaches_the_module_exactly(
    interop_agent: Target, payload: bytes
) -> None:
    task = _rest_send(interop_agent, base64.b64encode(payload).decode(), SPEC_CLIENT)
    assert _module_saw(task) == _facts(payload)
    # the answer carries the file in the spec's encoding too
    assert base64.b64decode(_history_bytes(task)) == payload
    fetched = httpx.get(
        f"{interop_agent.url}/v1/tasks/{task['id']}", headers=SPEC_CLIENT, timeout=10, verify=TLS
    ).json()
    assert base64.b64decode(_history_bytes(fetched)) == payload


@pytest.mark.parametrize("payload", [BINARY, B64TEXT], ids=["binary", "b64text"])
def test_rest03_python_sdk_double_encoding_is_still_read(
    interop_agent: Target, payload: bytes
) -> None:
    double = base64.b64encode(base64.b64encode(payload)).decode()
    task = _rest_send(interop_agent, double, PY_CLIENT)
    assert _module_saw(task) == _facts(payload)
    # a Python SDK client gets back the encoding it decodes
    assert base64.b64decode(base64.b64decode(_history_bytes(task))) == payload


def test_rest03_python_caller_with_spec_binary_is_read_as_spec(interop_agent: Target) -> None:
    """Binary content is never base64 text, so even a Python caller's single encoding is clear."""
    task = _rest_send(interop_agent, base64.b64encode(BINARY).decode(), PY_CLIENT)
    assert _module_saw(task) == _facts(BINARY)


def test_rest03_stream_answers_in_the_spec_encoding(interop_agent: Target) -> None:
    with httpx.stream(
        "POST",
        interop_agent.url + "/v1/message:stream",
        json=_rest_body(base64.b64encode(BINARY).decode()),
        headers=SPEC_CLIENT,
        timeout=30,
        verify=TLS,
    ) as response:
        assert response.status_code == 200
        first = next(line for line in response.iter_lines() if line.startswith("data:"))
    event = json.loads(first.removeprefix("data:"))
    assert base64.b64decode(_history_bytes(event["task"])) == BINARY


def _grpc_send(agent: Target, raw: bytes, user_agent: str | None) -> Any:
    options = [("grpc.primary_user_agent", user_agent)] if user_agent else []
    with grpc.insecure_channel(agent.grpc, options=options) as channel:
        stub = grpc03.A2AServiceStub(channel)
        request = pb03.SendMessageRequest(
            request=pb03.Message(
                message_id=uuid.uuid4().hex,
                role=pb03.ROLE_USER,
                content=[pb03.Part(file=pb03.FilePart(file_with_bytes=raw, mime_type="x/y"))],
            )
        )
        request.request.metadata.update({"skillId": "interop.files"})
        return stub.SendMessage(request, timeout=30).task


@pytest.mark.parametrize("payload", [BINARY, B64TEXT], ids=["binary", "b64text"])
def test_grpc03_raw_bytes_reach_the_module_exactly(interop_agent: Target, payload: bytes) -> None:
    task = _grpc_send(interop_agent, payload, "spec-client/1.0")
    data = task.artifacts[0].parts[0].data.data
    assert {"size": int(data["size"]), "sha256": data["sha256"]} == _facts(payload)
    assert task.history[0].content[0].file.file_with_bytes == payload


def test_grpc03_python_sdk_double_encoding_is_still_read(interop_agent: Target) -> None:
    # grpcio's own user agent (no primary_user_agent) is what the Python SDK sends
    task = _grpc_send(interop_agent, base64.b64encode(BINARY), None)
    data = task.artifacts[0].parts[0].data.data
    assert {"size": int(data["size"]), "sha256": data["sha256"]} == _facts(BINARY)
    assert task.history[0].content[0].file.file_with_bytes == base64.b64encode(BINARY)


# -- the pure rules -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"aGVsbG8=", True),
        (b"aGk=", True),
        (b"", False),
        (b"aGVsbG8", False),  # unpadded
        (b"aGVsbG8=\n", False),
        (b"a-_b", False),  # urlsafe alphabet
        (b"aGl=", False),  # non-canonical padding bits
        (BINARY, False),
        (b"hello world!", False),
    ],
)
def test_looks_base64(payload: bytes, expected: bool) -> None:
    assert looks_base64(payload) is expected


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ("python-httpx/0.28.1", True),
        ("grpc-python-asyncio/1.76.0 grpc-c/51.0.0 (linux; chttp2)", True),
        ("grpc-python/1.60.0 grpc-c/37.0.0", True),
        ("node", False),
        ("grpc-node-js/1.14.7", False),
        ("curl/8.0 python-httpx/0.28", False),
        (None, False),
        ("", False),
    ],
)
def test_is_python_client(agent: str | None, expected: bool) -> None:
    assert is_python_client(agent) is expected


def test_user_data_named_like_the_field_is_never_touched() -> None:
    body = {
        "request": {
            "content": [{"data": {"data": {"fileWithBytes": "aGk="}}}],
            "metadata": {"fileWithBytes": "aGk="},
        }
    }
    before = repr(body)
    assert rest_request_to_sdk(body, python_client=False) is False
    assert rest_response_to_wire(body, python_client=False) is False
    assert repr(body) == before


def test_url_safe_or_unpadded_base64_is_read_as_proto_json_reads_it() -> None:
    body = {"request": {"content": [{"file": {"fileWithBytes": "-_8"}}]}}  # b"\xfb\xff"
    assert rest_request_to_sdk(body, python_client=False) is True
    sent = body["request"]["content"][0]["file"]["fileWithBytes"]
    assert base64.b64decode(base64.b64decode(sent)) == b"\xfb\xff"


@pytest.mark.parametrize("content", ["!!!notb64", "%%%", "a"])
def test_rest03_file_bytes_that_are_not_base64_are_invalid_params(
    interop_agent: Target, content: str
) -> None:
    """main: HTTP 500 (the SDK's conversion decodes them outside its error handling)."""
    for path in ("/v1/message:send", "/v1/message:stream"):
        answer = httpx.post(interop_agent.url + path, json=_rest_body(content),
                            headers=SPEC_CLIENT, timeout=30, verify=TLS)  # fmt: skip
        assert answer.status_code == 400, (path, answer.text)
        assert "fileWithBytes is not base64" in answer.json()["error"]["message"]


def test_proto_walk_reaches_parts_in_history_and_artifacts() -> None:
    task = pb03.Task(
        history=[pb03.Message(content=[pb03.Part(file=pb03.FilePart(file_with_bytes=b"\x00"))])],
        artifacts=[pb03.Artifact(parts=[pb03.Part(file=pb03.FilePart(file_with_bytes=b"\x01"))])],
    )
    response = pb03.SendMessageResponse(task=task)
    proto_request_to_sdk(response, python_client=False)
    assert response.task.history[0].content[0].file.file_with_bytes == base64.b64encode(b"\x00")
    assert response.task.artifacts[0].parts[0].file.file_with_bytes == base64.b64encode(b"\x01")


def test_sdk_still_decodes_03_proto_file_bytes_twice() -> None:
    """Watches the SDK: when a2a-sdk fixes its 0.3 conversion, this fails.

    Then ``apcore_a2a.upstream.file_bytes`` must go (it would corrupt files the other way).
    """
    part = pb03.Part(file=pb03.FilePart(file_with_bytes=b"hello interop\n"))
    core = conversions.to_core_part(proto_utils.FromProto.part(part))
    assert core.raw != b"hello interop\n"
    assert core.raw == base64.b64decode(b"hello interop\n")


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
@pytest.mark.parametrize("content", ["!!!notb64", "abc", "YQ"])
def test_rpc03_file_bytes_that_are_not_base64_are_invalid_params(
    interop_agent: Target, method: str, content: str
) -> None:
    """The SDK's 0.3 conversion decodes ``file.bytes`` with ``base64.b64decode`` and meets
    ``binascii.Error`` (main: ``-32603`` Internal error, for both methods)."""
    message = {"kind": "message", "messageId": uuid.uuid4().hex, "role": "user",
               "parts": [{"kind": "file", "file": {"bytes": content, "mimeType": "x/y"}}],
               "metadata": {"skillId": "interop.files"}}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"message": message}}
    answer = httpx.post(
        interop_agent.url + "/", json=call, headers=SPEC_CLIENT, timeout=30, verify=TLS
    )
    assert answer.json()["error"]["code"] == -32602, answer.text
    assert "message.parts[0].file.bytes is not base64" in answer.json()["error"]["message"]
    message["parts"][0]["file"]["bytes"] = base64.b64encode(b"ok").decode()  # type: ignore[index]
    served = httpx.post(
        interop_agent.url + "/", json=call, headers=SPEC_CLIENT, timeout=30, verify=TLS
    )
    assert served.status_code == 200 and "error" not in served.text.split("\n")[0], served.text


def test_sdk_still_fails_on_rpc03_bytes_that_are_not_base64() -> None:
    """Watches the SDK: the day its 0.3 conversion answers such bytes with an A2A error,
    ``undecodable_rpc03`` can go."""
    part = a2a_v03_types.Part(root=a2a_v03_types.FilePart(
        file=a2a_v03_types.FileWithBytes(bytes="!!!notb64")))  # fmt: skip
    with pytest.raises(binascii.Error):
        conversions.to_core_part(part)

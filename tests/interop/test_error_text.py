"""SDK-generated error answers stay short, sanitized and typed (issue 19, item 4).

The agent promises every error it sends is at most 500 characters, carries no library
internals (validation dumps, documentation links, echoed input), and that a caller's
mistake is a 4xx / -326xx, never a server error. These are the a2a-sdk paths that break
that promise when they are passed through unchanged:

* ``a2a.compat.v0_3.jsonrpc_adapter`` (JSON-RPC 0.3): a request pydantic rejects
  (``"id": null``, a 1.0-shaped part or role sent to a 0.3 method) answers ``-32600`` with
  ``str(ValidationError)`` in ``data``: several hundred characters, the caller's input
  echoed, and ``errors.pydantic.dev`` links;
* ``a2a.compat.v0_3.proto_utils.FromProto.part`` (REST 0.3 and gRPC 0.3): a part with no
  content raises ``ValueError``, answered as HTTP 500 / gRPC INTERNAL.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as grpc03

from tests._support import TLS
from tests.interop._runs import Target

LIMIT = 500
ECHO = "zz-caller-input-" + "q" * 40


def _assert_clean(text: str) -> None:
    assert len(text) <= LIMIT, f"{len(text)} characters: {text[:200]}..."
    lowered = text.lower()
    for leak in ("pydantic", "https://", "validation error", "input_value", ECHO.lower()):
        assert leak not in lowered, f"{leak!r} in {text!r}"


def _rpc03(agent: Target, payload: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(agent.url + "/", json=payload, timeout=10, verify=TLS)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def _message03(parts: list[Any], role: str = "user") -> dict[str, Any]:
    return {
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "role": role,
        "parts": parts,
        "metadata": {"skillId": "interop.echo"},
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"jsonrpc": "2.0", "id": None, "method": "message/send",
         "params": {"message": _message03([{"kind": "text", "text": ECHO}])}},
        {"jsonrpc": "2.0", "id": 1, "method": "message/send",
         "params": {"message": _message03([{"raw": ECHO}], role="ROLE_USER")}},
        {"jsonrpc": "2.0", "id": 2, "method": "message/stream",
         "params": {"message": _message03([{"text": ECHO}], role=ECHO)}},
    ],
    ids=["id-null", "1.0-part-to-0.3", "stream-1.0-role"],
)  # fmt: skip
def test_json_rpc_03_validation_errors_are_short_and_clean(
    interop_agent: Target, payload: dict[str, Any]
) -> None:
    body = _rpc03(interop_agent, payload)
    error = body["error"]
    assert error["code"] in (-32600, -32602)
    _assert_clean(json.dumps(error))


def test_rest_03_part_without_content_is_a_client_error(interop_agent: Target) -> None:
    body = {"request": {"messageId": "m", "role": "ROLE_USER", "content": [{"metadata": {}}]}}
    response = httpx.post(interop_agent.url + "/v1/message:send", json=body, timeout=10, verify=TLS)
    assert response.status_code == 400, response.text
    _assert_clean(response.text)


def test_grpc_03_part_without_content_is_a_client_error(interop_agent: Target) -> None:
    with grpc.insecure_channel(interop_agent.grpc) as channel:
        request = pb03.SendMessageRequest(
            request=pb03.Message(message_id="m", role=pb03.ROLE_USER, content=[pb03.Part()])
        )
        with pytest.raises(grpc.RpcError) as caught:
            grpc03.A2AServiceStub(channel).SendMessage(request, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    _assert_clean(caught.value.details() or "")

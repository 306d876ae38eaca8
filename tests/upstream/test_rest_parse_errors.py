"""The SDK behaviour ``apcore_a2a/upstream/rest_parse_errors.py`` answers: a plain a2a-sdk
agent answers a REST request whose JSON protobuf cannot read (``"messageId": 5``) with
reason ``INVALID_REQUEST``, and the same params over JSON-RPC ``-32602`` with reason
``INVALID_PARAMS``. A failure here means the SDK answers both alike: delete that file."""

from __future__ import annotations

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app

V1 = {"A2A-Version": "1.0"}


def test_sdk_answers_a_rest_value_protobuf_cannot_read_as_an_invalid_request() -> None:
    message = {"messageId": 5, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    with threaded_server(build_sdk_app("http://127.0.0.1")) as url:
        rest = httpx.post(
            url + "/message:send", json={"message": message}, headers=V1, verify=TLS
        ).json()
        jsonrpc = httpx.post(url + "/", json=rpc, headers=V1, verify=TLS).json()
    assert [d["reason"] for d in rest["error"]["details"]] == ["INVALID_REQUEST"]
    assert rest["error"]["details"][0]["metadata"] == {}  # how the correction knows it
    assert jsonrpc["error"]["code"] == -32602
    assert jsonrpc["error"]["data"][0]["reason"] == "INVALID_PARAMS"

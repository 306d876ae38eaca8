"""The SDK behaviour ``apcore_a2a/upstream/v03_invalid_params.py`` answers: a plain a2a-sdk
agent answers a JSON-RPC 0.3 call whose envelope is valid but whose params are not (a
fractional ``historyLength``, a ``role`` 0.3 does not define) ``-32600 Invalid Request``,
where JSON-RPC 2.0 §5.1 (and the genuine a2a-sdk 0.3 server) answer ``-32602``. A failure
here means the SDK answers ``-32602`` itself: delete that file."""

from __future__ import annotations

import httpx

from tests._support import threaded_server
from tests.client._sdk_agent import build_sdk_app


def test_sdk_answers_bad_03_params_as_an_invalid_request() -> None:
    message = {"messageId": "m-1", "role": "robot", "kind": "message",
               "parts": [{"kind": "text", "text": "hi"}]}  # fmt: skip
    calls = {
        "tasks/get": {"id": "x", "historyLength": 1.5},
        "message/send": {"message": message},
    }
    codes = {}
    with threaded_server(build_sdk_app("http://127.0.0.1")) as url:
        for method, params in calls.items():
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            codes[method] = httpx.post(url + "/", json=body, timeout=10).json()["error"]["code"]
    assert codes == {"tasks/get": -32600, "message/send": -32600}

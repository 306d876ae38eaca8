"""The SDK behaviour ``apcore_a2a/upstream/wire_values.py`` answers for ``historyLength``:
a plain a2a-sdk agent answers a JSON-RPC 0.3 ``tasks/get`` whose ``historyLength`` is past
int32 with ``-32603 "Internal error"``, and a REST 0.3 ``GET /v1/tasks/{id}?historyLength=abc``
with HTTP 500 (the 1.0 routes answer invalid params), as it answers ``?historyLength=2.0``,
which JSON-RPC and its 1.0 routes read as 2 (it reads the query with ``int()``). A failure
here means the SDK refuses such values itself (or reads ``2.0``): delete that check."""

from __future__ import annotations

import httpx

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app

V03 = {"A2A-Version": "0.3"}


def test_sdk_fails_on_a_03_history_length_it_cannot_hold() -> None:
    params = {"id": "no-such-task", "historyLength": 2**31}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params}
    with threaded_server(build_sdk_app("http://127.0.0.1", binding="HTTP+JSON")) as url:
        rpc = httpx.post(url + "/", json=body, headers=V03, timeout=10, verify=TLS)
        rest = httpx.get(
            url + "/v1/tasks/no-such-task?historyLength=abc", headers=V03, timeout=10, verify=TLS
        )
        whole = httpx.get(
            url + "/v1/tasks/no-such-task?historyLength=2.0", headers=V03, timeout=10, verify=TLS
        )
    assert rpc.json()["error"]["code"] == -32603, rpc.text
    assert rest.status_code == 500, rest.text
    assert whole.status_code == 500, whole.text

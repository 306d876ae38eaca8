"""An object naming one key twice is a parse error on JSON-RPC, as REST refuses it.

RFC 8259 §4 leaves such an object to each parser. The REST binding's parser (protobuf's)
refuses it; the JSON-RPC body was read with Python's, which keeps the last value: the same
message was refused over REST and routed over JSON-RPC, to the skill its second
``skillId`` named. A gateway or log reading the first value would see another request
than the agent ran.
"""

from __future__ import annotations

import uuid

import httpx

from tests._support import TLS
from tests.foundation.conftest import serve_in_thread
from tests.foundation.modules import build_registry

V1 = {"A2A-Version": "1.0", "content-type": "application/json"}
V03 = {"A2A-Version": "0.3", "content-type": "application/json"}

#: a message naming text.stats first and math.add last (which the numbers fit)
_TWO_SKILLS = (
    '{"messageId": "%s", "role": "ROLE_USER", "parts": [{"data": {"a": 1, "b": 2}}], '
    '"metadata": {"skillId": "text.stats", "skillId": "math.add"}}'
)
_TWO_BS = (
    '{"messageId": "%s", "role": "ROLE_USER", "parts": [{"data": {"a": 1, "b": 2, "b": 40}}], '
    '"metadata": {"skillId": "math.add"}}'
)
_TWO_BS_03 = (
    '{"messageId": "%s", "kind": "message", "role": "user", '
    '"parts": [{"kind": "data", "data": {"a": 1, "b": 2, "b": 40}}], '
    '"metadata": {"skillId": "math.add"}}'
)
_TWO_METHODS = (
    '{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "method": "SendMessage", "params": {}}'
)
_TWO_IDS = '{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "GetTask", "params": {"id": "x"}}'


def _rpc(method: str, params: str) -> str:
    return f'{{"jsonrpc": "2.0", "id": 7, "method": "{method}", "params": {params}}}'


def _tasks(http: httpx.Client) -> list[object]:
    listed = http.get("/tasks", params={"pageSize": 100})
    assert listed.status_code == 200, listed.text
    tasks: list[object] = listed.json()["tasks"]
    return tasks


def test_a_duplicate_key_is_refused_on_every_binding_and_stores_nothing() -> None:
    with serve_in_thread(build_registry()) as url, httpx.Client(base_url=url, verify=TLS) as http:
        message = _TWO_SKILLS % uuid.uuid4().hex
        rest = http.post("/message:send", headers=V1, content=f'{{"message": {message}}}')
        assert rest.status_code == 400, rest.text
        bodies = [
            (V1, _rpc("SendMessage", f'{{"message": {message}}}'), "skillId"),
            (V1, _rpc("SendMessage", f'{{"message": {_TWO_BS % uuid.uuid4().hex}}}'), "b"),
            (V03, _rpc("message/send", f'{{"message": {_TWO_BS_03 % uuid.uuid4().hex}}}'), "b"),
            (V1, _TWO_METHODS, "method"),
            (V1, _TWO_IDS, "id"),
        ]
        for headers, body, key in bodies:
            answer = http.post("/", headers=headers, content=body)
            assert answer.status_code == 200, answer.text
            error = answer.json()["error"]
            assert error["code"] == -32700, answer.text
            assert error["message"] == f"Parse error: duplicate key {key!r}", answer.text
            assert answer.json()["id"] is None
        http.headers.update(V1)
        assert _tasks(http) == []
        # One name in two objects, or twice in a string, is no duplicate.
        data = '{"a": 1, "b": 2, "note": {"a": "\\"a\\": 3"}}'
        fine = (
            f'{{"messageId": "{uuid.uuid4().hex}", "role": "ROLE_USER", '
            f'"parts": [{{"data": {data}}}], "metadata": {{"skillId": "math.add"}}}}'
        )
        sent = http.post("/", content=_rpc("SendMessage", f'{{"message": {fine}}}'))
        assert sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", sent.text
        assert len(_tasks(http)) == 1

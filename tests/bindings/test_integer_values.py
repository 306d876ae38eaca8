"""An integer field (``pageSize``, ``historyLength``) gets one verdict for one value on every
binding and version (A2A 1.0.1 §5.1): ProtoJSON's, an integral number however JSON writes it
(``2``, ``2.0``, ``"2e0"``; a REST query value is that string), anything else invalid params
in our words (``upstream/wire_values.py``).

Before: ``?pageSize=2.0`` was refused where JSON-RPC's ``"pageSize": 2.0`` listed two tasks,
JSON-RPC read ``"2_0"`` as 20 and ``"٢"`` as 2 (Python's ``int()``) where REST refused them,
0.3's ``"2e0"`` was refused where ``"2.0"`` was read, and JSON-RPC answered ``"abc"`` or
``[]`` in Python's words (``invalid literal for int() with base 10``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc

from tests.bindings._agent import Agent

V1 = {"A2A-Version": "1.0"}
V03 = {"A2A-Version": "0.3"}
PYTHON_WORDS = ("int()", "literal", "parse", "Extra fields", "bytes-like", "Input should")
#: (JSON value, whether it is read as 2): the query carries its text
VALUES = [
    (2, True), (2.0, True), ("2", True), ("2.0", True), ("2e0", True), ("20e-1", True),
    (2.5, False), ("2.5", False), ("2_0", False), ("+2", False), ("٢", False), (" 2", False),
    ("abc", False), ("", False), (1e10, False), ("1e10", False), ([], False), ({}, False),
]  # fmt: skip


@pytest.fixture(scope="module")
def http(agent: Agent) -> Iterator[httpx.Client]:
    """A client of our agent, which holds three finished tasks."""
    with httpx.Client(base_url=agent.url, timeout=10) as client:
        for _ in range(3):
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                       "parts": [{"text": "hi"}], "metadata": {"skillId": "demo.echo"}}  # fmt: skip
            sent = client.post("/message:send", json={"message": message}, headers=V1)
            assert sent.status_code == 200, sent.text
        yield client


def _rpc(http: httpx.Client, method: str, params: Any, headers: dict[str, str] = V1) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return http.post("/", json=body, headers=headers).json()


def _verdict(answer: Any) -> bool:
    """Served (``True``), or refused as invalid params in our words (``False``)."""
    if isinstance(answer, httpx.Response):
        if answer.status_code == 200:
            return True
        assert answer.status_code == 400, answer.text
        text = answer.text
    else:
        if "result" in answer:
            return True
        assert answer["error"]["code"] == -32602, answer
        text = str(answer["error"])
    assert "must be an integer from -2147483648 to 2147483647" in text, text
    assert not any(word in text for word in PYTHON_WORDS), text
    return False


@pytest.mark.parametrize(("value", "read"), VALUES, ids=[repr(v) for v, _ in VALUES])
def test_one_integer_value_gets_one_verdict_on_every_binding(
    http: httpx.Client, value: Any, read: bool
) -> None:
    task = _rpc(http, "ListTasks", {"pageSize": 1})["result"]["tasks"][0]["id"]
    query = quote(value if isinstance(value, str) else str(value), safe="")
    listed = _rpc(http, "ListTasks", {"pageSize": value})
    answers = {
        "JSON-RPC ListTasks": listed,
        "REST ListTasks": http.get(f"/tasks?pageSize={query}", headers=V1),
        "JSON-RPC GetTask": _rpc(http, "GetTask", {"id": task, "historyLength": value}),
        "REST GetTask": http.get(f"/tasks/{task}?historyLength={query}", headers=V1),
        "JSON-RPC 0.3 tasks/get": _rpc(
            http, "tasks/get", {"id": task, "historyLength": value}, V03
        ),
        "REST 0.3 GetTask": http.get(f"/v1/tasks/{task}?historyLength={query}", headers=V03),
    }
    if isinstance(value, list | dict):  # no query spelling
        answers = {name: answer for name, answer in answers.items() if "REST" not in name}
    verdicts = {name: _verdict(answer) for name, answer in answers.items()}
    assert verdicts == dict.fromkeys(answers, read)
    if read:
        assert len(listed["result"]["tasks"]) == 2
        assert len(answers["REST ListTasks"].json()["tasks"]) == 2


def test_grpc_reads_the_same_integer(http: httpx.Client, agent: Agent) -> None:
    """gRPC carries an int32, so only the integral value: read as the others read it."""
    with grpc.insecure_channel(agent.grpc_address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        listed = stub.ListTasks(a2a_pb2.ListTasksRequest(page_size=2),
                                metadata=(("a2a-version", "1.0"),))  # fmt: skip
    assert len(listed.tasks) == 2


@pytest.mark.parametrize(("value", "read"), [("2e0", True), (2.0, True), ("2_0", False)])
def test_a_send_configurations_history_length_gets_the_same_verdict(
    http: httpx.Client, value: Any, read: bool
) -> None:
    """In a body too (REST's, JSON-RPC's params), 1.0 and 0.3: 0.3's models refused ``"2e0"``."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}],
               "metadata": {"skillId": "demo.echo"}}  # fmt: skip
    message03 = {**message, "content": message["parts"]}
    del message03["parts"]
    config = {"historyLength": value}
    answers = {
        "REST": http.post("/message:send", json={"message": message, "configuration": config},
                          headers=V1),
        "REST 0.3": http.post("/v1/message:send", headers=V03,
                              json={"message": message03, "configuration": config}),
        "JSON-RPC": _rpc(http, "SendMessage", {"message": message, "configuration": config}),
        "JSON-RPC 0.3": _rpc(http, "message/send", {"configuration": config,
                             "message": {**message, "kind": "message", "role": "user"}}, V03),
    }  # fmt: skip
    assert {name: _verdict(answer) for name, answer in answers.items()} == dict.fromkeys(
        answers, read
    )

"""An integer field of a request body (``historyLength`` in ``GetTask`` and in a message's
``configuration``, ``pageSize``) is a JSON number or a string holding one (ProtoJSON; an
exponent is allowed), on JSON-RPC and REST, 1.0 and 0.3: Python's own spellings of an
integer (``"2_0"``, ``"٢"``, ``"+2"``, ``"\\t2"``) are invalid params (-32602 / HTTP 400
``INVALID_PARAMS``), and the refused request creates and changes no task
(``upstream/wire_values.py``). gRPC carries an int32 in binary, one spelling: not affected.

Before: protobuf's parser (1.0's params, REST bodies of both versions) reads a string with
Python's ``int()``, ``"2_0"`` as 20 and ``"٢"`` as 2, and 0.3's JSON-RPC models read
``"2_0"``, ``"+2"`` and ``"\\t2"`` in pydantic's lax mode; all were served. And JSON-RPC
0.3 refused ``"2e0"``, which every other cell reads as 2.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests._support import TLS
from tests.bindings._agent import Agent

V1 = {"A2A-Version": "1.0"}
V03 = {"A2A-Version": "0.3"}
#: Python's spellings of 2, which JSON has not: refused
PYTHONIC = ["2_0", "\u0662", "+2", "\t2", "2\n", " 2", "0x2"]
#: JSON's spellings of 2 (a number, or a string holding one): served
JSONIC: list[Any] = ["2", 2, 2.0, "2e0", "2.0", "0.2e1"]
#: ``pageSize`` spelt as the ``historyLength`` key is
PAGE_SIZE = {"historyLength": "pageSize", "history_length": "page_size"}
#: the cells: (name, send the value in a request, and read the answer)
Cell = Callable[[httpx.Client, Any, str], tuple[bool, Any]]


def _message(version: str) -> dict[str, Any]:
    meta = {"skillId": "demo.echo"}
    mid = uuid.uuid4().hex
    if version == "rest-0.3":
        return {
            "messageId": mid,
            "role": "ROLE_USER",
            "content": [{"text": "hi"}],
            "metadata": meta,
        }
    if version == "rpc-0.3":
        parts = [{"kind": "text", "text": "hi"}]
        return {
            "kind": "message",
            "messageId": mid,
            "role": "user",
            "parts": parts,
            "metadata": meta,
        }
    return {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": "hi"}], "metadata": meta}


def _rpc(http: httpx.Client, method: str, params: Any, headers: dict[str, str]) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return http.post("/", json=body, headers=headers).json()


def _rpc_answer(answer: Any) -> tuple[bool, Any]:
    if "error" in answer:
        error = answer["error"]
        assert error["code"] == -32602, answer
        return False, error
    return True, answer["result"]


def _rest_answer(answer: httpx.Response) -> tuple[bool, Any]:
    if answer.status_code == 400:
        error = answer.json()["error"]
        reasons = [d.get("reason") for d in error.get("details", [])]
        assert (error["status"], reasons[0]) == ("INVALID_ARGUMENT", "INVALID_PARAMS"), error
        return False, error
    assert answer.status_code == 200, answer.text
    return True, answer.json()


def _history(result: Any) -> list[Any]:
    task = result.get("task", result)  # a 1.0 SendMessage result holds its task
    history: list[Any] = task.get("history", [])
    return history


CELLS: dict[str, Cell] = {
    "jsonrpc-1.0 SendMessage": lambda http, value, key: _rpc_answer(_rpc(
        http, "SendMessage",
        {"message": _message("1.0"), "configuration": {key: value}}, V1)),
    "jsonrpc-1.0 GetTask": lambda http, value, key: _rpc_answer(_rpc(
        http, "GetTask", {"id": _task(http), key: value}, V1)),
    "jsonrpc-1.0 ListTasks": lambda http, value, key: _rpc_answer(_rpc(
        http, "ListTasks", {PAGE_SIZE[key]: value}, V1)),
    "jsonrpc-0.3 message/send": lambda http, value, key: _rpc_answer(_rpc(
        http, "message/send",
        {"message": _message("rpc-0.3"), "configuration": {key: value}}, V03)),
    "jsonrpc-0.3 tasks/get": lambda http, value, key: _rpc_answer(_rpc(
        http, "tasks/get", {"id": _task(http), key: value}, V03)),
    "rest-1.0 message:send": lambda http, value, key: _rest_answer(http.post(
        "/message:send",
        json={"message": _message("1.0"), "configuration": {key: value}}, headers=V1)),
    "rest-0.3 message:send": lambda http, value, key: _rest_answer(http.post(
        "/v1/message:send",
        json={"message": _message("rest-0.3"), "configuration": {key: value}}, headers=V03)),
}  # fmt: skip


@pytest.fixture(scope="module")
def http(agent: Agent) -> Iterator[httpx.Client]:
    """A client of our agent, which holds three finished tasks."""
    with httpx.Client(base_url=agent.url, timeout=10, verify=TLS) as client:
        for _ in range(3):
            sent = client.post("/message:send", json={"message": _message("1.0")}, headers=V1)
            assert sent.status_code == 200, sent.text
        yield client


def _task(http: httpx.Client) -> str:
    task: str = _rpc(http, "ListTasks", {"pageSize": 1}, V1)["result"]["tasks"][0]["id"]
    return task


def _tasks(http: httpx.Client) -> list[Any]:
    listed: list[Any] = _rpc(http, "ListTasks", {"pageSize": 100}, V1)["result"]["tasks"]
    return listed


# The proto field names (protobuf's parser reads them as the JSON names), and 0.3's model
# field names (which its models read too).
@pytest.mark.parametrize("key", ["historyLength", "history_length"])
@pytest.mark.parametrize("value", PYTHONIC, ids=[repr(v) for v in PYTHONIC])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_pythons_spelling_of_an_integer_is_invalid_params_and_stores_nothing(
    http: httpx.Client, cell: str, value: str, key: str
) -> None:
    before = _tasks(http)
    served, error = CELLS[cell](http, value, key)
    assert not served, (cell, value, error)
    assert "must be a JSON number or a string holding one" in json.dumps(error), error
    if "Send" in cell or "send" in cell:
        assert _tasks(http) == before  # no task created, none changed


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_a_boolean_is_no_integer_on_any_cell(http: httpx.Client, cell: str) -> None:
    """Protobuf refuses ``true`` for an integer; 0.3's models read it as 1 (lax mode)."""
    before = _tasks(http)
    served, error = CELLS[cell](http, True, "historyLength")
    assert not served, (cell, error)
    assert _tasks(http) == before


@pytest.mark.parametrize("value", JSONIC, ids=[repr(v) for v in JSONIC])
@pytest.mark.parametrize("cell", sorted(CELLS))
def test_jsons_spelling_of_an_integer_is_served(http: httpx.Client, cell: str, value: Any) -> None:
    served, result = CELLS[cell](http, value, "historyLength")
    assert served, (cell, value, result)
    if "ListTasks" in cell:
        assert len(result["tasks"]) == 2  # a page of two
    else:
        assert len(_history(result)) <= 2, (cell, value)


@pytest.mark.parametrize("value", PYTHONIC[:4], ids=[repr(v) for v in PYTHONIC[:4]])
def test_a_stream_asked_with_pythons_integer_is_refused_before_it_starts(
    http: httpx.Client, value: str
) -> None:
    before = _tasks(http)
    config = {"historyLength": value}
    params = {"message": _message("1.0"), "configuration": config}
    served, _ = _rpc_answer(_rpc(http, "SendStreamingMessage", params, V1))
    assert not served
    params03 = {"message": _message("rpc-0.3"), "configuration": config}
    served, _ = _rpc_answer(_rpc(http, "message/stream", params03, V03))
    assert not served
    for path, message, headers in (
        ("/message:stream", _message("1.0"), V1),
        ("/v1/message:stream", _message("rest-0.3"), V03),
    ):
        with http.stream(
            "POST", path, json={"message": message, "configuration": config}, headers=headers
        ) as answer:
            answer.read()
            served, _ = _rest_answer(answer)
        assert not served, path
    assert _tasks(http) == before

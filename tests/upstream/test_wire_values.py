"""The SDK behaviours ``apcore_a2a/upstream/wire_values.py`` answers, on a plain a2a-sdk
agent: an unknown enum name is dropped (a ``ListTasks`` status filter lists every task, a
0.3 REST message of an unknown role is served, as the 0.3 gRPC conversion serves an unset
or undefined role: as the agent's), a REST query reads ``includeArtifacts=yes``
as false and a repeated ``pageSize`` as its last value (and ``pageSize=abc`` in Python's
words), JSON-RPC 1.0 ``"params": null``
is answered in Python's words (an array read as none), and so is a REST body holding a number of 5000 digits.
A body's integer given as a string is read with Python's ``int()`` (protobuf's parser:
``"2_0"`` is 20, ``"\u0661"`` and ``"+1"`` are 1; 0.3's models, in pydantic's lax mode, read
``"2_0"`` and refuse ``"2e0"``).
A failing test here means the SDK changed that behaviour: shrink or delete the file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.proto_utils import FromProto
from a2a.types import a2a_pb2
from google.protobuf.json_format import ParseDict

from tests._support import TLS, threaded_server
from tests.client._sdk_agent import build_sdk_app

V1 = {"A2A-Version": "1.0"}
V03 = {"A2A-Version": "0.3"}
JSON = {"content-type": "application/json"}


def _rpc(http: httpx.Client, method: str, params: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return http.post("/", json=body, headers=V1).json()


@pytest.fixture(scope="module")
def sdk() -> Iterator[httpx.Client]:
    """A plain SDK agent holding two finished tasks (each with an artifact)."""
    app = build_sdk_app("http://127.0.0.1", binding="HTTP+JSON")
    with threaded_server(app) as url, httpx.Client(base_url=url, timeout=10, verify=TLS) as http:
        for n in range(2):
            message = {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            sent = http.post("/message:send", json={"message": message}, headers=V1)
            assert sent.status_code == 200, sent.text
        yield http


def test_sdk_drops_an_unknown_status_name_and_lists_every_task(sdk: httpx.Client) -> None:
    assert _rpc(sdk, "ListTasks", {"status": "TASK_STATE_WORKING"})["result"]["tasks"] == []
    listed = _rpc(sdk, "ListTasks", {"status": "TASK_STATE_WORKNG"})["result"]
    assert len(listed["tasks"]) == 2
    assert len(sdk.get("/tasks?status=working", headers=V1).json()["tasks"]) == 2


def test_sdk_reads_query_values_a2a_does_not_define(sdk: httpx.Client) -> None:
    def tasks(query: str) -> list[Any]:
        listed: list[Any] = sdk.get("/tasks?" + query, headers=V1).json()["tasks"]
        return listed

    assert all(task.get("artifacts") for task in tasks("includeArtifacts=true"))
    assert not any(task.get("artifacts") for task in tasks("includeArtifacts=yes"))
    assert len(tasks("pageSize=1&pageSize=100")) == 2  # the last value
    assert len(tasks("pageSize=100&pageSize=1")) == 1


def test_sdk_answers_a_query_integer_that_is_none_in_pythons_words(sdk: httpx.Client) -> None:
    answer = sdk.get("/tasks?pageSize=abc", headers=V1)
    assert answer.status_code == 400
    assert "invalid literal for int() with base 10" in answer.json()["error"]["message"]


def test_sdk_answers_null_params_in_pythons_words(sdk: httpx.Client) -> None:
    error = _rpc(sdk, "GetTask", None)["error"]
    assert error["code"] == -32602
    assert "'NoneType' object is not iterable" in str(error["data"])
    # An array is read as no params: every task listed.
    assert len(_rpc(sdk, "ListTasks", [])["result"]["tasks"]) == 2


def test_sdk_answers_a_5000_digit_number_in_pythons_words(sdk: httpx.Client) -> None:
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}
    body = json.dumps({"message": message, "configuration": {"historyLength": 0}})
    body = body.replace('"historyLength": 0', '"historyLength": ' + "9" * 5000)
    answer = sdk.post("/message:send", content=body, headers={**V1, **JSON})
    assert answer.status_code == 400
    assert "sys.set_int_max_str_digits()" in answer.json()["error"]["message"]


def test_sdk_reads_every_03_role_but_user_as_the_agents() -> None:
    """The 0.3 gRPC servicer's conversion: an unset role, or one 0.3 does not define."""
    for role in (a2a_v0_3_pb2.ROLE_UNSPECIFIED, 7):
        assert FromProto.role(role) is types_v03.Role.agent  # type: ignore[arg-type]


def test_sdk_serves_a_03_rest_message_of_an_unknown_role(sdk: httpx.Client) -> None:
    message = {"messageId": "m-03", "role": "ROLE_ROBOT", "content": [{"text": "hi"}]}
    sent = sdk.post("/v1/message:send", json={"message": message}, headers=V03)
    # Not refused: the message reached the executor without a role, which this echo
    # executor fails on ("Message must be from a user"), as HTTP 500.
    assert sent.status_code == 500, sent.text


def test_protobuf_reads_an_integer_string_with_pythons_int() -> None:
    for text, read in (("2_0", 20), ("\u0662", 2), ("+2", 2), ("\t2", 2), ("2\n", 2)):
        parsed = ParseDict({"historyLength": text}, a2a_pb2.GetTaskRequest())
        assert parsed.history_length == read, text
    # An enum's numeral too (``required_fields.name_errors`` takes ASCII digits alone).
    listed = ParseDict({"status": "\u0663"}, a2a_pb2.ListTasksRequest())
    assert listed.status == a2a_pb2.TASK_STATE_COMPLETED


def test_sdk_serves_a_body_integer_spelt_as_python_spells_one(sdk: httpx.Client) -> None:
    held = len(_rpc(sdk, "ListTasks", {})["result"]["tasks"])
    assert 1 < held < 10
    for text in ("+1", "\u0661", "1_0"):  # a page of one task, or of ten (every task)
        listed = _rpc(sdk, "ListTasks", {"pageSize": text})["result"]["tasks"]
        assert len(listed) == (held if text == "1_0" else 1), text
    message = {"messageId": "m-int", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"message": message, "configuration": {"historyLength": "2_0"}}
    assert sdk.post("/message:send", json=body, headers=V1).status_code == 200
    # 0.3's models: "2_0" read, "2e0" (which protobuf reads as 2) refused.
    task = _rpc(sdk, "ListTasks", {})["result"]["tasks"][0]["id"]
    for text, served in (("2_0", True), ("+2", True), ("\t2", True), ("2e0", False)):
        params = {"id": task, "historyLength": text}
        rpc03 = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": params}
        answer = sdk.post("/", json=rpc03, headers=V03).json()
        assert ("result" in answer) is served, (text, answer)

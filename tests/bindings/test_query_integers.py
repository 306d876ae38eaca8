"""A REST query's integer (``pageSize``, ``historyLength``: A2A 1.0.1 §11.5, "numbers are
decimal strings") is read as the JSON number its text spells, the value JSON-RPC reads in
the same text: an integral one (``2``, ``2.0``, ``2e0``) is that integer on REST 1.0 and
0.3 as on JSON-RPC, and anything else (``2.5``, ``abc``, empty, past int32, Python's own
``2_0`` or ``+2``, given twice) is invalid params in the REST words of our query check,
the same answer on 0.3 as on 1.0 (``upstream/wire_values.py``).

Before: ``GET /tasks?pageSize=2.0`` was refused where JSON-RPC's ``"pageSize": 2.0``
listed two tasks (and a plain a2a-sdk agent's REST route lists them); a plain agent's REST
0.3 ``GetTask`` answers ``?historyLength=2.0`` with HTTP 500 (it reads the query with
``int()``, ``tests/upstream/test_v03_history_length.py``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc

from apcore_a2a import classify
from apcore_a2a.streams import scrub
from apcore_a2a.upstream import version_param, wire_values
from tests._support import TLS, threaded_server
from tests.bindings._agent import Agent
from tests.client._sdk_agent import build_sdk_app

V1 = {"A2A-Version": "1.0"}
V03 = {"A2A-Version": "0.3"}
JSON = {"content-type": "application/json"}
#: how JSON writes an integer n (each is also a JSON-RPC number)
INTEGRAL = ["{n}", "{n}.0", "{n}e0", "{n}E+0", "{n}.00e-0", "{n}.000"]
#: query texts that are no int32 (the first four are JSON numbers too)
NOT_INT32 = [
    "2.5", "2147483648", "1e10", "1" + "0" * 30, "-2147483649", "1e400", "2.0e-1", "",
    "0" * 5000 + "2", "abc", "+2", "2_0", "\u0662", " 2", "0x10", "NaN", "Infinity", "1e",
    ".5", "2.", "--2",
]  # fmt: skip
_JSON_NUMBERS = NOT_INT32[:4]
#: the loggers of what escaped the SDK's handlers (its 0.3 adapters, its last resort)
_ESCAPED = ("a2a.compat.", "a2a.utils.error_handlers")


@pytest.fixture(scope="module")
def http(agent: Agent) -> Iterator[httpx.Client]:
    """A client of our agent, which holds three finished tasks."""
    with httpx.Client(base_url=agent.url, timeout=10, verify=TLS) as client:
        for _ in range(3):
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                       "parts": [{"text": "hi"}], "metadata": {"skillId": "demo.echo"}}  # fmt: skip
            sent = client.post("/message:send", json={"message": message}, headers=V1)
            assert sent.status_code == 200, sent.text
        yield client


def _raw(**members: str) -> str:
    """A JSON object of members written as given (a number keeps its spelling)."""
    return "{" + ", ".join(f'"{name}": {text}' for name, text in members.items()) + "}"


def _rpc(http: httpx.Client, method: str, params: str, headers: dict[str, str]) -> Any:
    """The JSON-RPC answer to *params*, sent as written."""
    body = _raw(jsonrpc='"2.0"', id="7", method=json.dumps(method), params=params)
    return http.post("/", content=body, headers={**headers, **JSON}).json()


def _task(http: httpx.Client) -> str:
    answer = _rpc(http, "ListTasks", _raw(pageSize="1"), V1)
    task: str = answer["result"]["tasks"][0]["id"]
    return task


def _escaped(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.ERROR and record.name.startswith(_ESCAPED)
    ]


@pytest.mark.parametrize("spelling", INTEGRAL)
def test_an_integral_query_value_is_read_as_jsonrpc_reads_that_number(
    http: httpx.Client, caplog: pytest.LogCaptureFixture, spelling: str
) -> None:
    two, zero = spelling.format(n=2), spelling.format(n=0)
    task = _task(http)
    # 1.0 ListTasks: a page of two of the three tasks, as JSON-RPC lists it.
    rpc_page = _rpc(http, "ListTasks", _raw(pageSize=two), V1)["result"]
    rest_page = http.get(f"/tasks?pageSize={quote(two)}", headers=V1)
    assert rest_page.status_code == 200, rest_page.text
    assert len(rest_page.json()["tasks"]) == 2
    assert rest_page.json()["tasks"] == rpc_page["tasks"]
    # 1.0 GetTask and ListTasks with no history (historyLength 0 however written).
    rpc_task = _rpc(http, "GetTask", _raw(id=json.dumps(task), historyLength=zero), V1)
    rest_task = http.get(f"/tasks/{task}?historyLength={quote(zero)}", headers=V1)
    assert rest_task.status_code == 200, rest_task.text
    assert rest_task.json() == rpc_task["result"]
    assert "history" not in rest_task.json()
    rpc_list = _rpc(http, "ListTasks", _raw(historyLength=zero), V1)["result"]
    rest_list = http.get(f"/tasks?historyLength={quote(zero)}", headers=V1)
    assert rest_list.status_code == 200, rest_list.text
    assert rest_list.json()["tasks"] == rpc_list["tasks"]
    # 1.0 ListTaskPushNotificationConfigs: served.
    configs = http.get(f"/tasks/{task}/pushNotificationConfigs?pageSize={quote(two)}", headers=V1)
    assert configs.status_code == 200, configs.text
    # 0.3 GetTask: the task, as JSON-RPC 0.3 reads the number and REST reads the plain 0.
    rpc03 = _rpc(http, "tasks/get", _raw(id=json.dumps(task), historyLength=zero), V03)
    rest03 = http.get(f"/v1/tasks/{task}?historyLength={quote(zero)}", headers=V03)
    assert rest03.status_code == 200, rest03.text
    plain03 = http.get(f"/v1/tasks/{task}?historyLength=0", headers=V03)
    assert rest03.json() == plain03.json()
    assert len(rest03.json().get("history", [])) == len(rpc03["result"].get("history", []))
    assert _escaped(caplog) == []


@pytest.mark.parametrize("text", NOT_INT32, ids=[repr(text[:32]) for text in NOT_INT32])
def test_a_query_value_that_is_no_int32_is_invalid_params(
    http: httpx.Client, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    task = _task(http)
    value = quote(text, safe="")
    answers = {
        "ListTasks pageSize": http.get(f"/tasks?pageSize={value}", headers=V1),
        "ListTasks historyLength": http.get(f"/tasks?historyLength={value}", headers=V1),
        "GetTask": http.get(f"/tasks/{task}?historyLength={value}", headers=V1),
        "push configs": http.get(
            f"/tasks/{task}/pushNotificationConfigs?pageSize={value}", headers=V1
        ),
        "0.3 GetTask": http.get(f"/v1/tasks/{task}?historyLength={value}", headers=V03),
    }
    for name, answer in answers.items():
        assert answer.status_code == 400, (name, answer.text)
        error = answer.json()["error"]
        assert (error["status"], error["message"]) == ("INVALID_ARGUMENT", "Validation failed")
        violation = error["details"][-1]["fieldViolations"][0]["description"]
        assert "must be an integer from -2147483648 to 2147483647, not '" in violation, name
    # Each version in its own words: REST 0.3 as REST 1.0 (one query check), JSON-RPC as
    # its SDK answers the same number (0.3: a2a-sdk 0.3's "Invalid parameters").
    assert answers["0.3 GetTask"].json() == answers["GetTask"].json()
    if text in _JSON_NUMBERS:
        rpc = _rpc(http, "ListTasks", _raw(pageSize=text), V1)
        rpc03 = _rpc(http, "tasks/get", _raw(id=json.dumps(task), historyLength=text), V03)
        assert (rpc["error"]["code"], rpc03["error"]["code"]) == (-32602, -32602)
    assert _escaped(caplog) == []


@pytest.mark.parametrize(
    "query",
    ["pageSize=2&pageSize=2.0", "pageSize=2.0&pageSize=2", "historyLength=0&historyLength=0e0"],
)
def test_an_integer_given_twice_is_invalid_params_however_spelt(
    http: httpx.Client, query: str
) -> None:
    task = _task(http)
    paths = [f"/tasks?{query}", f"/tasks/{task}/pushNotificationConfigs?{query}"]
    if query.startswith("history"):
        paths = [f"/tasks/{task}?{query}", f"/v1/tasks/{task}?{query}"]
    for path in paths:
        answer = http.get(path, headers=V03 if path.startswith("/v1") else V1)
        assert answer.status_code == 400, (path, answer.text)
        assert "is given more than once" in answer.text, answer.text


def test_a_plain_sdk_agent_reads_an_integral_page_size_as_we_do(http: httpx.Client) -> None:
    """Where a2a-sdk is right (its 1.0 REST route reads ``2.0`` as ProtoJSON does), the
    same page."""
    app = build_sdk_app("http://127.0.0.1", binding="HTTP+JSON")
    with threaded_server(app) as url, httpx.Client(base_url=url, timeout=10, verify=TLS) as sdk:
        for n in range(3):
            message = {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            assert sdk.post("/message:send", json={"message": message}, headers=V1).is_success
        theirs = sdk.get("/tasks?pageSize=2.0", headers=V1)
    ours = http.get("/tasks?pageSize=2.0", headers=V1)
    assert (theirs.status_code, ours.status_code) == (200, 200), (theirs.text, ours.text)
    assert len(theirs.json()["tasks"]) == len(ours.json()["tasks"]) == 2


def test_grpc_carries_the_same_integer(http: httpx.Client, agent: Agent) -> None:
    """gRPC's int32 has one spelling: the page it gives is REST's ``?pageSize=2e0``."""
    with grpc.insecure_channel(agent.grpc_address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = a2a_pb2.ListTasksRequest(page_size=2)
        listed = stub.ListTasks(request, metadata=(("a2a-version", "1.0"),))
    rest = http.get("/tasks?pageSize=2e0", headers=V1)
    assert rest.status_code == 200, rest.text
    assert [task["id"] for task in rest.json()["tasks"]] == [task.id for task in listed.tasks]


def test_a_query_is_parsed_once(http: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The version parameter, the query check, the rewrite of ``2.0`` and what an error may
    quote back read one parse of the query, kept on the request's record (a count, not a
    time). Before, the version parameter and the error's scrub each parsed it again."""
    parsed: list[str] = []

    def counted(text: str, **options: Any) -> list[tuple[str, str]]:
        parsed.append(text)
        return parse_qsl(text, **options)

    for module in (classify, scrub, version_param, wire_values):
        if hasattr(module, "parse_qsl"):
            monkeypatch.setattr(module, "parse_qsl", counted)
    answer = http.get("/tasks?A2A-Version=1.0&pageSize=2.0&historyLength=0")
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["tasks"]) == 2
    assert parsed == ["A2A-Version=1.0", "pageSize=2.0", "historyLength=0"]  # each pair once
    parsed.clear()
    refused = http.get("/tasks?a2a-version=1.0&pageToken=%2Fa%2Fb")  # an error's answer
    assert refused.status_code == 400, refused.text
    assert parsed == ["a2a-version=1.0", "pageToken=%2Fa%2Fb"]

"""Request values the SDK would misread are invalid params on every binding and version
that carries them, and nothing is stored for them (``upstream/wire_values.py``).

An unknown enum name was dropped: ``ListTasks`` filtering on ``TASK_STATE_WORKNG``
(JSON-RPC) or ``?status=working`` (REST) listed every task of the caller. A REST query's
``includeArtifacts=yes`` read as false and a repeated ``pageSize`` as its last value
(A2A 1.0.1 §11.5: booleans are ``true``/``false``). ``"params": null`` and a number of
5000 digits were answered in Python's own words; a 0.3 REST create of a push config naming
a key twice kept the last value, where every other JSON body is refused.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc

from tests._support import TLS
from tests.bindings._agent import Agent
from tests.bindings._scenarios import HOOK_URL

V1 = {"A2A-Version": "1.0"}
V03 = {"A2A-Version": "0.3"}
JSON = {"content-type": "application/json"}
GRPC03 = (("a2a-version", "0.3"),)
#: words of Python the answers carried (its type names, its API hints)
PYTHON_WORDS = ("NoneType", "sys.", "Error: ", "int_max_str_digits")


def _message(text: str = "hi", role: str = "ROLE_USER") -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": role, "parts": [{"text": text}],
            "metadata": {"skillId": "demo.echo"}}  # fmt: skip


def _rpc(http: httpx.Client, method: str, params: Any, headers: dict[str, str] = V1) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return http.post("/", json=body, headers=headers).json()


@pytest.fixture(scope="module")
def http(agent: Agent) -> Iterator[httpx.Client]:
    """A client of our agent (push on), which holds one finished task with an artifact."""
    with httpx.Client(base_url=agent.url, timeout=10, verify=TLS) as client:
        sent = client.post("/message:send", json={"message": _message()}, headers=V1)
        assert sent.status_code == 200, sent.text
        yield client


def _task_count(http: httpx.Client) -> int:
    return len(_rpc(http, "ListTasks", {"pageSize": 100})["result"]["tasks"])


def _refused_rpc(answer: Any, *words: str) -> None:
    error = answer["error"]
    assert error["code"] == -32602, answer
    text = str(error)
    assert all(word in text for word in words), text
    assert not any(word in text for word in PYTHON_WORDS), text


def _refused_rest(answer: httpx.Response, *words: str) -> None:
    assert answer.status_code == 400, answer.text
    assert all(word in answer.text for word in words), answer.text
    assert not any(word in answer.text for word in PYTHON_WORDS), answer.text


def test_an_unknown_status_name_is_invalid_params(http: httpx.Client) -> None:
    _refused_rpc(_rpc(http, "ListTasks", {"status": "TASK_STATE_WORKNG"}), "TASK_STATE_WORKNG")
    _refused_rest(http.get("/tasks?status=working", headers=V1), "working", "TaskState")
    # The names A2A defines, and numbers as strings (protobuf's reading), still filter.
    completed = _rpc(http, "ListTasks", {"status": "TASK_STATE_COMPLETED"})["result"]["tasks"]
    assert len(completed) == _task_count(http)
    assert http.get("/tasks?status=TASK_STATE_WORKING", headers=V1).json()["tasks"] == []
    assert _rpc(http, "ListTasks", {"status": "3"})["result"]["tasks"] == completed
    # A numeral in other digits is no enum number (protobuf read "\u0663" with int(): 3).
    _refused_rpc(_rpc(http, "ListTasks", {"status": "\u0663"}), "TaskState")
    _refused_rest(http.get("/tasks?status=%D9%A3", headers=V1), "TaskState")


def test_the_version_rule_comes_first(http: httpx.Client) -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {"status": "X"}}
    answer = http.post("/", json=body).json()  # no A2A-Version: a 0.3 call (spec §3.6.2)
    assert answer["error"]["code"] == -32009, answer
    assert http.get("/tasks?status=X").status_code == 400
    assert "VERSION_NOT_SUPPORTED" in http.get("/tasks?status=X").text


def test_an_unknown_role_name_is_invalid_params_and_stores_nothing(http: httpx.Client) -> None:
    before = _task_count(http)
    robot = _message(role="ROLE_ROBOT")
    _refused_rpc(_rpc(http, "SendMessage", {"message": robot}), "ROLE_ROBOT", "Role")
    _refused_rest(http.post("/message:send", json={"message": robot}, headers=V1), "role")
    robot03 = {**robot, "content": robot.pop("parts")}
    _refused_rest(http.post("/v1/message:send", json={"message": robot03}, headers=V03), "Role")
    with http.stream("POST", "/v1/message:stream", json={"message": robot03}, headers=V03) as r:
        r.read()
        _refused_rest(r, "ROLE_ROBOT")
    _refused_rpc(_rpc(http, "message/send", {"message": {**robot, "kind": "message",
                 "role": "robot"}}, V03), "role")  # fmt: skip
    # 0.3 read every role but the user's as the agent's: an unset one too.
    for unset in ("ROLE_UNSPECIFIED", None):
        message = {**robot03, "role": unset}
        answer = http.post("/v1/message:send", json={"message": message}, headers=V03)
        _refused_rest(answer, "message.role", "Field is required.")
    assert _task_count(http) == before


def test_a_03_grpc_message_of_no_or_an_undefined_role_is_invalid_argument(
    http: httpx.Client, agent: Agent
) -> None:
    before = _task_count(http)
    with grpc.insecure_channel(agent.grpc_address) as channel:
        stub = a2a_v0_3_pb2_grpc.A2AServiceStub(channel)
        for role in (7, 0):
            message = a2a_v0_3_pb2.Message(message_id=uuid.uuid4().hex, role=role,  # type: ignore[arg-type]
                                           content=[a2a_v0_3_pb2.Part(text="hi")])  # fmt: skip
            message.metadata.update({"skillId": "demo.echo"})
            request = a2a_v0_3_pb2.SendMessageRequest(request=message)
            with pytest.raises(grpc.RpcError) as refused:
                stub.SendMessage(request, metadata=GRPC03)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "Validation failed" in str(refused.value.details())
    assert _task_count(http) == before


@pytest.mark.parametrize("body", ["1", "null", "[]", '"x"', '{"message": []}', "{}"])
@pytest.mark.parametrize("path", ["/v1/message:send", "/message:send"])
def test_a_message_body_of_another_shape_is_a_client_error(
    http: httpx.Client, path: str, body: str
) -> None:
    headers = {**(V03 if path.startswith("/v1/") else V1), **JSON}
    answer = http.post(path, content=body, headers=headers)
    assert answer.status_code == 400, answer.text


@pytest.mark.parametrize(
    "query",
    [
        "/tasks?includeArtifacts=yes",
        "/tasks?includeArtifacts=TRUE",
        "/tasks?pageSize=1&pageSize=100",
        "/tasks?status=TASK_STATE_COMPLETED&status=TASK_STATE_WORKING",
        "/tasks/{task}?historyLength=1&historyLength=2",
        "/tasks/{task}/pushNotificationConfigs?pageSize=1&pageSize=2",
        "/v1/tasks/{task}?historyLength=1&historyLength=2",
    ],
)
def test_a_query_value_a2a_does_not_define_is_invalid_params(
    http: httpx.Client, query: str
) -> None:
    task = _rpc(http, "ListTasks", {"pageSize": 1})["result"]["tasks"][0]["id"]
    headers = V03 if query.startswith("/v1/") else V1
    _refused_rest(http.get(query.format(task=task), headers=headers), "Validation failed")


@pytest.mark.parametrize(
    "query",
    [
        "/tasks?pageSize=abc",
        "/tasks?pageSize=",
        "/tasks?pageSize=1.5",
        "/tasks?pageSize=99999999999",
        "/tasks/{task}?historyLength=abc",
        "/tasks/{task}/pushNotificationConfigs?pageSize=x",
    ],
)
def test_a_query_integer_that_is_none_is_invalid_params_in_our_words(
    http: httpx.Client, query: str
) -> None:
    """Before: Python's and protobuf's words, reason INVALID_REQUEST ("Failed to parse
    pageSize field: invalid literal for int() with base 10: 'abc'.", "Couldn't parse
    non-integer string", "Value out of range: 99999999999.")."""
    task = _rpc(http, "ListTasks", {"pageSize": 1})["result"]["tasks"][0]["id"]
    answer = http.get(query.format(task=task), headers=V1)
    _refused_rest(answer, "Validation failed", "must be an integer from -2147483648 to")
    assert "int()" not in answer.text and "parse" not in answer.text, answer.text


def test_query_values_a2a_defines_are_read(http: httpx.Client) -> None:
    with_artifacts = http.get("/tasks?includeArtifacts=true&pageSize=1", headers=V1).json()
    assert with_artifacts["tasks"][0]["artifacts"]
    without = http.get("/tasks?includeArtifacts=false", headers=V1).json()
    assert not any(task.get("artifacts") for task in without["tasks"])


@pytest.mark.parametrize("params", [None, []])
@pytest.mark.parametrize("method", ["GetTask", "ListTasks", "SendMessage", "CancelTask"])
def test_null_or_array_params_are_invalid_params(
    http: httpx.Client, method: str, params: Any
) -> None:
    # An array was read as no params: ListTasks listed every task.
    _refused_rpc(_rpc(http, method, params), "params must be a JSON object")


def test_scalar_params_stay_an_invalid_request(http: httpx.Client) -> None:
    for params in ("x", 1, True):
        error = _rpc(http, "GetTask", params)["error"]
        assert error["code"] == -32600, error
        assert not any(word in str(error) for word in PYTHON_WORDS), error


@pytest.mark.parametrize(("path", "headers"), [("/message:send", V1), ("/v1/message:send", V03)])
def test_a_number_python_does_not_convert_is_a_parse_error(
    http: httpx.Client, path: str, headers: dict[str, str]
) -> None:
    before = _task_count(http)
    message = _message()
    if headers is V03:
        message["content"] = message.pop("parts")
    body = json.dumps({"message": message, "configuration": {"historyLength": 0}})
    body = body.replace('"historyLength": 0', '"historyLength": ' + "9" * 5000)
    answer = http.post(path, content=body, headers={**headers, **JSON})
    _refused_rest(answer, "Parse error: a number is beyond a double's range (RFC 8259 §6)")
    # Those digits in a string are text.
    served = http.post(path, json={"message": _message("9" * 5000)}, headers=headers)
    assert served.status_code == 200 or headers is V03, served.text
    assert _task_count(http) == before + (served.status_code == 200)


@pytest.mark.parametrize("headers", [V1, V03])
def test_a_number_python_does_not_convert_is_the_same_parse_error_on_jsonrpc(
    http: httpx.Client, headers: dict[str, str]
) -> None:
    before = _task_count(http)
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": _message()}}
    )
    body = body.replace('"id": 7', '"id": ' + "9" * 5000)
    answer = http.post("/", content=body, headers={**headers, **JSON}).json()
    # Before: "body is not valid JSON", where REST named the number.
    assert answer["error"] == {
        "code": -32700,
        "message": "Parse error: a number is beyond a double's range (RFC 8259 §6)",
    }, answer
    assert _task_count(http) == before


def test_a_03_rest_push_config_naming_a_key_twice_is_a_parse_error(http: httpx.Client) -> None:
    task = _rpc(http, "ListTasks", {"pageSize": 1})["result"]["tasks"][0]["id"]
    configs = f"/v1/tasks/{task}/pushNotificationConfigs"
    config = {"name": f"tasks/{task}/pushNotificationConfigs/c1",
              "pushNotificationConfig": {"url": "https://example.com/first", "URL": HOOK_URL}}  # fmt: skip
    body = json.dumps(config).replace('"URL"', '"url"')
    answer = http.post(configs, content=body, headers={**V03, **JSON})
    _refused_rest(answer, "Parse error: duplicate key 'url'")
    listed = _rpc(http, "ListTaskPushNotificationConfigs", {"taskId": task})["result"]
    assert listed.get("configs", []) == []


def _typed(version: str, **fields: Any) -> dict[str, Any]:
    """A message (in *version*'s REST JSON) with *fields* of a type A2A does not give them."""
    message = {**_message(), **fields}
    if version == "0.3":
        message["content"] = message.pop("parts")
    return message


#: (HTTP method, path, version, REST body or None, JSON-RPC method, params): one value of the
#: wrong JSON type each, as REST and JSON-RPC carry it
WRONG_TYPES = [
    ("POST", "/message:send", "1.0", {"message": _typed("1.0", messageId=5)},
     "SendMessage", {"message": _typed("1.0", messageId=5)}),
    ("POST", "/message:stream", "1.0", {"message": _typed("1.0", parts="x")},
     "SendStreamingMessage", {"message": _typed("1.0", parts="x")}),
    ("POST", "/message:send", "1.0", {"message": _message(), "configuration": {"historyLength": "abc"}},
     "SendMessage", {"message": _message(), "configuration": {"historyLength": "abc"}}),
    ("GET", "/tasks?statusTimestampAfter=yesterday", "1.0", None,
     "ListTasks", {"statusTimestampAfter": "yesterday"}),
    ("POST", "/tasks/{task}/pushNotificationConfigs", "1.0", {"url": 5},
     "CreateTaskPushNotificationConfig", {"taskId": "{task}", "url": 5}),
    ("POST", "/v1/message:send", "0.3", {"message": _typed("0.3", messageId=5)},
     "message/send", {"message": {**_typed("1.0", messageId=5), "kind": "message", "role": "user"}}),
    ("POST", "/v1/message:stream", "0.3", {"message": _typed("0.3", metadata=5)},
     "message/stream", {"message": {**_typed("1.0", metadata=5), "kind": "message", "role": "user"}}),
    ("POST", "/v1/tasks/{task}/pushNotificationConfigs", "0.3",
     {"name": "tasks/{task}/pushNotificationConfigs/c", "pushNotificationConfig": {"url": 5}},
     "tasks/pushNotificationConfig/set",
     {"taskId": "{task}", "pushNotificationConfig": {"url": 5}}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("verb", "path", "version", "body", "rpc_method", "params"),
    WRONG_TYPES,
    ids=[f"{row[2]} {row[0]} {row[1]}" for row in WRONG_TYPES],
)
def test_a_value_of_the_wrong_json_type_is_invalid_params_on_rest_as_on_jsonrpc(
    http: httpx.Client,
    verb: str,
    path: str,
    version: str,
    body: Any,
    rpc_method: str,
    params: Any,
) -> None:
    """Spec §5.1: one fault, one error on every binding. Before, a2a-sdk answered a REST
    body or query value protobuf cannot read (``"messageId": 5``, ``"historyLength":
    "abc"``, ``statusTimestampAfter=yesterday``) with reason ``INVALID_REQUEST`` (its
    clients raise ``InvalidRequestError``), where JSON-RPC answers the same params ``-32602``
    (``InvalidParamsError``) and a REST query integer that is none was invalid params."""
    task = _rpc(http, "ListTasks", {"pageSize": 1})["result"]["tasks"][0]["id"]
    before = _task_count(http)
    headers = V1 if version == "1.0" else V03
    filled = json.loads(json.dumps(body).replace("{task}", task)) if body else None
    answer = http.request(verb, path.format(task=task), json=filled, headers=headers)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT", error
    assert [d["reason"] for d in error["details"] if "reason" in d] == ["INVALID_PARAMS"], error
    twin = json.loads(json.dumps(params).replace("{task}", task))
    assert _rpc(http, rpc_method, twin, headers)["error"]["code"] == -32602
    assert _task_count(http) == before

"""A caller's bad value is quoted back short on every binding and version: its first
characters, then ``… (N characters)`` (``apcore_a2a/_text.echoed``), in our answers, in the
SDK's texts (``streams/scrub.py`` cuts the values they quote whole) and in our log lines.

Before, a 5000-character skill id came back as 200 characters "...[4800 more chars]", an
enum name or a query boolean as 40 characters with nothing saying they were cut, a task id
or a number the SDK's text quotes up to the 500-character cut of a whole message, and a
refused push URL's host was logged whole.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2, a2a_v0_3_pb2_grpc
from a2a.types import a2a_pb2, a2a_pb2_grpc

from tests._support import TLS
from tests.bindings._agent import Agent

BIG = "x" * 5000
DIGITS = "9" * 5000
CUT = "… (5000 characters)"
V1 = {"A2A-Version": "1.0"}
V03 = {"A2A-Version": "0.3"}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def http(agent: Agent) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=agent.url, timeout=30, verify=TLS) as client:
        yield client


def _short(text: str, cut: str = CUT) -> None:
    """*text* quotes the value's start and says how long it was, and no more of it."""
    assert cut in text, text
    assert "x" * 65 not in text and "9" * 65 not in text, text


def _message(skill: str = "demo.echo", **fields: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}],
            "metadata": {"skillId": skill}, **fields}  # fmt: skip


def _message03(skill: str) -> dict[str, Any]:
    return {"kind": "message", "messageId": uuid.uuid4().hex, "role": "user",
            "parts": [{"kind": "text", "text": "hi"}], "metadata": {"skillId": skill}}  # fmt: skip


def _rpc(http: httpx.Client, method: str, params: Any, headers: dict[str, str] = V1) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = http.post("/", json=body, headers=headers)
    error = answer.json()["error"]
    assert error["code"] in (-32601, -32602, -32001, -32009), answer.text
    return json.dumps(error, ensure_ascii=False)


def test_jsonrpc_10_answers_quote_a_bad_value_short(http: httpx.Client) -> None:
    _short(_rpc(http, "SendMessage", {"message": _message(BIG)}))
    _short(_rpc(http, "ListTasks", {"status": BIG}))  # an enum name A2A does not define
    _short(_rpc(http, "SendMessage", {"message": _message(taskId=BIG)}))  # the SDK's text
    _short(_rpc(http, "GetTask", {"id": "t", "historyLength": DIGITS}), "… (5002 characters)")
    _short(_rpc(http, "GetTask", {"id": "t"}, {"A2A-Version": BIG}))


def test_jsonrpc_03_answers_quote_a_bad_value_short(http: httpx.Client) -> None:
    _short(_rpc(http, "message/send", {"message": _message03(BIG)}, V03))


def _rest(answer: httpx.Response) -> str:
    assert answer.status_code in (400, 404), answer.text
    return answer.text


def test_rest_10_answers_quote_a_bad_value_short(http: httpx.Client) -> None:
    _short(_rest(http.post("/message:send", json={"message": _message(BIG)}, headers=V1)))
    _short(_rest(http.get(f"/tasks?status={BIG}", headers=V1)))
    _short(_rest(http.get(f"/tasks?includeArtifacts={BIG}", headers=V1)))
    _short(_rest(http.get(f"/tasks?pageSize={DIGITS}", headers=V1)))
    parts = {"message": {**_message(), "parts": BIG}}  # protobuf's text quotes the value
    _short(_rest(http.post("/message:send", json=parts, headers=V1)))


def test_rest_03_answers_quote_a_bad_value_short(http: httpx.Client) -> None:
    message = {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}],
               "metadata": {"skillId": BIG}}  # fmt: skip
    _short(_rest(http.post("/v1/message:send", json={"message": message}, headers=V03)))
    _short(_rest(http.get(f"/v1/tasks/t?historyLength={BIG}", headers=V03)))
    robot = {**message, "role": BIG, "metadata": {"skillId": "demo.echo"}}
    _short(_rest(http.post("/v1/message:send", json={"message": robot}, headers=V03)))


def _refused(call: Any, request: Any, version: str) -> str:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, metadata=(("a2a-version", version),))
    return str(refused.value.details())


def test_grpc_answers_quote_a_bad_value_short(agent: Agent) -> None:
    parts = [a2a_pb2.Part(text="hi")]
    named = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=parts)
    named.metadata.update({"skillId": BIG})
    # the SDK's text quotes the task id
    tasked = a2a_pb2.Message(message_id="m", role=a2a_pb2.ROLE_USER, parts=parts, task_id=BIG)
    named03 = a2a_v0_3_pb2.Message(
        message_id="m", role=a2a_v0_3_pb2.ROLE_USER, content=[a2a_v0_3_pb2.Part(text="hi")]
    )
    named03.metadata.update({"skillId": BIG})
    with grpc.insecure_channel(agent.grpc_address) as channel:
        send = a2a_pb2_grpc.A2AServiceStub(channel).SendMessage
        send03 = a2a_v0_3_pb2_grpc.A2AServiceStub(channel).SendMessage
        _short(_refused(send, a2a_pb2.SendMessageRequest(message=named), "1.0"))
        _short(_refused(send, a2a_pb2.SendMessageRequest(message=tasked), "1.0"))
        _short(_refused(send03, a2a_v0_3_pb2.SendMessageRequest(request=named03), "0.3"))


def test_a_refused_push_url_is_logged_short(
    http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    task = http.post("/message:send", json={"message": _message()}, headers=V1).json()["task"]
    params = {"taskId": task["id"], "url": f"http://{BIG}/hook"}
    with caplog.at_level(logging.INFO, logger="apcore_a2a"):
        _short(_rpc(http, "CreateTaskPushNotificationConfig", params))
    refused = [r.getMessage() for r in caplog.records if "push" in r.getMessage()]
    assert refused, caplog.text
    for line in refused:
        assert len(line) < 400, line


@pytest.mark.parametrize("body", [b'{"message": ', b""])
@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/message:send", V1),
        ("/message:stream", V1),
        ("/tasks/t/pushNotificationConfigs", V1),
        ("/v1/message:send", V03),
        ("/v1/message:stream", V03),
        ("/v1/tasks/t/pushNotificationConfigs", V03),
    ],
)
def test_a_rest_body_that_is_no_json_is_answered_in_our_words(
    http: httpx.Client, path: str, headers: dict[str, str], body: bytes
) -> None:
    """As JSON-RPC's -32700 says it; before, Python's parser's words: "Failed to load JSON:
    Expecting value: line 1 column 13 (char 12)." (0.3 push configs: "The request body is
    not valid JSON", reason INVALID_PARAMS). An empty body too: it kept those words
    (0.3 push configs: "The request body must be a JSON object")."""
    said = http.post("/", content=body, headers={**headers, **JSON}).json()
    assert said["error"] == {"code": -32700, "message": "Parse error: body is not valid JSON"}
    answer = http.post(path, content=body, headers={**headers, **JSON})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["message"] == "Parse error: body is not valid JSON", answer.text
    assert error["details"][0]["reason"] == "INVALID_REQUEST", answer.text
    duplicate = http.post(path, content=b'{"a": 1, "a": 2}', headers={**headers, **JSON})
    assert duplicate.json()["error"]["message"] == "Parse error: duplicate key 'a'"

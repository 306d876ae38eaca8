"""A2A 1.0.1 on a2a-sdk's own answers (issue 41), each row of the issue's table on the six
binding x version cells, on the raw wire (httpx, grpc stubs) and, where a row is a call the
official clients make, through them:

* CancelTask of a finished task: ``TaskNotCancelableError`` -32002 / HTTP 400 (not 409) /
  ``FAILED_PRECONDITION``;
* a body that is not JSON: ``ContentTypeNotSupportedError``, a JSON-RPC error object (not
  HTTP 415) / HTTP 400; on gRPC (whose bodies are protobuf) the same error class answers
  ``INVALID_ARGUMENT`` for a part the skill cannot take;
* REST answers in ``application/a2a+json`` (JSON-RPC in ``application/json``);
* no ``A2A-Version``: a 0.3 request (spec §3.6.2): 0.3 served, 1.0 refused with
  ``VersionNotSupportedError`` (-32009 / 400 / ``FAILED_PRECONDITION``) naming the header;
* push off and ``A2A-Version: 9.9``: -32003 / 400 / ``FAILED_PRECONDITION`` and
  -32009 / 400 / ``FAILED_PRECONDITION``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import CancelTaskRequest, TaskNotCancelableError
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import ParseDict

from tests._support import TLS
from tests.bindings._agent import Agent, serve_agent
from tests.bindings._grpc import rich_status, stubs
from tests.bindings._normalize import error
from tests.bindings._peers import TRANSPORTS, fetch_card, label, message, open_peer, send, text

pytestmark = pytest.mark.parametrize(
    ("binding", "version"), TRANSPORTS, ids=[label(*t) for t in TRANSPORTS]
)
HTTP_CELLS = [t for t in TRANSPORTS if t[0] != "GRPC"]
RPC_NAMES = {
    ("SendMessage", "0.3"): "message/send",
    ("GetTask", "0.3"): "tasks/get",
    ("CancelTask", "0.3"): "tasks/cancel",
    ("CreateTaskPushNotificationConfig", "0.3"): "tasks/pushNotificationConfig/set",
}


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    """Push notifications off (the default)."""
    with serve_agent() as running:
        yield running


@pytest.fixture
async def http(agent: Agent) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as client:
        yield client


def _message(version: str, skill: str = "demo.echo", part: Any = None) -> dict[str, Any]:
    """A message in the JSON of *version* (1.0, or 0.3's JSON-RPC / proto JSON)."""
    if version == "1.0":
        parts = [part or {"text": "hi"}]
        return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts,
                "metadata": {"skillId": skill}}  # fmt: skip
    return {"kind": "message", "messageId": uuid.uuid4().hex, "role": "user",
            "parts": [part or {"kind": "text", "text": "hi"}], "metadata": {"skillId": skill}}  # fmt: skip


def _rpc(method: str, version: str, params: dict[str, Any]) -> dict[str, Any]:
    name = RPC_NAMES.get((method, version), method)
    return {"jsonrpc": "2.0", "id": 7, "method": name, "params": params}


def _reason(body: dict[str, Any]) -> str | None:
    error = body["error"]
    details = error.get("details") or error.get("data") or [{}]
    return details[0].get("reason") if isinstance(details, list) else None


async def _finished_task(http: httpx.AsyncClient) -> str:
    sent = await http.post(
        "/message:send", json={"message": _message("1.0")}, headers={"A2A-Version": "1.0"}
    )
    assert sent.status_code == 200, sent.text
    return str(sent.json()["task"]["id"])


async def _grpc_call(
    agent: Agent, version: str, rpc: str, metadata: Any, prebuilt: Any = None, **fields: Any
) -> Any:
    """The rich status of a gRPC call that fails, or its answer."""
    request = prebuilt
    if request is None:
        proto = pb if version == "1.0" else pb03
        request = ParseDict(fields, getattr(proto, rpc + "Request")())
    async with stubs(agent.grpc_address, announce=False) as (v1, v03):
        stub = v1 if version == "1.0" else v03
        try:
            return await getattr(stub, rpc)(request, metadata=metadata, timeout=30)
        except grpc.aio.AioRpcError as failed:
            return rich_status(failed)


def _announce(version: str) -> list[tuple[str, str]]:
    return [("a2a-version", version)]


# -- CancelTask of a finished task -------------------------------------------------------------


async def test_cancel_of_a_finished_task(
    agent: Agent, http: httpx.AsyncClient, binding: str, version: str
) -> None:
    task_id = await _finished_task(http)
    headers = {"A2A-Version": version}
    if binding == "JSONRPC":
        params = {"id": task_id}
        answer = await http.post("/", json=_rpc("CancelTask", version, params), headers=headers)
        assert (answer.status_code, answer.json()["error"]["code"]) == (200, -32002)
    elif binding == "HTTP+JSON":
        path = f"/tasks/{task_id}:cancel" if version == "1.0" else f"/v1/tasks/{task_id}:cancel"
        answer = await http.post(path, headers=headers)
        assert answer.status_code == 400, answer.text  # A2A 1.0.1 §5.4 (1.0.0: 409)
        assert (answer.json()["error"]["code"], _reason(answer.json())) == (
            400,
            "TASK_NOT_CANCELABLE",
        )
    else:
        field = {"id": task_id} if version == "1.0" else {"name": f"tasks/{task_id}"}
        failed = await _grpc_call(agent, version, "CancelTask", _announce(version), **field)
        assert failed["code"] == grpc.StatusCode.FAILED_PRECONDITION
    # and the official client of the cell reads it as the typed error
    async with open_peer(await fetch_card(agent.url), binding, version) as peer:
        with pytest.raises(Exception) as caught:
            await peer.client.cancel_task(CancelTaskRequest(id=task_id))
    # (the SDK's 0.3 REST client cannot read the error envelope: the served one is judged)
    assert error(caught.value)["error"] == TaskNotCancelableError.__name__


# -- a body that is not JSON ---------------------------------------------------------------------


async def test_a_body_that_is_not_json(
    agent: Agent, http: httpx.AsyncClient, binding: str, version: str
) -> None:
    headers = {"A2A-Version": version, "Content-Type": "text/plain"}
    body = json.dumps({"message": _message(version)})
    if binding == "JSONRPC":
        raw = json.dumps(_rpc("SendMessage", version, {"message": _message(version)}))
        answer = await http.post("/", content=raw, headers=headers)
        assert answer.status_code == 200  # a JSON-RPC error object, not HTTP 415
        assert answer.json()["error"]["code"] == -32005
        assert answer.json()["id"] is None  # the body was never read
    elif binding == "HTTP+JSON":
        answer = await http.post("/message:send" if version == "1.0" else "/v1/message:send",
                                 content=body, headers=headers)  # fmt: skip
        assert answer.status_code == 400, answer.text  # 1.0.0: 415
        assert _reason(answer.json()) == "CONTENT_TYPE_NOT_SUPPORTED"
    else:
        # gRPC bodies are protobuf; the error class answers a part the skill cannot take.
        if version == "1.0":
            part = {"raw": "dGNr", "mediaType": "x-odd/thing"}
            fields = {"message": _message("1.0", "demo.add", part)}
        else:
            file = {"file": {"fileWithBytes": "dGNr", "mimeType": "x-odd/thing"}}
            msg = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "content": [file],
                   "metadata": {"skillId": "demo.add"}}  # fmt: skip
            fields = {"request": msg}
        failed = await _grpc_call(agent, version, "SendMessage", _announce(version), **fields)
        assert failed["code"] == grpc.StatusCode.INVALID_ARGUMENT
        assert version == "0.3" or failed["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"


# -- the REST media type ---------------------------------------------------------------------------


async def test_answers_media_type(http: httpx.AsyncClient, binding: str, version: str) -> None:
    if binding == "GRPC":
        return  # protobuf: no media type of A2A's (grpc's own application/grpc)
    task_id = await _finished_task(http)
    headers = {"A2A-Version": version, "Accept": "application/json"}
    if binding == "JSONRPC":
        params = {"id": task_id}
        answer = await http.post("/", json=_rpc("GetTask", version, params), headers=headers)
        assert answer.headers["content-type"] == "application/json"
    else:
        path = f"/tasks/{task_id}" if version == "1.0" else f"/v1/tasks/{task_id}"
        answer = await http.get(path, headers=headers)
        # 1.0.1 §11.1 (SHOULD); the SDK's 0.3 routes answer 0.3's application/json
        media = "application/a2a+json" if version == "1.0" else "application/json"
        assert answer.headers["content-type"] == media
    assert answer.status_code == 200 and "error" not in answer.json()


# -- no A2A-Version: a 0.3 request -------------------------------------------------------------


async def test_no_version_is_a_03_request(
    agent: Agent, http: httpx.AsyncClient, binding: str, version: str
) -> None:
    """0.3 calls are served without the header; 1.0 calls are refused, the message saying
    which header to send."""
    if binding == "JSONRPC":
        call = _rpc("SendMessage", version, {"message": _message(version)})
        answer = (await http.post("/", json=call)).json()
        refusal = answer.get("error")
        served = "result" in answer
        text_of = refusal and refusal["message"]
        code = refusal and refusal["code"]
    elif binding == "HTTP+JSON":
        path = "/message:send" if version == "1.0" else "/v1/message:send"
        body = {"message": _message("1.0")}
        if version == "0.3":
            msg = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                   "content": [{"text": "hi"}], "metadata": {"skillId": "demo.echo"}}  # fmt: skip
            body = {"request": msg}
        response = await http.post(path, json=body)
        served = response.status_code == 200
        refusal = None if served else response.json()["error"]
        text_of = refusal and refusal["message"]
        code = refusal and (response.status_code, _reason(response.json()))
    else:
        if version == "1.0":
            fields: dict[str, Any] = {"message": _message("1.0")}
        else:
            msg = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                   "content": [{"text": "hi"}], "metadata": {"skillId": "demo.echo"}}  # fmt: skip
            fields = {"request": msg}
        answer = await _grpc_call(agent, version, "SendMessage", (), **fields)
        served = not isinstance(answer, dict)
        refusal = None if served else answer
        text_of = refusal and refusal["message"]
        code = refusal and (refusal["code"], refusal.get("reason"))
    if version == "0.3":
        assert served, refusal
        return
    assert not served
    assert "A2A-Version: 1.0" in str(text_of)
    assert (
        code
        == {
            "JSONRPC": -32009,
            "HTTP+JSON": (400, "VERSION_NOT_SUPPORTED"),
            "GRPC": (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED"),
        }[binding]
    )


# -- push off, and a version nobody speaks -----------------------------------------------------------


async def test_push_off_and_an_unknown_version(
    agent: Agent, http: httpx.AsyncClient, binding: str, version: str
) -> None:
    task_id = await _finished_task(http)
    if binding == "GRPC":
        hook = "https://example.com/hook"
        if version == "1.0":
            request: Any = pb.TaskPushNotificationConfig(task_id=task_id, url=hook)
            get: dict[str, Any] = {"id": task_id}
        else:
            config = {"name": f"tasks/{task_id}/pushNotificationConfigs/c",
                      "pushNotificationConfig": {"url": hook}}  # fmt: skip
            request = ParseDict({"parent": f"tasks/{task_id}", "configId": "c", "config": config},
                                pb03.CreateTaskPushNotificationConfigRequest())  # fmt: skip
            get = {"name": f"tasks/{task_id}"}
        name = "CreateTaskPushNotificationConfig"
        refused = await _grpc_call(agent, version, name, _announce(version), prebuilt=request)
        assert refused["code"] == grpc.StatusCode.FAILED_PRECONDITION  # 1.0.0: UNIMPLEMENTED
        unknown = await _grpc_call(agent, version, "GetTask", _announce("9.9"), **get)
        assert unknown["code"] == grpc.StatusCode.FAILED_PRECONDITION
        assert version == "0.3" or unknown["reason"] == "VERSION_NOT_SUPPORTED"
        return
    headers = {"A2A-Version": version}
    config = {"url": "https://example.com/hook"}
    if binding == "JSONRPC":
        params: dict[str, Any] = {"taskId": task_id, **config}
        if version == "0.3":
            params = {"taskId": task_id, "pushNotificationConfig": config}
        call = _rpc("CreateTaskPushNotificationConfig", version, params)
        refused = (await http.post("/", json=call, headers=headers)).json()["error"]
        assert refused["code"] == -32003
        get = _rpc("GetTask", version, {"id": task_id})
        unknown = await http.post("/", json=get, headers={"A2A-Version": "9.9"})
        assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32009
    else:
        base = "" if version == "1.0" else "/v1"
        body: dict[str, Any] = {"url": "https://example.com/hook"}
        if version == "0.3":  # the RPC request, as the SDK's 0.3 client posts it
            body = {"parent": f"tasks/{task_id}", "configId": "c", "config": {
                "name": f"tasks/{task_id}/pushNotificationConfigs/c",
                "pushNotificationConfig": config}}  # fmt: skip
        path = f"{base}/tasks/{task_id}/pushNotificationConfigs"
        refused = await http.post(path, json=body, headers=headers)
        assert refused.status_code == 400, refused.text
        assert _reason(refused.json()) == "PUSH_NOTIFICATION_NOT_SUPPORTED"
        unknown = await http.get(f"{base}/tasks/{task_id}", headers={"A2A-Version": "9.9"})
        assert unknown.status_code == 400
        assert _reason(unknown.json()) == "VERSION_NOT_SUPPORTED"


# -- A2A-Version read one way on every binding --------------------------------------------------

#: per protocol: an announced version, and whether a method of that protocol serves it (spec
#: §3.6: a version is its Major.Minor, patch numbers do not count; §3.6.2: another Major.Minor
#: is refused, where a2a-sdk's check on HTTP compares majors alone and served 1.1 as 1.0 and
#: 0.2 as 0.3); a number longer than Python reads as an int is no version (main: HTTP 500,
#: gRPC INTERNAL)
LONG = "0" * 5000
ODD_VERSIONS = {
    "1.0": (
        ("1.0.1", True),
        ("1", True),
        ("1.1", False),
        ("1.x", False),
        ("1.0, 0.3", False),
        ("1." + LONG, False),
    ),
    "0.3": (
        ("0.3.0", True),
        ("0.2", False),
        ("0.4.1", False),
        ("0", False),
        ("0.x", False),
        ("0.3; 1.0", False),
        ("0.3" + LONG, False),
    ),
}


async def test_an_odd_version_gets_one_verdict_on_every_binding(
    agent: Agent, http: httpx.AsyncClient, binding: str, version: str
) -> None:
    task_id = await _finished_task(http)
    for announced, served in ODD_VERSIONS[version]:
        refusal: Any = None
        if binding == "GRPC":
            get = {"id": task_id} if version == "1.0" else {"name": f"tasks/{task_id}"}
            answer = await _grpc_call(agent, version, "GetTask", _announce(announced), **get)
            if isinstance(answer, dict):
                refusal = answer["code"] == grpc.StatusCode.FAILED_PRECONDITION, answer
        elif binding == "JSONRPC":
            call = _rpc("GetTask", version, {"id": task_id})
            body = (await http.post("/", json=call, headers={"A2A-Version": announced})).json()
            if "error" in body:
                refusal = body["error"]["code"] == -32009, body
        else:
            base = "" if version == "1.0" else "/v1"
            got = await http.get(f"{base}/tasks/{task_id}", headers={"A2A-Version": announced})
            if got.status_code != 200:
                refusal = _reason(got.json()) == "VERSION_NOT_SUPPORTED", got.text
        assert (refusal is None) is served, (announced[:20], refusal)
        assert refusal is None or refusal[0], (announced[:20], refusal)


async def test_the_official_client_sends_the_version_and_is_served(
    agent: Agent, binding: str, version: str
) -> None:
    """The SDK's clients announce their version on every binding, so nothing they send is
    refused by the rule."""
    async with open_peer(await fetch_card(agent.url), binding, version) as peer:
        result = await send(peer, message(text("hi"), skill="demo.echo"))
    assert result.id and result.status.state  # a task, served

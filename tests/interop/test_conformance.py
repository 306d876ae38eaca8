"""Transport conformance where a2a-sdk 1.3 differs from the spec (issue 19, item 6).

Spec §5.4 error mapping, GRPC-ERR-002 (unsupported version on gRPC), HTTP_JSON-SVC-001
(REST media type) and JSONRPC-SSE-002 (wrong Content-Type on JSON-RPC), each on the raw
wire, plus watch tests that fail when the SDK changes what we correct.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as grpc03
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc as grpc10
from google.rpc import error_details_pb2, status_pb2

from apcore_a2a.upstream.grpc_version import grpc_version_error
from tests.bindings._agent import Agent, serve_agent
from tests.interop._runs import Target

V1 = {"A2A-Version": "1.0"}


def _send_rest(agent: Target, text: str = "hi") -> dict[str, Any]:
    body = {
        "message": {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            "metadata": {"skillId": "interop.echo"},
        }
    }
    response = httpx.post(agent.url + "/message:send", json=body, headers=V1, timeout=30)
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def _reason(response: httpx.Response) -> str:
    details = response.json()["error"].get("details") or [{}]
    return str(details[0].get("reason"))


# -- spec §5.4 on HTTP --------------------------------------------------------------------


def test_cancel_of_a_finished_task_is_409_on_rest(interop_agent: Target) -> None:
    task = _send_rest(interop_agent)
    response = httpx.post(f"{interop_agent.url}/tasks/{task['id']}:cancel", headers=V1, timeout=10)
    assert response.status_code == 409
    assert _reason(response) == "TASK_NOT_CANCELABLE"
    assert response.headers["content-type"].startswith("application/json")


def test_cancel_of_a_finished_task_keeps_its_json_rpc_code(interop_agent: Target) -> None:
    task = _send_rest(interop_agent)
    payload = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task["id"]}}
    response = httpx.post(interop_agent.url + "/", json=payload, headers=V1, timeout=10)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32002


# -- spec §5.4 and GRPC-ERR-002 on gRPC ----------------------------------------------------


def _rpc_error_reason(error: grpc.RpcError) -> str:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return str(info.reason)
    return ""


def _v1_get_task(agent: Target, metadata: list[tuple[str, str]]) -> grpc.RpcError | None:
    with grpc.insecure_channel(agent.grpc) as channel:
        try:
            grpc10.A2AServiceStub(channel).GetTask(
                pb.GetTaskRequest(id="no-such-task"), metadata=metadata, timeout=10
            )
        except grpc.RpcError as error:
            return error
    return None


@pytest.mark.parametrize("version", ["2.0", "0.3", "0", "banana"])
def test_grpc_unsupported_version_is_unimplemented(interop_agent: Target, version: str) -> None:
    error = _v1_get_task(interop_agent, [("a2a-version", version)])
    assert error is not None
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert _rpc_error_reason(error) == "VERSION_NOT_SUPPORTED"


@pytest.mark.parametrize("metadata", [[("a2a-version", "1.0")], [("a2a-version", "1.7")], []])
def test_grpc_supported_or_absent_version_is_served(
    interop_agent: Target, metadata: list[tuple[str, str]]
) -> None:
    error = _v1_get_task(interop_agent, metadata)
    assert error is not None and error.code() == grpc.StatusCode.NOT_FOUND  # reached the handler


def test_grpc_03_service_refuses_1_0(interop_agent: Target) -> None:
    with grpc.insecure_channel(interop_agent.grpc) as channel:
        stub = grpc03.A2AServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetTask(pb03.GetTaskRequest(name="tasks/x"), metadata=[("a2a-version", "1.0")])
        assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(grpc.RpcError) as served:
            stub.GetTask(pb03.GetTaskRequest(name="tasks/x"), metadata=[("a2a-version", "0.3")])
        assert served.value.code() == grpc.StatusCode.NOT_FOUND


def test_grpc_subscribe_to_a_finished_task_is_unimplemented(interop_agent: Target) -> None:
    task = _send_rest(interop_agent)
    with grpc.insecure_channel(interop_agent.grpc) as channel:
        stream = grpc10.A2AServiceStub(channel).SubscribeToTask(
            pb.SubscribeToTaskRequest(id=task["id"]), metadata=[("a2a-version", "1.0")]
        )
        with pytest.raises(grpc.RpcError) as caught:
            list(stream)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert _rpc_error_reason(caught.value) == "UNSUPPORTED_OPERATION"


@pytest.fixture(scope="module")
def agent_without_push() -> Iterator[Agent]:
    with serve_agent() as running:
        yield running


def test_grpc_push_not_supported_is_unimplemented(agent_without_push: Agent) -> None:
    with (
        grpc.insecure_channel(agent_without_push.grpc_address) as channel,
        pytest.raises(grpc.RpcError) as caught,
    ):
        grpc10.A2AServiceStub(channel).CreateTaskPushNotificationConfig(
            pb.TaskPushNotificationConfig(task_id="t", url="https://example.com/hook"),
            metadata=[("a2a-version", "1.0")],
            timeout=10,
        )
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert _rpc_error_reason(caught.value) == "PUSH_NOTIFICATION_NOT_SUPPORTED"


def test_grpc_version_rule() -> None:
    assert grpc_version_error("1", None) is None
    assert grpc_version_error("1", " 1.2 ") is None
    assert grpc_version_error("0", "0.3") is None
    error = grpc_version_error("1", "9" * 500)
    assert error is not None and len(str(error.message)) < 120  # echoes at most 20 chars


# -- HTTP_JSON-SVC-001: REST media type ------------------------------------------------------


def test_rest_answers_are_application_json(interop_agent: Target) -> None:
    task = _send_rest(interop_agent)
    got = httpx.get(f"{interop_agent.url}/tasks/{task['id']}", headers=V1, timeout=10)
    assert got.headers["content-type"] == "application/json"
    missing = httpx.get(f"{interop_agent.url}/tasks/nope", headers=V1, timeout=10)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/json"
    listed = httpx.get(f"{interop_agent.url}/tasks", headers=V1, timeout=10)
    assert listed.headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/a2a+json", "application/a2a+json"),
        ("application/a2a+json, application/json;q=0", "application/a2a+json"),
        ("application/a2a+json, application/json", "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
    ],
)
def test_rest_media_type_follows_accept(interop_agent: Target, accept: str, expected: str) -> None:
    task = _send_rest(interop_agent)
    got = httpx.get(
        f"{interop_agent.url}/tasks/{task['id']}", headers={**V1, "Accept": accept}, timeout=10
    )
    assert got.status_code == 200
    assert got.headers["content-type"] == expected


# -- JSONRPC-SSE-002: a JSON-RPC request that is not application/json -----------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_json_rpc_with_wrong_content_type(interop_agent: Target, content_type: str) -> None:
    payload = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}}
    response = httpx.post(
        interop_agent.url + "/",
        content=json.dumps(payload),
        headers={**V1, "Content-Type": content_type},
        timeout=10,
    )
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["code"] == -32005  # ContentTypeNotSupportedError (see docs/interop.md)


def test_rest_with_wrong_content_type_is_415(interop_agent: Target) -> None:
    response = httpx.post(
        interop_agent.url + "/message:send",
        content=b"{}",
        headers={**V1, "Content-Type": "text/plain"},
        timeout=10,
    )
    assert response.status_code == 415

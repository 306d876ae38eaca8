"""Transport conformance to A2A 1.0.1 on the raw wire of a served agent (a subprocess):
spec §5.4 error mapping (the SDK's own answers), §3.6.2 on gRPC (GRPC-ERR-002, the
version rule), §11.1 (REST media type) and §9.1 (a JSON-RPC request that is not JSON).
The six binding x version cells of each row: ``tests/bindings/test_spec_101.py``.
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

from apcore_a2a.classify import version_error
from tests._support import TLS
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
    response = httpx.post(
        agent.url + "/message:send", json=body, headers=V1, timeout=30, verify=TLS
    )
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["task"]
    return task


def _reason(response: httpx.Response) -> str:
    details = response.json()["error"].get("details") or [{}]
    return str(details[0].get("reason"))


# -- spec §5.4 on HTTP --------------------------------------------------------------------


def test_cancel_of_a_finished_task_is_400_on_rest(interop_agent: Target) -> None:
    task = _send_rest(interop_agent)
    response = httpx.post(
        f"{interop_agent.url}/tasks/{task['id']}:cancel", headers=V1, timeout=10, verify=TLS
    )
    assert response.status_code == 400
    assert _reason(response) == "TASK_NOT_CANCELABLE"
    assert response.headers["content-type"].startswith("application/json")


def test_cancel_of_a_finished_task_keeps_its_json_rpc_code(interop_agent: Target) -> None:
    task = _send_rest(interop_agent)
    payload = {"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task["id"]}}
    response = httpx.post(interop_agent.url + "/", json=payload, headers=V1, timeout=10, verify=TLS)
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


@pytest.mark.parametrize("metadata", [["2.0"], ["1.7"], ["0.3"], ["0"], ["banana"], []])
def test_grpc_unsupported_or_absent_version_is_refused(
    interop_agent: Target, metadata: list[str]
) -> None:
    """No ``a2a-version`` is 0.3 (spec §3.6.2), which the 1.0 service does not speak; nor
    does it speak 1.7 (§3.6.2: the request's ``Major.Minor``)."""
    error = _v1_get_task(interop_agent, [("a2a-version", v) for v in metadata])
    assert error is not None
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION  # spec §5.4
    assert _rpc_error_reason(error) == "VERSION_NOT_SUPPORTED"
    if not metadata:
        assert "A2A-Version: 1.0" in str(error.details())


@pytest.mark.parametrize("metadata", [[("a2a-version", "1.0")], [("a2a-version", "1.0.7")]])
def test_grpc_supported_version_is_served(
    interop_agent: Target, metadata: list[tuple[str, str]]
) -> None:
    error = _v1_get_task(interop_agent, metadata)
    assert error is not None and error.code() == grpc.StatusCode.NOT_FOUND  # reached the handler


def test_grpc_03_service_refuses_1_0(interop_agent: Target) -> None:
    with grpc.insecure_channel(interop_agent.grpc) as channel:
        stub = grpc03.A2AServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetTask(pb03.GetTaskRequest(name="tasks/x"), metadata=[("a2a-version", "1.0")])
        assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        for announced in ([("a2a-version", "0.3")], []):  # none is 0.3
            with pytest.raises(grpc.RpcError) as served:
                stub.GetTask(pb03.GetTaskRequest(name="tasks/x"), metadata=announced)
            assert served.value.code() == grpc.StatusCode.NOT_FOUND


def test_grpc_subscribe_to_a_finished_task_is_failed_precondition(interop_agent: Target) -> None:
    task = _send_rest(interop_agent)
    with grpc.insecure_channel(interop_agent.grpc) as channel:
        stream = grpc10.A2AServiceStub(channel).SubscribeToTask(
            pb.SubscribeToTaskRequest(id=task["id"]), metadata=[("a2a-version", "1.0")]
        )
        with pytest.raises(grpc.RpcError) as caught:
            list(stream)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert _rpc_error_reason(caught.value) == "UNSUPPORTED_OPERATION"


@pytest.fixture(scope="module")
def agent_without_push() -> Iterator[Agent]:
    with serve_agent() as running:
        yield running


def test_grpc_push_not_supported_is_failed_precondition(agent_without_push: Agent) -> None:
    with (
        grpc.insecure_channel(agent_without_push.grpc_address) as channel,
        pytest.raises(grpc.RpcError) as caught,
    ):
        grpc10.A2AServiceStub(channel).CreateTaskPushNotificationConfig(
            pb.TaskPushNotificationConfig(task_id="t", url="https://example.com/hook"),
            metadata=[("a2a-version", "1.0")],
            timeout=10,
        )
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert _rpc_error_reason(caught.value) == "PUSH_NOTIFICATION_NOT_SUPPORTED"


def test_version_rule() -> None:
    assert version_error("", "0.3") is None
    assert version_error(" 1.0.2 ".strip(), "1.0") is None  # patch numbers never count
    assert version_error("1.2", "1.0") is not None  # another Major.Minor (spec §3.6.2)
    assert version_error("0.2", "0.3") is not None
    assert version_error("0.3", "0.3") is None
    assert version_error("", "1.0") is not None  # none is 0.3 (spec §3.6.2)
    assert version_error("1.0", "0.3") is not None
    error = version_error("9" * 500, "1.0")
    # The value is echoed cut to 64 characters, with its length (_text.echoed).
    assert error is not None and "9" * 65 not in str(error.message)
    assert "… (500 characters)" in str(error.message)


# -- spec §11.1: REST media type ---------------------------------------------------------------


@pytest.mark.parametrize("accept", [None, "application/json", "*/*", "application/a2a+json"])
def test_rest_answers_are_application_a2a_json(interop_agent: Target, accept: str | None) -> None:
    """Success answers in the SDK's ``application/a2a+json`` (§11.1 SHOULD), whatever the
    caller accepts; errors as the SDK sends them (``application/json``)."""
    task = _send_rest(interop_agent)
    headers = {**V1, **({"Accept": accept} if accept else {})}
    got = httpx.get(
        f"{interop_agent.url}/tasks/{task['id']}", headers=headers, timeout=10, verify=TLS
    )
    assert got.headers["content-type"] == "application/a2a+json"
    listed = httpx.get(f"{interop_agent.url}/tasks", headers=headers, timeout=10, verify=TLS)
    assert listed.headers["content-type"] == "application/a2a+json"
    missing = httpx.get(f"{interop_agent.url}/tasks/nope", headers=headers, timeout=10, verify=TLS)
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/json"


@pytest.mark.parametrize("content_type", ["application/json", "application/a2a+json"])
def test_rest_requests_are_accepted_in_either_type(
    interop_agent: Target, content_type: str
) -> None:
    body = {
        "message": {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"text": "hi"}],
            "metadata": {"skillId": "interop.echo"},
        }
    }
    response = httpx.post(
        interop_agent.url + "/message:send",
        content=json.dumps(body),
        headers={**V1, "Content-Type": content_type},
        timeout=30,
        verify=TLS,
    )
    assert response.status_code == 200, response.text


# -- spec §9.1: a JSON-RPC request that is not JSON (refused: our CSRF protection) ------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_json_rpc_with_wrong_content_type(interop_agent: Target, content_type: str) -> None:
    payload = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}}
    response = httpx.post(
        interop_agent.url + "/",
        content=json.dumps(payload),
        headers={**V1, "Content-Type": content_type},
        timeout=10,
        verify=TLS,
    )
    assert response.status_code == 200  # a JSON-RPC error, as the SDK answers them
    error = response.json()["error"]
    assert error["code"] == -32005  # ContentTypeNotSupportedError (see docs/interop.md)
    assert error["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"


def test_rest_with_wrong_content_type_is_400(interop_agent: Target) -> None:
    response = httpx.post(
        interop_agent.url + "/message:send",
        content=b"{}",
        headers={**V1, "Content-Type": "text/plain"},
        timeout=10,
        verify=TLS,
    )
    assert response.status_code == 400
    assert _reason(response) == "CONTENT_TYPE_NOT_SUPPORTED"

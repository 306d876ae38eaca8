"""Ours answers as a plain a2a-sdk 1.3 agent in the same process (issue 41): for the rows
of A2A 1.0.1 where the SDK has an answer, the agent adds no correction of its own.

Both agents are served side by side; each request goes to both and what each answered
(HTTP status, JSON-RPC code, ``ErrorInfo`` reason, media type, gRPC status) is compared.
Where we differ on purpose (a body that is not JSON is refused: our CSRF protection; the
gRPC version rule, which the SDK's servicers lack) ``tests/bindings/test_spec_101.py``
and ``test_grpc_version.py`` say so.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc

from tests._support import TLS, threaded_server
from tests.bindings._agent import serve_agent
from tests.upstream._plain import plain_agent

V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def both() -> Iterator[dict[str, tuple[str, str]]]:
    """``{"sdk": (url, grpc address), "ours": (url, grpc address)}``."""
    app, grpc_port = plain_agent(compat=True, extended=False)  # ours without auth: none
    with threaded_server(app) as plain_url, serve_agent() as ours:
        yield {"sdk": (plain_url, f"127.0.0.1:{grpc_port}"), "ours": (ours.url, ours.grpc_address)}


def _message() -> dict[str, Any]:
    # ours routes by the skill id; the plain agent ignores it
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}],
            "metadata": {"skillId": "demo.echo"}}  # fmt: skip


def _seen(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    error = body.get("error") if isinstance(body, dict) else None
    details = (error or {}).get("details") or (error or {}).get("data") or [{}]
    return {
        "status": response.status_code,
        "type": response.headers.get("content-type"),
        "code": error and error.get("code"),
        "reason": details[0].get("reason") if isinstance(details, list) else None,
        "ok": error is None,
    }


def _answers(url: str, address: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=30, verify=TLS) as http:
        task = http.post("/message:send", json={"message": _message()}, headers=V1).json()
        task_id = task["task"]["id"]
        rpc = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "SendMessage",
            "params": {"message": _message()},
        }
        out["rest cancel finished"] = _seen(http.post(f"/tasks/{task_id}:cancel", headers=V1))
        out["rest get"] = _seen(http.get(f"/tasks/{task_id}", headers=V1))
        out["rest list"] = _seen(http.get("/tasks", headers=V1))
        out["rest unknown task"] = _seen(http.get("/tasks/nope", headers=V1))
        out["rest send, no version"] = _seen(
            http.post("/message:send", json={"message": _message()})
        )
        out["rest send, 9.9"] = _seen(
            http.post("/message:send", json={"message": _message()}, headers={"A2A-Version": "9.9"})
        )
        out["jsonrpc send, no version"] = _seen(http.post("/", json=rpc))
        out["jsonrpc send, 9.9"] = _seen(http.post("/", json=rpc, headers={"A2A-Version": "9.9"}))
        cancel = {"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": task_id}}
        out["jsonrpc cancel finished"] = _seen(http.post("/", json=cancel, headers=V1))
        card = {"jsonrpc": "2.0", "id": 5, "method": "GetExtendedAgentCard", "params": {}}
        out["jsonrpc extended card"] = _seen(http.post("/", json=card, headers=V1))
        out["rest extended card"] = _seen(http.get("/extendedAgentCard", headers=V1))
        cut = {**V1, "Content-Type": "application/json"}
        out["rest send, body not JSON"] = _seen(
            http.post("/message:send", content=b'{"message": ', headers=cut)
        )
        out["jsonrpc, body not JSON"] = _seen(http.post("/", content=b'{"jsonrpc": ', headers=cut))
        for name, value in (
            ("a number no double holds", b"1e999"),
            ("a lone surrogate", b'"\\ud800"'),
        ):
            body = b'{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": %s}]}}'
            out[f"rest send, {name}"] = _seen(
                http.post("/message:send", content=body % value, headers=cut)
            )
        legacy = {"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {"id": task_id}}
        out["jsonrpc 0.3 get, no version"] = _seen(http.post("/", json=legacy))
    with grpc.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        for name, call in {
            "grpc cancel finished": lambda: stub.CancelTask(
                pb.CancelTaskRequest(id=task_id), metadata=[("a2a-version", "1.0")], timeout=30
            ),
            "grpc push off": lambda: stub.CreateTaskPushNotificationConfig(
                pb.TaskPushNotificationConfig(task_id=task_id, url="https://example.com/h"),
                metadata=[("a2a-version", "1.0")],
                timeout=30,
            ),
        }.items():
            try:
                call()
                out[name] = "served"
            except grpc.RpcError as error:
                out[name] = error.code().name  # type: ignore[attr-defined]
    return out


def test_ours_answers_as_the_sdk_alone(both: dict[str, tuple[str, str]]) -> None:
    sdk, ours = _answers(*both["sdk"]), _answers(*both["ours"])
    assert ours == sdk
    # the rows of issue 41, as A2A 1.0.1 has them
    assert sdk["rest cancel finished"]["status"] == 400
    assert sdk["rest get"]["type"] == "application/a2a+json"
    assert sdk["rest send, no version"]["reason"] == "VERSION_NOT_SUPPORTED"
    assert sdk["jsonrpc send, no version"]["code"] == -32009
    assert sdk["grpc push off"] == "FAILED_PRECONDITION"
    # §3.3.4: no extended card declared -> UnsupportedOperationError
    assert sdk["rest extended card"]["reason"] == "UNSUPPORTED_OPERATION"
    assert sdk["rest send, body not JSON"]["reason"] == "INVALID_REQUEST"
    assert sdk["rest send, a number no double holds"]["reason"] == "INVALID_REQUEST"
    assert sdk["rest send, a lone surrogate"]["reason"] == "INVALID_REQUEST"

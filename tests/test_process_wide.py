"""Our agent changes nothing for another a2a-sdk agent in the same process (issue 30).

A plain a2a-sdk agent built before ours and one built after ours are served next to it
(JSON-RPC, REST and gRPC). Each must answer these errors (spec §5.4) exactly as the SDK
answers them alone: the SDK's statuses, codes and reasons, read from a fresh interpreter;
and so does ours (A2A 1.0.1 is the SDK's table).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc
from google.rpc import error_details_pb2, status_pb2
from starlette.applications import Starlette

from tests._support import TLS, threaded_server
from tests.bindings._agent import serve_agent
from tests.upstream._plain import plain_agent

V1 = {"A2A-Version": "1.0"}
GRPC_V1 = (("a2a-version", "1.0"),)
ERRORS = ("TaskNotCancelableError", "PushNotificationNotSupportedError")

_ALONE = """
import json
from a2a.server.request_handlers import grpc_handler
from a2a.utils import errors as e
out = {}
for name in NAMES:
    cls = getattr(e, name)
    m = e.A2A_ERROR_MAPPING[cls]
    out[name] = {"code": e.JSON_RPC_ERROR_CODE_MAP[cls], "http": m.http_code,
                 "status": m.grpc_status, "reason": m.reason,
                 "grpc": grpc_handler._ERROR_CODE_MAP[cls].name}
print(json.dumps(out))
"""


def _alone() -> dict[str, Any]:
    """How the SDK answers these errors in a process where nothing else was built."""
    done = subprocess.run(
        [sys.executable, "-c", f"NAMES = {ERRORS!r}\n{_ALONE}"],
        capture_output=True,
        text=True,
        check=True,
    )
    answers: dict[str, Any] = json.loads(done.stdout)
    return answers


def _grpc_answer(call: Any) -> dict[str, str]:
    try:
        call()
    except grpc.RpcError as error:
        reason = ""
        for key, value in error.trailing_metadata() or ():  # type: ignore[attr-defined]
            if key == "grpc-status-details-bin":
                for detail in status_pb2.Status.FromString(value).details:
                    info = error_details_pb2.ErrorInfo()
                    if detail.Unpack(info):
                        reason = info.reason
        return {"grpc": error.code().name, "reason": reason}  # type: ignore[attr-defined]
    raise AssertionError("the call succeeded")


def _answers(url: str, grpc_port: int) -> dict[str, Any]:
    """What the agent at *url* answers for each of ERRORS, per binding."""
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": "hi"}],
        "metadata": {"skillId": "demo.echo"},  # ours routes by it; the plain agent ignores it
    }
    sent = httpx.post(
        url + "/message:send", json={"message": message}, headers=V1, timeout=30, verify=TLS
    ).json()
    task_id = sent["task"]["id"]
    calls: dict[str, tuple[str, str, dict[str, Any], Any]] = {
        "TaskNotCancelableError": (
            "CancelTask",
            f"/tasks/{task_id}:cancel",
            {"id": task_id},
            lambda stub: stub.CancelTask(
                pb.CancelTaskRequest(id=task_id), timeout=10, metadata=GRPC_V1
            ),
        ),
        "PushNotificationNotSupportedError": (
            "CreateTaskPushNotificationConfig",
            f"/tasks/{task_id}/pushNotificationConfigs",
            {"taskId": task_id, "url": "https://example.com/hook"},
            lambda stub: stub.CreateTaskPushNotificationConfig(
                pb.TaskPushNotificationConfig(task_id=task_id, url="https://example.com/hook"),
                timeout=10,
                metadata=GRPC_V1,
            ),
        ),
    }
    out: dict[str, Any] = {}
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        for name, (method, path, params, grpc_call) in calls.items():
            rpc = httpx.post(
                url + "/",
                json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                headers=V1,
                timeout=10,
                verify=TLS,
            ).json()["error"]
            rest = httpx.post(url + path, json=params, headers=V1, timeout=10, verify=TLS)
            body = rest.json()["error"]
            out[name] = {
                "jsonrpc": {"code": rpc["code"], "reason": rpc["data"][0]["reason"]},
                "rest": {
                    "http": rest.status_code,
                    "code": body["code"],
                    "status": body["status"],
                    "reason": body["details"][0]["reason"],
                },
                "grpc": _grpc_answer(lambda call=grpc_call: call(stub)),
            }
    return out


def _expected(alone: dict[str, Any]) -> dict[str, Any]:
    return {
        name: {
            "jsonrpc": {"code": a["code"], "reason": a["reason"]},
            "rest": {
                "http": a["http"],
                "code": a["http"],
                "status": a["status"],
                "reason": a["reason"],
            },
            "grpc": {"grpc": a["grpc"], "reason": a["reason"]},
        }
        for name, a in alone.items()
    }


@contextlib.contextmanager
def _served(app: Starlette) -> Iterator[str]:
    with threaded_server(app) as url:
        yield url


def test_a_plain_sdk_agent_answers_as_alone_before_and_after_ours() -> None:
    expected = _expected(_alone())
    before, before_grpc = plain_agent()
    with _served(before) as before_url:
        assert _answers(before_url, before_grpc) == expected
        with serve_agent() as ours:
            # ours answers as the SDK does (spec 1.0.1 §5.4: REST 400, FAILED_PRECONDITION)...
            port = int(ours.grpc_address.rsplit(":", 1)[1])
            assert _answers(ours.url, port) == expected
            after, after_grpc = plain_agent()
            with _served(after) as after_url:
                # ...and the agents built before and after it still answer as the SDK does.
                assert _answers(before_url, before_grpc) == expected
                assert _answers(after_url, after_grpc) == expected

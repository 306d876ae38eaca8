"""``ListTasks`` under attack, on every store: another caller's page token, forged and
garbled tokens, page sizes out of range. Each is answered with a page of the caller's own
tasks or a typed invalid-params error (JSON-RPC -32602, REST 400, gRPC
``INVALID_ARGUMENT``), never another caller's task, never an internal error; the stored
tasks stay as they were. A2A 0.3 has no ``ListTasks``; a token past ``max_body_bytes``
is refused for its size.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2

from .._support import TLS, cli_server, free_port
from ..bindings._grpc import stubs
from ._a2a import EXTENSIONS

A = {"X-API-Key": "key-a", "A2A-Version": "1.0"}
B = {"X-API-Key": "key-b", "A2A-Version": "1.0"}


def _rpc(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _send() -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
               "parts": [{"data": {"a": 1, "b": 2}}], "metadata": {"skillId": "math.add"}}  # fmt: skip
    return _rpc("SendMessage", message=message)


def _token(payload: object) -> str:
    """A page token as the SDK encodes one (URL-safe base64 of JSON, unpadded)."""
    raw = json.dumps(payload, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _nested(depth: int) -> str:
    """A token whose JSON is *depth* arrays, one inside the other."""
    raw = b"[" * depth + b"]" * depth
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _legacy(task_id: str) -> str:
    """A page token of the SDK's older form: the first task of the page, in base64."""
    return base64.b64encode(task_id.encode()).decode()


def _refused(answer: dict[str, Any], name: object = "") -> bool:
    """Whether *answer* is an invalid-params error that gives nothing away."""
    error = answer.get("error")
    if error is None:
        return False
    assert error["code"] == -32602, (name, answer)
    assert "Traceback" not in json.dumps(answer) and "/" not in error["message"], answer
    return True


async def _grpc_page(address: str, token: str, name: object) -> list[str] | None:
    """The ids of the gRPC 1.0 page after *token* (caller B), ``None`` if invalid params."""
    async with stubs(address) as (v1, _v03):
        try:
            page = await v1.ListTasks(
                a2a_pb2.ListTasksRequest(page_size=2, page_token=token),
                metadata=(("x-api-key", "key-b"),),
            )
        except grpc.aio.AioRpcError as failed:
            refused = (failed.code(), "Traceback" in (failed.details() or ""))
        else:
            return [task.id for task in page.tasks]
    assert refused == (grpc.StatusCode.INVALID_ARGUMENT, False), (name, refused)
    return None


async def _all(http: httpx.AsyncClient, headers: dict[str, str]) -> list[str]:
    answer = (await http.post("/", json=_rpc("ListTasks", pageSize=100), headers=headers)).json()
    return [task["id"] for task in answer["result"]["tasks"]]


async def test_tokens_and_sizes_give_the_callers_tasks_or_invalid_params(store_url: str) -> None:
    grpc_port = free_port()
    args = ["--extensions-dir", EXTENSIONS, "--task-store", store_url, "--log-level",
            "warning", "--api-key", "key-a=a", "--api-key", "key-b=b",
            "--grpc-port", str(grpc_port)]  # fmt: skip
    address = f"127.0.0.1:{grpc_port}"
    with cli_server(args) as (base, server):
        async with httpx.AsyncClient(base_url=base, timeout=60, verify=TLS) as http:
            for headers, count in ((A, 5), (B, 3)):
                for _ in range(count):
                    answer = (await http.post("/", json=_send(), headers=headers)).json()
                    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            theirs, mine = await _all(http, A), await _all(http, B)
            assert len(theirs) == 5 and len(mine) == 3
            first = (await http.post("/", json=_rpc("ListTasks", pageSize=2), headers=A)).json()
            their_token = first["result"]["nextPageToken"]

            tokens = {
                "another caller's": their_token,
                "naming another caller's task": _token({"ts": 2**62, "id": theirs[0]}),
                "older form, another caller's task": _legacy(theirs[0]),
                "older form, no task": _legacy("no-such-task"),
                "not base64": "%%%not-a-token%%%",
                "base64, not JSON": base64.b64encode(b"\xff\xfe\x00").decode(),
                "time out of range": _token({"ts": 10**30, "id": "x"}),
                "time before year 1": _token({"ts": -(10**30), "id": "x"}),
                "time not a number": _token({"ts": "soon", "id": "x"}),
                "no id": _token({"ts": 1, "id": ""}),
                "long, older form of NULs": "A" * 4000,
                "id with a NUL": _token({"ts": 1, "id": "a\u0000b"}),
                "id with a lone surrogate": _token({"ts": 1, "id": "\ud800"}),
                # The SDK's decoder failed on it (RecursionError): -32603 / HTTP 500.
                "JSON nested deeper than Python decodes": _nested(3000),
                "JSON nested 33 deep": _nested(33),
                "a cursor in deep JSON": _token({"ts": [[[[[[[[[[[[1]]]]]]]]]]]] * 3, "id": "x"}),
                "brackets inside the id": _token({"ts": 1, "id": "[" * 5000}),
                "an unterminated string": base64.urlsafe_b64encode(b'"\\"' * 5000).decode(),
                "NUL": "\x00",
                "512 KiB": "A" * (512 * 1024),
            }
            tokens |= {f"nested {depth} deep": _nested(depth) for depth in range(900, 1001, 7)}
            for name, token in tokens.items():
                body = _rpc("ListTasks", pageSize=2, pageToken=token)
                answer = (await http.post("/", json=body, headers=B)).json()
                if not _refused(answer, name):
                    listed = {task["id"] for task in answer["result"]["tasks"]}
                    assert listed <= set(mine), f"{name} token: {answer}"
                on_grpc = await _grpc_page(address, token, name)
                assert on_grpc is None if "error" in answer else set(on_grpc) <= set(mine), name

            # 10 MB: refused for its size (max_body_bytes), on JSON-RPC and gRPC alike
            huge = "A" * (10 << 20)
            reply = await http.post("/", json=_rpc("ListTasks", pageToken=huge), headers=B)
            assert reply.status_code == 413, reply.text
            async with stubs(address) as (v1, _v03):
                with pytest.raises(grpc.aio.AioRpcError) as too_large:
                    await v1.ListTasks(a2a_pb2.ListTasksRequest(page_token=huge),
                                       metadata=(("x-api-key", "key-b"),))  # fmt: skip
            assert too_large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, too_large.value
            # A2A 0.3 has no ListTasks: method not found, whatever the token
            body = _rpc("tasks/list", pageToken=_nested(3000))
            answer = (await http.post("/", json=body, headers={"X-API-Key": "key-b"})).json()
            assert answer["error"]["code"] == -32601, answer

            for size in (0, -1, 101, 2**31, 10**12, "ten"):
                body = _rpc("ListTasks", pageSize=size)
                assert _refused((await http.post("/", json=body, headers=B)).json(), size), size

            for query in ({"pageToken": "%%%"}, {"pageToken": _legacy(theirs[0])},
                          {"pageToken": _nested(3000)}, {"pageToken": _nested(950)},
                          {"pageToken": "\x00"}, {"pageSize": "-1"},
                          {"pageSize": "101"}):  # fmt: skip
                reply = await http.get("/tasks", params=query, headers=B)
                assert reply.status_code == 400, (query, reply.text)
                assert "Traceback" not in reply.text

            assert await _all(http, A) == theirs and await _all(http, B) == mine
    assert "Traceback" not in server.output()

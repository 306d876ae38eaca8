"""An enum number A2A does not define is invalid params, on every binding.

a2a-sdk parses A2A's enums as open proto3 enums: a message with ``"role": 7`` became a
task whose history answered ``"role": 7`` (no A2A value), and ``ListTasks`` with
``"status": 99`` on a database store answered an internal error (``-32603`` / 500 /
``INTERNAL``: the store names the state). Now each is refused before anything is stored:
``-32602`` / 400 ``INVALID_ARGUMENT`` / ``INVALID_ARGUMENT``, naming the enum.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import a2a_pb2 as pb

from tests._support import TLS
from tests.bindings._agent import Agent, serve_agent
from tests.bindings._grpc import stubs

V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    path: Path = tmp_path_factory.mktemp("enums") / "tasks.db"
    with serve_agent(task_store=f"sqlite:///{path}") as running:
        yield running


def _message(role: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": role, "parts": [{"text": "hi"}],
            "metadata": {"skillId": "demo.echo"}}  # fmt: skip


async def _list_tasks(http: httpx.AsyncClient) -> list[Any]:
    call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    listed = (await http.post("/", json=call, headers=V1)).json()
    return list(listed["result"]["tasks"])


async def test_a_role_no_a2a_version_defines_is_refused(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        before = await _list_tasks(http)
        call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": _message(7)}}  # fmt: skip
        rpc = (await http.post("/", json=call, headers=V1)).json()
        rest = await http.post("/message:send", json={"message": _message(7)}, headers=V1)
        async with stubs(agent.grpc_address) as (v1, _v03):
            request = pb.SendMessageRequest()
            request.message.message_id, request.message.role = uuid.uuid4().hex, 7  # type: ignore[assignment]
            request.message.parts.add(text="hi")
            request.message.metadata.update({"skillId": "demo.echo"})
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await v1.SendMessage(request, timeout=30)
        after = await _list_tasks(http)
        served = (await http.post("/", json={**call, "params": {"message": _message("ROLE_USER")}},
                                  headers=V1)).json()  # fmt: skip
    assert rpc["error"]["code"] == -32602 and "Role" in str(rpc["error"]), rpc
    assert (rest.status_code, rest.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    assert after == before  # nothing stored
    assert served["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_task_state_no_a2a_version_defines_is_refused(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": 99}}
        rpc = await http.post("/", json=call, headers=V1)
        rest = await http.get("/tasks", params={"status": "99"}, headers=V1)
        known = await http.get("/tasks", params={"status": "TASK_STATE_WORKING"}, headers=V1)
        async with stubs(agent.grpc_address) as (v1, _v03):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await v1.ListTasks(pb.ListTasksRequest(status=99), timeout=30)  # type: ignore[arg-type]
    assert rpc.json()["error"]["code"] == -32602, rpc.text  # main: -32603 Internal error
    assert "TaskState" in rpc.json()["error"]["message"] + str(rpc.json()["error"].get("data"))
    assert (rest.status_code, rest.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
    assert known.status_code == 200

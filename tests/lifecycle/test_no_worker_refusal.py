"""A sync module's call that never got a worker thread is refused, to be retried.

The caller's share of ``sync_workers`` (``sync_workers_per_caller``) is held by its own
call of ``life.hold``, which outlives ``execution_timeout`` (a thread cannot be stopped).
Its next call waits for a thread of its own until ``execution_timeout``; it then gets the
agent's quota refusal -- JSON-RPC -32091, HTTP 429 + ``Retry-After``, gRPC
``RESOURCE_EXHAUSTED``, in A2A 1.0 and 0.3 -- not ``MODULE_TIMEOUT`` (which says the
module ran too long), and its task ends ``rejected``, never left ``working``. Its module
never runs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb2_v03
from google.protobuf.struct_pb2 import Struct

from tests._sdk import request

from .._support import TLS, free_port
from ..bindings._grpc import rich_status, stubs
from ._agent import Agent, agent_server
from ._client import V03, V1, rpc, wire_message, wire_message_03

REFUSAL = "No sync worker thread came free for this call within execution_timeout"


async def _holding(http: httpx.AsyncClient, agent: Agent) -> str:
    """Start a ``life.hold`` call (answered at once) and wait until it holds a thread."""
    body = rpc(
        "SendMessage",
        {"message": wire_message("life.hold", {}), "configuration": {"returnImmediately": True}},
    )
    held = (await http.post("/", json=body, headers=V1)).json()["result"]["task"]["id"]
    deadline = time.monotonic() + 30
    while agent.probe.running < 1:
        assert time.monotonic() < deadline, "life.hold never started"
        await asyncio.sleep(0.01)
    return str(held)


def _grpc_03() -> pb2_v03.SendMessageRequest:
    """A 0.3 gRPC ``life.hold`` call."""
    metadata = Struct()
    metadata.update({"skillId": "life.hold"})
    part = pb2_v03.Part(data=pb2_v03.DataPart(data=Struct()))
    held = pb2_v03.Message(message_id="m", role=pb2_v03.ROLE_USER, content=[part])
    held.metadata.CopyFrom(metadata)
    return pb2_v03.SendMessageRequest(request=held)


async def _refused(binding: str, http: httpx.AsyncClient, grpc_port: int) -> str:
    """A blocking ``life.hold`` call over *binding*, which must be refused: its message."""
    message = wire_message("life.hold", {})
    if binding == "JSONRPC 0.3":
        body = rpc("message/send", {"message": wire_message_03("life.hold", {})})
        error = (await http.post("/", json=body, headers=V03)).json()["error"]
        assert (error["code"], error["data"]["retryAfter"]) == (-32091, "1"), error
        return str(error["message"])
    if binding == "HTTP+JSON 0.3":
        held = {"messageId": "m", "role": "ROLE_USER", "content": [{"data": {"data": {}}}]}
        body = {"request": {**held, "metadata": {"skillId": "life.hold"}}}
        answer = await http.post("/v1/message:send", json=body, headers=V03)
        assert (answer.status_code, answer.headers.get("retry-after")) == (429, "1"), answer.text
        return str(answer.json()["error"]["message"])
    if binding == "JSONRPC":
        answer = await http.post("/", json=rpc("SendMessage", {"message": message}), headers=V1)
        error = answer.json()["error"]
        assert error["code"] == -32091, error
        (info,) = error["data"]
        assert (info["reason"], info["metadata"]["retryAfter"]) == ("QUOTA_EXCEEDED", "1")
        return str(error["message"])
    if binding == "HTTP+JSON":
        answer = await http.post("/message:send", json={"message": message}, headers=V1)
        assert answer.status_code == 429, answer.text
        assert answer.headers["retry-after"] == "1"
        error = answer.json()["error"]
        assert (error["status"], error["details"][0]["reason"]) == (
            "RESOURCE_EXHAUSTED",
            "QUOTA_EXCEEDED",
        )
        return str(error["message"])
    async with stubs(f"127.0.0.1:{grpc_port}") as (v1, v03):
        call = (
            v1.SendMessage(request("life.hold", {}))
            if binding == "GRPC"
            else v03.SendMessage(_grpc_03())
        )
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await call
    status: dict[str, Any] = rich_status(failed.value)
    assert (status["code"], status["reason"]) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
    )
    return str(status["message"])


@pytest.mark.parametrize(
    "binding", ["JSONRPC", "HTTP+JSON", "GRPC", "JSONRPC 0.3", "HTTP+JSON 0.3", "GRPC 0.3"]
)
async def test_a_call_that_never_got_a_worker_is_refused_to_retry_and_its_task_rejected(
    binding: str, caplog: pytest.LogCaptureFixture
) -> None:
    grpc_port = free_port()
    settings: dict[str, Any] = {"sync_workers": 2, "sync_workers_per_caller": 1}
    async with (
        agent_server(caplog, grpc_port=grpc_port, execution_timeout=1.0, **settings) as agent,
        httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http,
    ):
        try:
            held = await _holding(http, agent)
            message = await _refused(binding, http, grpc_port)
            listed = await http.post("/", json=rpc("ListTasks", {}), headers=V1)
            tasks = {t["id"]: t for t in listed.json()["result"]["tasks"]}
            assert agent.probe.peak == 1  # the refused call's module never ran
        finally:
            agent.probe.release.set()
    assert message.startswith(REFUSAL), message  # 0.3 gRPC too: no class name before it
    refused = [t for task_id, t in tasks.items() if task_id != held]
    assert [t["status"]["state"] for t in refused] == ["TASK_STATE_REJECTED"]
    (text, data) = refused[0]["status"]["message"]["parts"]
    assert message.endswith(text["text"])
    assert data["data"]["code"] == "QUOTA_EXCEEDED"
    # The holding call itself ran too long: that one is a timeout.
    assert tasks[held]["status"]["state"] == "TASK_STATE_FAILED"

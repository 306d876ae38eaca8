"""A sync module's call that never got a worker thread is refused, to be retried.

The caller's share of ``sync_workers`` (``sync_workers_per_caller``) is held by its own
call of ``life.hold``, which outlives ``execution_timeout`` (a thread cannot be stopped).
Its next call waits for a thread of its own until ``execution_timeout``; it then gets the
agent's quota refusal -- JSON-RPC -32091, HTTP 429 + ``Retry-After``, gRPC
``RESOURCE_EXHAUSTED`` -- not ``MODULE_TIMEOUT`` (which says the module ran too long),
and its task ends ``rejected``, never left ``working``. Its module never runs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest

from tests._sdk import request

from .._support import free_port
from ..bindings._grpc import rich_status, stubs
from ._agent import Agent, agent_server
from ._client import V1, rpc, wire_message

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


async def _refused(binding: str, http: httpx.AsyncClient, grpc_port: int) -> str:
    """A blocking ``life.hold`` call over *binding*, which must be refused: its message."""
    message = wire_message("life.hold", {})
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
    async with stubs(f"127.0.0.1:{grpc_port}") as (v1, _):
        sent: SendMessageRequest = request("life.hold", {})
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await v1.SendMessage(sent)
    status: dict[str, Any] = rich_status(failed.value)
    assert (status["code"], status["reason"]) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
    )
    return str(status["message"])


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_call_that_never_got_a_worker_is_refused_to_retry_and_its_task_rejected(
    binding: str, caplog: pytest.LogCaptureFixture
) -> None:
    grpc_port = free_port()
    settings: dict[str, Any] = {"sync_workers": 2, "sync_workers_per_caller": 1}
    async with (
        agent_server(caplog, grpc_port=grpc_port, execution_timeout=1.0, **settings) as agent,
        httpx.AsyncClient(base_url=agent.url, timeout=30) as http,
    ):
        try:
            held = await _holding(http, agent)
            message = await _refused(binding, http, grpc_port)
            listed = await http.post("/", json=rpc("ListTasks", {}), headers=V1)
            tasks = {t["id"]: t for t in listed.json()["result"]["tasks"]}
            assert agent.probe.peak == 1  # the refused call's module never ran
        finally:
            agent.probe.release.set()
    assert message.startswith(REFUSAL), message
    refused = [t for task_id, t in tasks.items() if task_id != held]
    assert [t["status"]["state"] for t in refused] == ["TASK_STATE_REJECTED"]
    (text, data) = refused[0]["status"]["message"]["parts"]
    assert text["text"] == message
    assert data["data"]["code"] == "QUOTA_EXCEEDED"
    # The holding call itself ran too long: that one is a timeout.
    assert tasks[held]["status"]["state"] == "TASK_STATE_FAILED"

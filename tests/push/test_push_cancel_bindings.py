"""A cancel is pushed once whichever binding it comes on (JSON-RPC, REST, gRPC): the cancel
call pushes what its own save wrote (a task parked here, a task another replica runs),
and never again the canceled status that the task's run here saves and pushes itself (the
SDK saves that status with the cancel call's context, from the run's own asyncio task)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import CancelTaskRequest, TaskState

from .._postgres import store_url
from .._support import TLS, free_port, running_server
from ..bindings._grpc import stubs
from ._agent import V1, push_agent, push_app, receiver, rpc
from ._agent import skill_message as message
from .test_push_versions import _gated_task

BINDINGS = ["jsonrpc", "rest", "grpc"]


def _canceled_pushes(rec: Any) -> int:
    """How many ``canceled`` status updates reached the receiver's ``/x``."""
    states = [
        json.loads(d.body)["statusUpdate"]["status"]["state"]
        for d in rec.accepted("/x")
        if b"statusUpdate" in d.body
    ]
    return states.count("TASK_STATE_CANCELED")


async def _cancel(
    binding: str, client: httpx.AsyncClient, base: str, grpc_port: int, task_id: str
) -> str:
    """Cancel *task_id* on *binding* (A2A 1.0); the state the answer names."""
    if binding == "jsonrpc":
        reply = await rpc(client, base, "CancelTask", {"id": task_id})
        return str(reply["result"]["status"]["state"])
    if binding == "rest":
        response = await client.post(f"{base}/tasks/{task_id}:cancel", headers=V1)
        assert response.status_code == 200, response.text
        return str(response.json()["status"]["state"])
    async with stubs(f"127.0.0.1:{grpc_port}") as (v1, _v03):
        task = await v1.CancelTask(CancelTaskRequest(id=task_id))
    return TaskState.Name(task.status.state)


async def _configured(client: httpx.AsyncClient, base: str, task_id: str, url: str) -> None:
    config = {"taskId": task_id, "id": "x", "url": url}
    reply = await rpc(client, base, "CreateTaskPushNotificationConfig", config)
    assert "result" in reply, reply


async def _working(client: httpx.AsyncClient, base: str, task_id: str) -> None:
    """Until the run has started (its module waits at its gate)."""
    while True:
        got = await rpc(client, base, "GetTask", {"id": task_id})
        if got["result"]["status"]["state"] == "TASK_STATE_WORKING":
            return
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _clients() -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    async with receiver() as rec, httpx.AsyncClient(timeout=10, verify=TLS) as client:
        yield rec, client


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_cancel_of_a_running_task_is_pushed_once(binding: str) -> None:
    """The run here saves and pushes ``canceled``; the cancel call adds no push of it."""
    grpc_port = free_port()
    async with _clients() as (rec, client), push_agent(grpc_port=grpc_port) as (base, app):
        task_id, gate = await _gated_task(client, base)
        await _configured(client, base, task_id, rec.url("/x"))
        await _working(client, base, task_id)
        assert await _cancel(binding, client, base, grpc_port, task_id) == "TASK_STATE_CANCELED"
        await rec.wait_for(lambda: _canceled_pushes(rec) > 0)
        gate.set()
        await app.state.a2a.extras["push"].sender.idle()
    assert _canceled_pushes(rec) == 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_cancel_of_a_parked_task_is_pushed_once(binding: str) -> None:
    """No run is left to push: the cancel call's own save is pushed."""
    grpc_port = free_port()
    async with _clients() as (rec, client), push_agent(grpc_port=grpc_port) as (base, app):
        reply = await rpc(client, base, "SendMessage", {"message": message("demo.transfer", 3)})
        task_id = reply["result"]["task"]["id"]
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        await _configured(client, base, task_id, rec.url("/x"))
        assert await _cancel(binding, client, base, grpc_port, task_id) == "TASK_STATE_CANCELED"
        await rec.wait_for(lambda: _canceled_pushes(rec) > 0)
        await app.state.a2a.extras["push"].sender.idle()
    assert _canceled_pushes(rec) == 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_cancel_of_a_task_another_replica_runs_is_pushed_once(
    binding: str, tmp_path: Path
) -> None:
    """Replica B writes the cancel of A's task and pushes it; A's run ends without a push."""
    grpc_port = free_port()
    async with store_url("sqlite", tmp_path, agents=2) as url:
        a = push_app(task_store=url, cluster=True)
        b = push_app(task_store=url, cluster=True, grpc_port=grpc_port)
        async with (
            _clients() as (rec, client),
            running_server(a) as base_a,
            running_server(b) as base_b,
        ):
            task_id, gate = await _gated_task(client, base_a)
            await _configured(client, base_b, task_id, rec.url("/x"))
            await _working(client, base_b, task_id)
            state = await _cancel(binding, client, base_b, grpc_port, task_id)
            assert state == "TASK_STATE_CANCELED"
            await rec.wait_for(lambda: _canceled_pushes(rec) > 0)
            gate.set()
            for app in (a, b):
                await app.state.a2a.extras["push"].sender.idle()
    assert _canceled_pushes(rec) == 1

"""A cancel that meets the run's result answers ``TaskNotCancelableError`` on every binding.

The race made to happen every time: the task's result is being saved (the application's own
store holds that save) when a cancel reads the task, still working, and asks its run to
stop; the store lets the result through once the cancel has read. A2A 1.0.1 §3.1.5 and its
error table: the task is not cancelable, -32002 / HTTP 400 / ``FAILED_PRECONDITION``. Before
(a2a-sdk 1.3's handler), every binding answered success with the ``COMPLETED`` task.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import grpc
import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import CancelTaskRequest, Task, TaskState
from apcore import Registry

from apcore_a2a import A2AServerFactory
from tests._modules import Add
from tests._support import TLS, free_port, running_server
from tests.bindings._grpc import failure, stubs

V1 = {"A2A-Version": "1.0"}


class _HeldResult(InMemoryTaskStore):
    """Holds the save of a completed task until the test lets it through; notes a read of
    the task while it waits."""

    def __init__(self) -> None:
        super().__init__()
        self.holding, self.read, self.through = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if task.status.state == TaskState.TASK_STATE_COMPLETED and not self.through.is_set():
            self.holding.set()
            await self.through.wait()
        await super().save(task, context)

    async def get(self, task_id: str, context: ServerCallContext, **kwargs: Any) -> Task | None:
        if self.holding.is_set() and not self.through.is_set():
            self.read.set()
        return await super().get(task_id, context, **kwargs)


async def _cancel(
    binding: str, http: httpx.AsyncClient, base: str, grpc_port: int, task_id: str
) -> Any:
    """What a cancel of *task_id* on *binding* answers: (status or code, A2A error code or
    reason, state of a task answered)."""
    if binding == "grpc":
        async with stubs(f"127.0.0.1:{grpc_port}") as (v1, _v03):
            call = v1.CancelTask(CancelTaskRequest(id=task_id))
            try:
                task = await call
            except grpc.aio.AioRpcError:
                error = await failure(call)
                return error.code(), None, None
            return grpc.StatusCode.OK, None, TaskState.Name(task.status.state)
    if binding == "rest":
        r = await http.post(f"{base}/tasks/{task_id}:cancel", headers=V1)
        body = r.json()
        state = body.get("status", {}).get("state")
        return r.status_code, body.get("error", {}).get("status"), state
    method, headers = ("CancelTask", V1) if binding == "jsonrpc" else ("tasks/cancel", {})
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": task_id}}
    answer = (await http.post(base + "/", json=body, headers=headers)).json()
    result = answer.get("result") or {}
    return 200, answer.get("error", {}).get("code"), (result.get("status") or {}).get("state")


@pytest.mark.parametrize("binding", ["jsonrpc", "rest", "grpc", "jsonrpc-0.3"])
async def test_a_cancel_that_meets_the_result_is_not_cancelable(binding: str) -> None:
    registry = Registry()
    registry.register("math.add", Add())
    store = _HeldResult()
    port, grpc_port = free_port(), free_port()
    app, _card = A2AServerFactory(
        registry, environ={}, port=port, grpc_port=grpc_port, task_store=store
    ).create()
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
               "parts": [{"data": {"a": 2, "b": 3}}], "metadata": {"skillId": "math.add"}}  # fmt: skip
    send = {"message": message, "configuration": {"returnImmediately": True}}
    async with (
        running_server(app, port=port) as base,
        httpx.AsyncClient(timeout=30, verify=TLS) as http,
    ):
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send}
        task_id = (await http.post(base + "/", json=body, headers=V1)).json()["result"]["task"][
            "id"
        ]
        await store.holding.wait()  # the result is on its way; the task is stored working
        cancel = asyncio.create_task(_cancel(binding, http, base, grpc_port, task_id))
        await store.read.wait()  # the cancel read it working
        store.through.set()
        answered = await cancel
        expected = {
            "jsonrpc": (200, -32002, None),
            "jsonrpc-0.3": (200, -32002, None),
            "rest": (400, "FAILED_PRECONDITION", None),
            "grpc": (grpc.StatusCode.FAILED_PRECONDITION, None, None),
        }
        assert answered == expected[binding]
        got = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        stored = (await http.post(base + "/", json=got, headers=V1)).json()["result"]
        assert stored["status"]["state"] == "TASK_STATE_COMPLETED"  # its result is kept

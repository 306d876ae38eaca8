"""SubscribeToTask / tasks/resubscribe: current task first, then live events."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from tests._sdk import request

from ._agent import Agent
from ._client import (
    V03,
    V1,
    collect,
    parts_data,
    rpc,
    sdk_client,
    sse_post,
    summarize,
    wire_message,
)


async def _start(client: Any, skill: str, data: dict[str, Any]) -> str:
    async for response in client.send_message(request(skill, data, return_immediately=True)):
        return str(response.task.id)
    raise AssertionError("no task")


@pytest.mark.parametrize(
    ("binding", "version"), [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")]
)
async def test_resubscribe_to_active_task_gets_current_task_then_live_events(
    agent: Agent, binding: str, version: str
) -> None:
    client = await sdk_client(agent.url, binding, version)
    try:
        task_id = await _start(client, "life.count", {"count": 6, "delay": 0.1})
        await asyncio.sleep(0.15)
        events = await collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        summary = [summarize(e) for e in events]
        assert summary[0] in (("task", "SUBMITTED"), ("task", "WORKING"))
        assert events[0].task.id == task_id
        assert summary[-2:] == [("artifact", True, True), ("status", "COMPLETED")]
        assert set(summary[1:-2]) <= {("artifact", True, False), ("status", "WORKING")}
        # Snapshot chunks plus live chunks add up to the whole stream, each exactly once.
        seen = [parts_data(a.parts) for a in events[0].task.artifacts]
        chunks = [p for parts in seen for p in parts]
        chunks += [
            p
            for e in events[1:]
            if e.HasField("artifact_update")
            for p in parts_data(e.artifact_update.artifact.parts)
        ]
        assert chunks == [{"n": n} for n in range(1, 7)] + [{"done": True}]
    finally:
        await client.close()


async def test_resubscribe_errors_for_terminal_and_unknown(agent: Agent) -> None:
    client = await sdk_client(agent.url)
    try:
        done = await collect(client.send_message(request("life.echo", {"text": "x"})))
        task_id = done[0].task.id
        # A2A 1.0 (3.1.6): a task in a terminal state cannot be subscribed to.
        with pytest.raises(UnsupportedOperationError):
            await collect(client.subscribe(SubscribeToTaskRequest(id=task_id)))
        with pytest.raises(TaskNotFoundError):
            await collect(client.subscribe(SubscribeToTaskRequest(id="no-such-task")))
    finally:
        await client.close()
    async with httpx.AsyncClient() as http:
        _, [terminal] = await sse_post(
            http, agent.url + "/", rpc("SubscribeToTask", {"id": task_id}), V1
        )
        assert terminal["error"]["code"] == -32004
        assert "terminal state" in terminal["error"]["message"]
        _, [unknown] = await sse_post(
            http, agent.url + "/", rpc("tasks/resubscribe", {"id": "nope"}), V03
        )
        assert unknown["error"]["code"] == -32001


async def test_v03_resubscribe_wire(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url) as http:
        sent = await http.post(
            "/",
            json=rpc(
                "SendMessage",
                {
                    "message": wire_message("life.count", {"count": 4, "delay": 0.1}),
                    "configuration": {"returnImmediately": True},
                },
            ),
            headers=V1,
        )
        task_id = sent.json()["result"]["task"]["id"]
        _, events = await sse_post(
            http, agent.url + "/", rpc("tasks/resubscribe", {"id": task_id}), V03
        )
    results = [e["result"] for e in events]
    assert results[0]["kind"] == "task" and results[0]["id"] == task_id
    assert results[-1]["kind"] == "status-update"
    assert results[-1]["status"]["state"] == "completed" and results[-1]["final"] is True
    assert {r["kind"] for r in results[1:-1]} <= {"artifact-update", "status-update"}


async def test_every_open_stream_receives_the_cancel(agent: Agent) -> None:
    first = await sdk_client(agent.url)
    second = await sdk_client(agent.url)
    canceller = await sdk_client(agent.url, streaming=False)
    try:
        origin: list[Any] = []
        joined = asyncio.Event()

        async def original() -> None:
            async for event in first.send_message(request("life.gate", {})):
                origin.append(event)
                if len(origin) == 2:
                    joined.set()

        reader = asyncio.create_task(original())
        await asyncio.wait_for(joined.wait(), 5)
        task_id = origin[0].task.id

        async def resubscribe() -> list[Any]:
            return await collect(second.subscribe(SubscribeToTaskRequest(id=task_id)))

        follower = asyncio.create_task(resubscribe())
        await asyncio.sleep(0.2)
        canceled = await canceller.cancel_task(CancelTaskRequest(id=task_id))
        assert parts_data(canceled.status.message.parts) == ["Canceled by client"]
        await asyncio.wait_for(reader, 5)
        follow = await asyncio.wait_for(follower, 5)
        assert [summarize(e) for e in origin] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("status", "CANCELED"),
        ]
        assert [summarize(e) for e in follow] == [("task", "WORKING"), ("status", "CANCELED")]
    finally:
        for client in (first, second, canceller):
            await client.close()

"""SubscribeToTask / tasks/resubscribe: current task first, then live events."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from tests._sdk import request
from tests._support import TLS

from ._agent import Agent, agent_server
from ._client import (
    V03,
    V1,
    collect,
    parts_data,
    rpc,
    sdk_client,
    sse_events,
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
        task_id, events = await _subscribed_midway(agent, client)
        summary = [summarize(e) for e in events]
        assert summary[0] == ("task", "WORKING")
        assert events[0].task.id == task_id
        assert summary[-2:] == [("artifact", True, True), ("status", "COMPLETED")]
        assert set(summary[1:-2]) <= {("artifact", True, False), ("status", "WORKING")}
        # Snapshot chunks plus live chunks add up to the whole stream, each exactly once.
        seen = [parts_data(a.parts) for a in events[0].task.artifacts]
        assert seen == [[{"n": 1}, {"n": 2}]]
        chunks = [p for parts in seen for p in parts]
        chunks += [
            p
            for e in events[1:]
            if e.HasField("artifact_update")
            for p in parts_data(e.artifact_update.artifact.parts)
        ]
        assert chunks == [{"n": 1}, {"n": 2}, {"done": True}]
    finally:
        await client.close()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_resubscribe_without_an_event_log_gets_current_task_then_live_events(
    caplog: pytest.LogCaptureFixture, binding: str
) -> None:
    # task_event_log_size 0 turns the memory store's event log off (docs/storage.md): the
    # SDK's own subscription then serves the stream, its backlog bounded all the same.
    async with agent_server(caplog, task_event_log_size=0) as agent:
        assert agent.state.stores.event_log is None
        client = await sdk_client(agent.url, binding)
        try:
            task_id, events = await _subscribed_midway(agent, client)
            assert summarize(events[0]) == ("task", "WORKING")
            assert events[0].task.id == task_id
            assert summarize(events[-1]) == ("status", "COMPLETED")
        finally:
            await client.close()


async def _subscribed_midway(agent: Agent, client: Any) -> tuple[str, list[Any]]:
    """A ``life.stall`` task (two chunks, then it waits for the gate the test opens)
    subscribed to after its two chunks, its gate then opened: its id and every event the
    subscription got, the snapshot first."""
    task_id = await _start(client, "life.stall", {})
    await _until_chunks(client, task_id, 2)
    subscription = client.subscribe(SubscribeToTaskRequest(id=task_id))
    snapshot = await anext(subscription)
    assert agent.probe.gate is not None
    agent.probe.gate.set()
    return task_id, [snapshot, *await collect(subscription)]


async def _until_chunks(client: Any, task_id: str, count: int) -> None:
    """Poll GetTask until the running task's artifact holds *count* chunks."""
    deadline = time.monotonic() + 30
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if sum(len(a.parts) for a in task.artifacts) >= count:
            return
        assert time.monotonic() < deadline, task
        await asyncio.sleep(0.02)


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
    async with httpx.AsyncClient(verify=TLS) as http:
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
    async with httpx.AsyncClient(base_url=agent.url, verify=TLS) as http:
        sent = await http.post(
            "/",
            json=rpc(
                "SendMessage",
                {
                    "message": wire_message("life.stall", {}),
                    "configuration": {"returnImmediately": True},
                },
            ),
            headers=V1,
        )
        task_id = sent.json()["result"]["task"]["id"]
        body = rpc("tasks/resubscribe", {"id": task_id})
        async with http.stream("POST", "/", json=body, headers=V03) as response:
            stream = sse_events(response)
            events = [await anext(stream)]  # the current task: the stall is still open
            assert agent.probe.gate is not None
            agent.probe.gate.set()
            events += [e async for e in stream]
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
        await asyncio.wait_for(joined.wait(), 30)
        task_id = origin[0].task.id

        subscription = second.subscribe(SubscribeToTaskRequest(id=task_id))
        attached = await anext(subscription)  # the follower holds the task's snapshot
        follower = asyncio.create_task(collect(subscription))
        canceled = await canceller.cancel_task(CancelTaskRequest(id=task_id))
        assert parts_data(canceled.status.message.parts) == ["Canceled by client"]
        await asyncio.wait_for(reader, 30)
        follow = [attached, *await asyncio.wait_for(follower, 30)]
        assert [summarize(e) for e in origin] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("status", "CANCELED"),
        ]
        assert [summarize(e) for e in follow] == [("task", "WORKING"), ("status", "CANCELED")]
    finally:
        for client in (first, second, canceller):
            await client.close()


@pytest.mark.parametrize(
    ("binding", "version"), [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")]
)
async def test_a_subscription_to_a_parked_task_follows_it_when_it_goes_on(
    agent: Agent, binding: str, version: str
) -> None:
    """Subscribed while the task waits for approval, the stream stays open and, once the
    approval comes, carries the run to its end. Before, it ended on the first event the
    approval made (the task with the approving message in its history, still
    ``input-required``): the subscriber never saw ``working`` nor ``completed``."""
    asker = await sdk_client(agent.url)
    follower = await sdk_client(agent.url, binding, version)
    try:
        parked = [
            event
            async for event in asker.send_message(
                request("life.transfer", {"to": "bob", "amount": 5})
            )
        ]
        task_id = parked[0].task.id
        assert summarize(parked[-1]) == ("status", "INPUT_REQUIRED")
        subscription = follower.subscribe(SubscribeToTaskRequest(id=task_id))
        attached = await anext(subscription)  # the task as it waits
        assert summarize(attached) == ("task", "INPUT_REQUIRED")
        following = asyncio.create_task(collect(subscription))
        approval = request(None, {"approved": True}, task_id=task_id)
        answered = [event async for event in asker.send_message(approval)]
        assert summarize(answered[-1]) == ("status", "COMPLETED")
        followed = await asyncio.wait_for(following, 30)
        assert ("status", "WORKING") in [summarize(e) for e in followed]
        assert summarize(followed[-1]) == ("status", "COMPLETED")
    finally:
        await asker.close()
        await follower.close()

"""CancelTask / tasks/cancel: cancellation always lands and is never overwritten."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)

from tests._sdk import request
from tests._support import TLS

from ._agent import Agent, agent_server
from ._client import (
    TRANSPORTS,
    V03,
    V1,
    parts_data,
    rpc,
    sdk_client,
    sse_events,
    summarize,
    wire_message,
    wire_message_03,
)

CANCELED = TaskState.TASK_STATE_CANCELED


async def _start(client: object, skill: str, data: dict[str, object]) -> str:
    """Start a task with returnImmediately; return its id."""
    async for response in client.send_message(request(skill, data, return_immediately=True)):  # type: ignore[attr-defined]
        return str(response.task.id)
    raise AssertionError("no task returned")


async def _wait_state(client: object, task_id: str, state: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = await client.get_task(GetTaskRequest(id=task_id))  # type: ignore[attr-defined]
        if task.status.state == state:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task_id} never reached {TaskState.Name(state)}")


async def test_cancel_token_ignoring_sync_module_lands_before_the_module_returns(
    agent: Agent,
) -> None:
    client = await sdk_client(agent.url, streaming=False)
    try:
        task_id = await _start(client, "life.deaf", {"seconds": 3.0})
        await _wait_state(client, task_id, TaskState.TASK_STATE_WORKING)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        # The cancel answered while the module's thread still sleeps: it did not wait
        # for the module (order, not a stopwatch).
        finished = agent.probe.done(task_id)
        assert not finished.is_set()
        assert canceled.status.state == CANCELED
        assert parts_data(canceled.status.message.parts) == ["Canceled by client"]

        # The module never looked at its token; its thread sleeps on. Once it returns,
        # its result must be discarded: the task stays canceled, with no artifact.
        assert await asyncio.to_thread(finished.wait, 30.0)
        assert agent.probe.token_seen_cancelled[task_id] is True
        # A window for a late result to (wrongly) reach the store: nothing signals a
        # write that must not happen, so this wait is the scenario, not a synchronisation.
        await asyncio.sleep(0.2)
        stored = await client.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == CANCELED
        assert parts_data(stored.status.message.parts) == ["Canceled by client"]
        assert list(stored.artifacts) == []
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.status.state for t in listed.tasks if t.id == task_id] == [CANCELED]
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), TRANSPORTS)
async def test_cancel_during_stream_ends_the_stream_with_canceled(
    agent: Agent, binding: str, version: str
) -> None:
    streamer = await sdk_client(agent.url, binding, version)
    canceller = await sdk_client(agent.url, streaming=False)
    try:
        events = []
        async for event in streamer.send_message(request("life.stall", {})):
            events.append(event)
            if len(events) == 4:  # task, working, both chunks; the module now waits
                result = await canceller.cancel_task(CancelTaskRequest(id=events[0].task.id))
                assert result.status.state == CANCELED
        assert [summarize(e) for e in events] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("artifact", False, False),
            ("artifact", True, False),
            ("status", "CANCELED"),
        ]
        assert parts_data(events[-1].status_update.status.message.parts) == ["Canceled by client"]

        task_id = events[0].task.id
        # The module's generator was closed at once, with its token canceled.
        assert agent.probe.done(task_id).is_set()
        assert agent.probe.token_seen_cancelled[task_id] is True
        stored = await canceller.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == CANCELED
        assert [parts_data(a.parts) for a in stored.artifacts] == [[{"n": 1}, {"n": 2}]]
    finally:
        await streamer.close()
        await canceller.close()


# The SDK's own 0.3 REST client cannot read the error body its 0.3 REST server sends
# (it raises a generic A2AClientError for HTTP 400/404); that path is checked on the wire.
@pytest.mark.parametrize(
    ("binding", "version"), [t for t in TRANSPORTS if t != ("HTTP+JSON", "0.3")]
)
async def test_cancel_errors_for_terminal_and_unknown_tasks(
    agent: Agent, binding: str, version: str
) -> None:
    client = await sdk_client(agent.url, binding, version, streaming=False)
    try:
        done = None
        async for response in client.send_message(request("life.echo", {"text": "x"})):
            done = response.task
        assert done is not None and done.status.state == TaskState.TASK_STATE_COMPLETED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=done.id))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id="no-such-task"))
        stored = await client.get_task(GetTaskRequest(id=done.id))
        assert stored.status.state == TaskState.TASK_STATE_COMPLETED
    finally:
        await client.close()


async def test_cancel_error_codes_on_the_wire(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url, verify=TLS) as http:
        sent = await http.post(
            "/",
            json=rpc(
                "SendMessage",
                {
                    "message": {
                        "messageId": "m1",
                        "role": "ROLE_USER",
                        "parts": [{"data": {"text": "x"}}],
                        "metadata": {"skillId": "life.echo"},
                    }
                },
            ),
            headers=V1,
        )
        task_id = sent.json()["result"]["task"]["id"]
        terminal = (
            await http.post("/", json=rpc("CancelTask", {"id": task_id}), headers=V1)
        ).json()
        assert terminal["error"]["code"] == -32002
        assert terminal["error"]["message"] == "Task is not cancelable: current state is completed"
        unknown = (await http.post("/", json=rpc("CancelTask", {"id": "nope"}), headers=V1)).json()
        assert unknown["error"]["code"] == -32001
        old = (await http.post("/", json=rpc("tasks/cancel", {"id": task_id}), headers=V03)).json()
        assert old["error"]["code"] == -32002
        assert old["error"]["message"] == "Task is not cancelable: current state is completed"
        for path, headers in (
            (f"/tasks/{task_id}:cancel", V1),
            (f"/v1/tasks/{task_id}:cancel", V03),
        ):
            rest = await http.post(path, headers=headers)
            assert rest.status_code == 400  # A2A 1.0.1 §5.4 (1.0.0: 409)
            assert rest.json()["error"]["details"][0]["reason"] == "TASK_NOT_CANCELABLE"
            assert "current state is completed" in rest.json()["error"]["message"]
        missing = await http.post("/v1/tasks/nope:cancel", headers=V03)
        assert missing.status_code == 404


async def test_v03_cancel_of_a_running_task(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url, verify=TLS) as http:
        sent = await http.post(
            "/",
            json=rpc(
                "message/send",
                {
                    # waits until the test opens the gate, which it never does
                    "message": wire_message_03("life.gate", {}),
                    "configuration": {"blocking": False},
                },
            ),
            headers=V03,
        )
        task = sent.json()["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "submitted"
        canceled = (
            await http.post("/", json=rpc("tasks/cancel", {"id": task["id"]}), headers=V03)
        ).json()["result"]
        assert not agent.probe.gate.is_set()  # answered without the module ever ending
        assert canceled["status"]["state"] == "canceled"
        assert canceled["status"]["message"]["parts"] == [
            {"kind": "text", "text": "Canceled by client"}
        ]


async def test_cancel_task_parked_in_input_required(agent: Agent) -> None:
    client = await sdk_client(agent.url, streaming=False)
    try:
        parked = None
        async for response in client.send_message(
            request("life.transfer", {"to": "bob", "amount": 5})
        ):
            parked = response.task
        assert parked is not None
        assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=parked.id))
        assert canceled.status.state == CANCELED
        assert parts_data(canceled.status.message.parts) == ["Canceled by client"]
        stored = await client.get_task(GetTaskRequest(id=parked.id))
        assert stored.status.state == CANCELED
        assert not any(c.get("ran") for c in agent.probe.contexts)
    finally:
        await client.close()


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_cancels_racing_on_a_streamed_task_end_its_stream_once(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, store: str
) -> None:
    """Six cancels sent at once while the task streams: one cancels it, the others find it
    canceled (-32002), and the stream ends with one CANCELED. Before, each cancel that
    read the task still working wrote its own CANCELED: the stream got two, or one and
    then pings with no end (measured: 2 runs in 3, SQLite, PostgreSQL and cluster alike)."""
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"
    async with (
        agent_server(caplog, task_store=url) as agent,
        httpx.AsyncClient(base_url=agent.url, headers=V1, timeout=60, verify=TLS) as http,
    ):
        body = rpc("SendStreamingMessage", {"message": wire_message("life.stall", {})})
        states: list[str] = []
        answers: list[dict[str, object]] = []
        chunks = 0

        async def cancel(task_id: str) -> None:
            sent = await http.post("/", json=rpc("CancelTask", {"id": task_id}))
            answers.append(sent.json())

        async def read() -> None:
            nonlocal chunks
            async with http.stream("POST", "/", json=body) as response:
                async for event in sse_events(response):
                    result = event["result"]
                    if "task" in result:
                        task_id = result["task"]["id"]
                    update = result.get("statusUpdate")
                    if update is not None:
                        states.append(update["status"]["state"])
                    chunks += "artifactUpdate" in result
                    if chunks == 2 and not answers:  # both chunks out: the module now waits
                        await asyncio.gather(*(cancel(task_id) for _ in range(6)))

        await asyncio.wait_for(read(), 120)  # a hang guard: the stream must end
        assert states == ["TASK_STATE_WORKING", "TASK_STATE_CANCELED"]
        won = [a for a in answers if "result" in a]
        assert len(won) == 1, answers
        assert [a["error"]["code"] for a in answers if "error" in a] == [-32002] * 5  # type: ignore[index]

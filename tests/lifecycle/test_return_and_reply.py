"""returnImmediately (1.0) / blocking=false (0.3), and skills that answer with a Message."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from a2a.types import GetTaskRequest, InternalError, TaskState

from tests._sdk import request

from ._agent import Agent
from ._client import V03, V1, collect, parts_data, rpc, sdk_client, wire_message, wire_message_03


async def _wait_completed(client: object, task_id: str) -> object:
    deadline = time.monotonic() + 10
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))  # type: ignore[attr-defined]
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            return task
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_return_immediately_while_a_two_second_module_runs(
    agent: Agent, version: str
) -> None:
    client = await sdk_client(agent.url, "JSONRPC", version, streaming=False)
    try:
        started = time.monotonic()
        events = await collect(
            client.send_message(request("life.deaf", {"seconds": 2.0}, return_immediately=True))
        )
        assert time.monotonic() - started < 1.0
        [event] = events
        assert event.task.status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        )
        task_id = event.task.id
        midway = await client.get_task(GetTaskRequest(id=task_id))
        assert midway.status.state == TaskState.TASK_STATE_WORKING
        done = await _wait_completed(client, task_id)
        assert time.monotonic() - started >= 2.0
        assert [parts_data(a.parts) for a in done.artifacts] == [[{"slept": 2.0}]]  # type: ignore[attr-defined]
    finally:
        await client.close()


async def test_non_blocking_on_the_wire(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url) as http:
        new = await http.post(
            "/",
            json=rpc(
                "SendMessage",
                {
                    "message": wire_message("life.nap", {"seconds": 0.5}),
                    "configuration": {"returnImmediately": True},
                },
            ),
            headers=V1,
        )
        assert new.json()["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        old = await http.post(
            "/",
            json=rpc(
                "message/send",
                {
                    "message": wire_message_03("life.nap", {"seconds": 0.5}),
                    "configuration": {"blocking": False},
                },
            ),
            headers=V03,
        )
        assert old.json()["result"]["status"]["state"] == "submitted"
        await asyncio.sleep(0.8)
        for task_id, method, headers in (
            (new.json()["result"]["task"]["id"], "GetTask", V1),
            (old.json()["result"]["id"], "tasks/get", V03),
        ):
            got = (await http.post("/", json=rpc(method, {"id": task_id}), headers=headers)).json()
            result = (
                got["result"].get("task", got["result"]) if method == "GetTask" else got["result"]
            )
            assert result["status"]["state"] in ("TASK_STATE_COMPLETED", "completed")


@pytest.mark.parametrize(
    ("version", "streaming"), [("1.0", False), ("1.0", True), ("0.3", False), ("0.3", True)]
)
async def test_message_reply_skill_answers_with_one_message(
    agent: Agent, version: str, streaming: bool
) -> None:
    client = await sdk_client(agent.url, "JSONRPC", version, streaming=streaming)
    try:
        events = await collect(client.send_message(request("life.quick", {"text": "hi"})))
        [event] = events
        assert event.HasField("message")
        assert parts_data(event.message.parts) == [{"upper": "HI"}]
        assert event.message.role == 2  # ROLE_AGENT
        assert event.message.metadata["skillId"] == "life.quick"
    finally:
        await client.close()
    async with httpx.AsyncClient(base_url=agent.url) as http:
        listed = await http.post("/", json=rpc("ListTasks", {}), headers=V1)
    assert listed.json()["result"]["totalSize"] == 0  # a message reply leaves no task


async def test_message_reply_error_is_a_sanitized_jsonrpc_error(agent: Agent) -> None:
    client = await sdk_client(agent.url, streaming=False)
    try:
        with pytest.raises(InternalError) as caught:
            await collect(client.send_message(request("life.quick", {"text": "boom"})))
        assert "kaboom" not in str(caught.value)
        assert "/opt/secret" not in str(caught.value)
    finally:
        await client.close()
    async with httpx.AsyncClient(base_url=agent.url) as http:
        body = rpc("SendMessage", {"message": wire_message("life.quick", {"text": "boom"})})
        error = (await http.post("/", json=body, headers=V1)).json()["error"]
        assert error["code"] == -32603
        assert error["message"] == "Internal error"
        rest = await http.post(
            "/message:send",
            json={"message": wire_message("life.quick", {"text": "boom"})},
            headers=V1,
        )
        assert rest.status_code == 500
        assert rest.json()["error"]["message"] == "Module execution failed"

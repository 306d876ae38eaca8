"""returnImmediately (1.0) / blocking=false (0.3), and skills that answer with a Message."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from a2a.types import GetTaskRequest, InternalError, TaskState

from tests._sdk import request
from tests._support import TLS

from ._agent import Agent
from ._client import V03, V1, collect, parts_data, rpc, sdk_client, wire_message, wire_message_03


async def _wait_completed(client: object, task_id: str) -> object:
    deadline = time.monotonic() + 30
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))  # type: ignore[attr-defined]
        if task.status.state == TaskState.TASK_STATE_COMPLETED:
            return task
        assert time.monotonic() < deadline, f"task {task_id} never completed"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_return_immediately_while_the_module_runs(agent: Agent, version: str) -> None:
    client = await sdk_client(agent.url, "JSONRPC", version, streaming=False)
    try:
        # life.hold keeps its worker thread until the test releases it
        events = await collect(
            client.send_message(request("life.hold", {}, return_immediately=True))
        )
        [event] = events
        assert event.task.status.state == TaskState.TASK_STATE_SUBMITTED
        task_id = event.task.id
        deadline = time.monotonic() + 30
        while (midway := await client.get_task(GetTaskRequest(id=task_id))).status.state != (
            TaskState.TASK_STATE_WORKING
        ):
            assert time.monotonic() < deadline, midway
            await asyncio.sleep(0.02)
        assert agent.probe.running == 1  # the answer came while the module was running
        agent.probe.release.set()
        done = await _wait_completed(client, task_id)
        assert [parts_data(a.parts) for a in done.artifacts] == [[{"opened": True}]]  # type: ignore[attr-defined]
    finally:
        await client.close()


async def test_non_blocking_on_the_wire(agent: Agent) -> None:
    async with httpx.AsyncClient(base_url=agent.url, verify=TLS) as http:
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
        for task_id, method, headers, completed in (
            (new.json()["result"]["task"]["id"], "GetTask", V1, "TASK_STATE_COMPLETED"),
            (old.json()["result"]["id"], "tasks/get", V03, "completed"),
        ):
            deadline = time.monotonic() + 30
            while True:
                got = (
                    await http.post("/", json=rpc(method, {"id": task_id}), headers=headers)
                ).json()
                result = got["result"].get("task", got["result"])
                if result["status"]["state"] == completed:
                    break
                assert time.monotonic() < deadline, result
                await asyncio.sleep(0.05)


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
    async with httpx.AsyncClient(base_url=agent.url, verify=TLS) as http:
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
    async with httpx.AsyncClient(base_url=agent.url, verify=TLS) as http:
        body = rpc("SendMessage", {"message": wire_message("life.quick", {"text": "boom"})})
        error = (await http.post("/", json=body, headers=V1)).json()["error"]
        # Worded by the executor (sanitized), so every binding says the same.
        assert error["code"] == -32603
        assert error["message"] == "Module execution failed"
        rest = await http.post(
            "/message:send",
            json={"message": wire_message("life.quick", {"text": "boom"})},
            headers=V1,
        )
        assert rest.status_code == 500
        assert rest.json()["error"]["message"] == "Module execution failed"

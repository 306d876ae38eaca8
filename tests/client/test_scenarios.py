"""The client scenario suite, run against every peer in ``conftest.AGENT_IDS``.

Peers: a plain a2a-sdk agent and our server, over a socket and in direct mode, each
spoken to in A2A 1.0 and 0.3. Results must come back in the same shape everywhere.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from apcore_a2a.client import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from tests.client.conftest import Agent

TASK_KEYS = {"kind", "id", "contextId", "status", "artifacts", "history", "metadata"}


def _first_part(task: dict[str, Any]) -> dict[str, Any]:
    assert task["artifacts"], task
    return task["artifacts"][0]["parts"][0]


def _assert_part(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert {k: actual[k] for k in expected} == expected
    assert set(actual) >= {"type", "mediaType", "filename", "metadata"}


async def test_send_text_returns_completed_task(agent: Agent) -> None:
    message, skill = agent.profile.text
    async with agent.client() as client:
        task = await client.send_message(message, skill_id=skill)
    assert set(task) == TASK_KEYS
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert isinstance(task["contextId"], str) and task["contextId"]
    _assert_part(_first_part(task), agent.profile.text_part)
    user = task["history"][0]
    assert user["role"] == "user"
    assert user["parts"][0] == {
        "type": "text",
        "text": "hello",
        "mediaType": None,
        "filename": None,
        "metadata": {},
    }


async def test_send_data_returns_data_artifact(agent: Agent) -> None:
    message, skill = agent.profile.data
    async with agent.client() as client:
        task = await client.send_message(message, skill_id=skill)
    assert task["status"]["state"] == "completed"
    part = _first_part(task)
    _assert_part(part, agent.profile.data_part)
    # Integral numbers come back as ints whatever the wire (protobuf sends 3.0).
    assert json.dumps(part["data"], sort_keys=True) == json.dumps(
        agent.profile.data_part["data"], sort_keys=True
    )
    assert task["history"][0]["parts"][0]["type"] == "data"


async def test_stream_yields_events_until_final(agent: Agent) -> None:
    message, skill = agent.profile.text
    async with agent.client() as client:
        events = [e async for e in client.stream_message(message, skill_id=skill)]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "task"
    assert kinds[-1] == "status-update"
    assert "artifact-update" in kinds
    last = events[-1]
    assert last["final"] is True and last["status"]["state"] == "completed"
    assert all(not e["final"] for e in events[:-1] if e["kind"] == "status-update")
    task_id = events[0]["id"]
    assert {e.get("taskId", e.get("id")) for e in events} == {task_id}
    artifact = next(e for e in events if e["kind"] == "artifact-update")["artifact"]
    _assert_part(artifact["parts"][0], agent.profile.text_part)


async def test_get_task_returns_the_same_task(agent: Agent) -> None:
    message, skill = agent.profile.text
    async with agent.client() as client:
        sent = await client.send_message(message, skill_id=skill)
        got = await client.get_task(sent["id"])
        trimmed = await client.get_task(sent["id"], history_length=1)
    assert got["id"] == sent["id"] and got["contextId"] == sent["contextId"]
    assert got["status"]["state"] == "completed"
    assert got["artifacts"] == sent["artifacts"]
    assert len(trimmed["history"]) <= 1


async def test_cancel_running_task(agent: Agent) -> None:
    message, skill = agent.profile.slow
    async with agent.client() as client:
        started = await client.send_message(message, skill_id=skill, return_immediately=True)
        assert started["status"]["state"] in ("submitted", "working")
        canceled = await asyncio.wait_for(client.cancel_task(started["id"]), 10)
        assert canceled["id"] == started["id"]
        assert canceled["status"]["state"] == "canceled"
        assert (await client.get_task(started["id"]))["status"]["state"] == "canceled"
        with pytest.raises(TaskNotCancelableError) as err:
            await client.cancel_task(started["id"])
    assert err.value.code == -32002


async def test_resubscribe_follows_task_until_canceled(agent: Agent) -> None:
    message, skill = agent.profile.slow
    async with agent.client() as client:
        started = await client.send_message(message, skill_id=skill, return_immediately=True)
        events: list[dict[str, Any]] = []
        first_seen = asyncio.Event()

        async def follow() -> None:
            async for event in client.resubscribe(started["id"]):
                events.append(event)
                first_seen.set()

        follower = asyncio.create_task(follow())
        await asyncio.wait_for(first_seen.wait(), 10)
        await client.cancel_task(started["id"])
        await asyncio.wait_for(follower, 10)
    assert events[0]["kind"] == "task" and events[0]["id"] == started["id"]
    assert events[0]["status"]["state"] in ("submitted", "working")
    assert events[-1]["kind"] == "status-update"
    assert events[-1]["status"]["state"] == "canceled" and events[-1]["final"] is True


async def test_list_tasks_paginates(agent: Agent) -> None:
    message, skill = agent.profile.text
    context_id = str(uuid.uuid4())
    async with agent.client() as client:
        sent = {
            (await client.send_message(message, skill_id=skill, context_id=context_id))["id"]
            for _ in range(3)
        }
        if agent.protocol == "0.3":
            with pytest.raises(UnsupportedOperationError):
                await client.list_tasks(context_id=context_id)
            return
        page1 = await client.list_tasks(context_id=context_id, limit=2)
        assert page1["nextCursor"] is not None
        page2 = await client.list_tasks(context_id=context_id, limit=2, cursor=page1["nextCursor"])
        done = await client.list_tasks(context_id=context_id, status="completed")
        none_failed = await client.list_tasks(context_id=context_id, status="failed")
    assert len(page1["tasks"]) == 2 and len(page2["tasks"]) == 1
    assert page2["nextCursor"] is None
    assert {t["id"] for t in page1["tasks"] + page2["tasks"]} == sent
    assert page1["totalSize"] == 3
    assert all(t["contextId"] == context_id for t in page1["tasks"])
    assert {t["id"] for t in done["tasks"]} == sent and none_failed["tasks"] == []


async def test_remote_errors_are_typed(agent: Agent) -> None:
    message, skill = agent.profile.text
    async with agent.client() as client:
        with pytest.raises(TaskNotFoundError) as missing:
            await client.get_task(f"missing-{uuid.uuid4()}")
        task = await client.send_message(message, skill_id=skill)
        with pytest.raises(UnsupportedOperationError) as terminal:
            await client.send_message(
                message, skill_id=skill, task_id=task["id"], context_id=task["contextId"]
            )
        with pytest.raises(UnsupportedOperationError):
            async for _ in client.resubscribe(task["id"]):
                pass
        with pytest.raises(InvalidParamsError) as empty:
            await client.send_message({"parts": []}, skill_id=skill)
        with pytest.raises(agent.profile.extended_card_error):
            await client.get_extended_card()
        if agent.protocol == "1.0":
            with pytest.raises(InvalidParamsError):
                await client.list_tasks(limit=500)
    assert missing.value.code == -32001 and missing.value.message
    assert terminal.value.code == -32004
    assert empty.value.code == -32602


async def test_stream_error_before_events_is_typed(agent: Agent) -> None:
    async with agent.client() as client:
        with pytest.raises(TaskNotFoundError):
            async for _ in client.stream_message("x", task_id=f"missing-{uuid.uuid4()}"):
                pass


async def test_push_config_round_trip(agent: Agent) -> None:
    message, skill = agent.profile.slow
    hook = "http://127.0.0.1:9/hook"
    async with agent.client() as client:
        task = await client.send_message(message, skill_id=skill, return_immediately=True)
        try:
            created = await client.set_push_config(
                task["id"],
                {
                    "url": hook,
                    "id": "cfg-1",
                    "token": "tok",
                    "authentication": {"scheme": "Bearer", "credentials": "s3cret"},
                },
            )
            listed = await client.list_push_configs(task["id"])
            fetched = await client.get_push_config(task["id"], "cfg-1")
            status = await client.push_status(task["id"])
            await client.delete_push_config(task["id"], "cfg-1")
            after = await client.list_push_configs(task["id"])
        finally:
            await client.cancel_task(task["id"])
    expected = {
        "id": "cfg-1",
        "taskId": task["id"],
        "url": hook,
        "token": "tok",
        "authentication": {"scheme": "Bearer", "credentials": "s3cret"},
    }
    assert created == expected
    assert listed == [expected]
    assert fetched == expected
    assert after == []
    # The delivery status is our agent's own route (not A2A); a plain SDK agent has none.
    if agent.profile.name == "ours":
        assert status == {
            "taskId": task["id"],
            "configs": [{"id": "cfg-1", "url": hook, "status": "active", "statusReason": None}],
        }
    else:
        assert status is None

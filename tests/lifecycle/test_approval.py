"""Approval as input-required, resume through apcore's ``_approval_token``, rejection."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests._sdk import request
from tests._support import TLS

from ._agent import Agent
from ._client import V1, collect, parts_data, rpc, sdk_client, summarize, wire_message

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


async def _send(client: Any, req: Any) -> Task:
    result = None
    async for response in client.send_message(req):
        result = response.task
    assert result is not None
    return result


def _ran(agent: Agent) -> list[dict[str, Any]]:
    return [c for c in agent.probe.contexts if "ran" in c]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_pending_then_approved_completes_blocking(agent: Agent, version: str) -> None:
    client = await sdk_client(agent.url, "JSONRPC", version, streaming=False)
    try:
        parked = await _send(client, request("life.transfer", {"to": "bob", "amount": 5}))
        assert parked.status.state == INPUT_REQUIRED
        text, data = parts_data(parked.status.message.parts)
        approval_id = data["approvalId"]
        assert data["moduleId"] == "life.transfer"
        assert data["code"] == "APPROVAL_PENDING"
        assert "Transfer money after approval" in data["reason"]
        for fact in (approval_id, "life.transfer", "Transfer money after approval"):
            assert fact in text
        meta = MessageToDict(parked.metadata)["apcore"]["approval"]
        assert meta["approvalId"] == approval_id and meta["status"] == "pending"
        assert _ran(agent) == []

        # The follow-up names only the task; the server fills in its context.
        done = await _send(client, request(None, {"approved": True}, task_id=parked.id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert done.context_id == parked.context_id
        assert [parts_data(a.parts) for a in done.artifacts] == [
            [{"status": "sent", "to": "bob", "amount": 5}]
        ]
        assert _ran(agent) == [{"ran": "life.transfer", "to": "bob", "amount": 5}]
        assert MessageToDict(done.metadata)["apcore"]["approval"]["status"] == "approved"

        stored = await client.get_task(GetTaskRequest(id=parked.id))
        roles = [m.role for m in stored.history]
        assert len(roles) == 3  # user request, agent's question, user approval
        assert stored.status.state == TaskState.TASK_STATE_COMPLETED
    finally:
        await client.close()


async def test_pending_then_approved_streaming_exact_order(agent: Agent) -> None:
    client = await sdk_client(agent.url)
    try:
        first = await collect(
            client.send_message(request("life.transfer_stream", {"to": "ann", "amount": 7}))
        )
        assert [summarize(e) for e in first] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("status", "INPUT_REQUIRED"),
        ]
        task_id = first[0].task.id
        second = await collect(client.send_message(request(None, text="approve", task_id=task_id)))
        assert [summarize(e) for e in second] == [
            ("status", "WORKING"),
            ("artifact", False, False),
            ("artifact", True, True),
            ("status", "COMPLETED"),
        ]
        assert parts_data(second[-1].status_update.status.message.parts) == [
            {"status": "sent", "to": "ann", "amount": 7}
        ]
        assert _ran(agent) == [{"ran": "life.transfer_stream", "to": "ann", "amount": 7}]
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"data": {"approved": False, "reason": "too much"}}, "too much"),
        ({"text": "reject: not today"}, "not today"),
        ({"text": "no"}, "Rejected by user"),
    ],
)
async def test_rejection_ends_rejected_with_reason(
    agent: Agent, answer: dict[str, Any], reason: str
) -> None:
    client = await sdk_client(agent.url)
    try:
        first = await collect(
            client.send_message(request("life.transfer", {"to": "eve", "amount": 9}))
        )
        task_id = first[0].task.id
        second = await collect(
            client.send_message(
                request(None, answer.get("data"), text=answer.get("text"), task_id=task_id)
            )
        )
        assert [summarize(e) for e in second] == [("status", "REJECTED")]
        text, data = parts_data(second[0].status_update.status.message.parts)
        assert text == f"Approval rejected: {reason}"
        assert data["code"] == "APPROVAL_DENIED"
        assert _ran(agent) == []
        stored = await client.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == TaskState.TASK_STATE_REJECTED
        assert MessageToDict(stored.metadata)["apcore"]["approval"]["status"] == "rejected"
    finally:
        await client.close()


async def test_answer_without_a_decision_asks_again(agent: Agent) -> None:
    client = await sdk_client(agent.url, streaming=False)
    try:
        parked = await _send(client, request("life.transfer", {"to": "bob", "amount": 1}))
        again = await _send(client, request(None, text="what is this?", task_id=parked.id))
        assert again.status.state == INPUT_REQUIRED
        text = parts_data(again.status.message.parts)[0]
        assert text.startswith("Still waiting for approval")
        done = await _send(client, request(None, {"approved": True}, task_id=parked.id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert len(_ran(agent)) == 1
    finally:
        await client.close()


async def test_handler_denial_ends_rejected_with_reason(agent: Agent) -> None:
    client = await sdk_client(agent.url)
    try:
        events = await collect(
            client.send_message(request("life.forbidden", {"to": "mallory", "amount": 1}))
        )
        assert [summarize(e) for e in events] == [
            ("task", "SUBMITTED"),
            ("status", "WORKING"),
            ("status", "REJECTED"),
        ]
        text, data = parts_data(events[-1].status_update.status.message.parts)
        assert text == "Approval denied: Transfers to that account are blocked"
        assert data["code"] == "APPROVAL_DENIED"
        assert _ran(agent) == []
    finally:
        await client.close()


async def test_client_supplied_approval_token_is_ignored(agent: Agent) -> None:
    """An approval id cannot be replayed on a new task to skip the approval."""
    client = await sdk_client(agent.url, streaming=False)
    try:
        parked = await _send(client, request("life.transfer", {"to": "bob", "amount": 1}))
        approval_id = parts_data(parked.status.message.parts)[1]["approvalId"]
        await _send(client, request(None, {"approved": True}, task_id=parked.id))
        assert len(_ran(agent)) == 1

        replay = await _send(
            client,
            request(
                "life.transfer", {"to": "mallory", "amount": 999, "_approval_token": approval_id}
            ),
        )
        assert replay.status.state == INPUT_REQUIRED
        assert parts_data(replay.status.message.parts)[1]["approvalId"] != approval_id
        assert len(_ran(agent)) == 1
    finally:
        await client.close()


async def test_module_sees_a2a_ids_and_tasks_list_by_context(agent: Agent) -> None:
    client = await sdk_client(agent.url, streaming=False)
    try:
        first = await _send(client, request("life.peek", {"text": "a"}))
        assert parts_data(first.artifacts[0].parts) == [
            {"task_id": first.id, "context_id": first.context_id}
        ]
        second = await _send(
            client, request("life.peek", {"text": "b"}, context_id=first.context_id)
        )
        other = await _send(client, request("life.peek", {"text": "c"}))
        assert second.context_id == first.context_id != other.context_id
        seen = [(c["a2a.task_id"], c["a2a.context_id"]) for c in agent.probe.contexts]
        assert seen == [
            (first.id, first.context_id),
            (second.id, first.context_id),
            (other.id, other.context_id),
        ]
        listed = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
        assert sorted(t.id for t in listed.tasks) == sorted([first.id, second.id])
    finally:
        await client.close()


@pytest.mark.parametrize("binding", ["JSONRPC", "REST"])
async def test_an_approval_answers_only_the_task_own_skill(agent: Agent, binding: str) -> None:
    """``{"approved": true}`` naming another skill (itself approval-gated) is refused and
    changes nothing (issue 40 item 4; before, it ran that skill without its approval)."""
    async with httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http:

        async def task(task_id: str) -> dict[str, Any]:
            answer = await http.post("/", json=rpc("GetTask", {"id": task_id}), headers=V1)
            return answer.json()["result"]  # type: ignore[no-any-return]

        first = wire_message("life.transfer", {"to": "bob", "amount": 5})
        sent = await http.post("/", json=rpc("SendMessage", {"message": first}), headers=V1)
        parked = sent.json()["result"]["task"]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        before = await task(parked["id"])

        other = wire_message("life.transfer_stream", {"approved": True}, taskId=parked["id"])
        if binding == "JSONRPC":
            answer = await http.post("/", json=rpc("SendMessage", {"message": other}), headers=V1)
            error = answer.json()["error"]
            assert (answer.status_code, error["code"]) == (200, -32602)
        else:
            answer = await http.post("/message:send", json={"message": other}, headers=V1)
            error = answer.json()["error"]
            assert (answer.status_code, error["status"]) == (400, "INVALID_ARGUMENT")
        assert error["message"] == (
            f"Task {parked['id']} runs skill life.transfer: a message on it answers that "
            "skill only, and metadata.skillId names life.transfer_stream"
        )
        assert await task(parked["id"]) == before
        assert _ran(agent) == []

        # The wait is still the task's: its own approval runs its own skill.
        own = wire_message(None, {"approved": True}, taskId=parked["id"])
        done = await http.post("/", json=rpc("SendMessage", {"message": own}), headers=V1)
        assert done.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert _ran(agent) == [{"ran": "life.transfer", "to": "bob", "amount": 5}]

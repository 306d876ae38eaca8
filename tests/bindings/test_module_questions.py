"""STREAM-SUB-002: a module asks the caller for input and gets the answer.

A module raises ``apcore_a2a.InputRequired``; the task waits in ``input-required``; the
next message on the task calls the module again with the answer merged into its input.
Seen by the official SDK client on JSON-RPC, REST and gRPC (1.0 and 0.3); approvals on the
same task still resume the right input; the question survives a restart.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import GetTaskRequest, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict

from tests._sdk import make_client, request

from ._outputs_agent import (
    ALL_TRANSPORTS,
    BINDINGS,
    COMPLETED,
    INPUT_REQUIRED,
    send,
    serve_outputs,
    text_request,
)


def _question(task: Any) -> tuple[str, dict[str, Any]]:
    text, data = task.status.message.parts
    return text.text, MessageToDict(data.data)


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_module_asks_and_gets_the_answer(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        first = await send(client, request("out.trip", {"origin": "SFO", "seats": 2}))
        assert first.status.state == INPUT_REQUIRED
        text, data = _question(first)
        assert text == "Where to?"
        assert data == {
            "code": "INPUT_REQUIRED",
            "prompt": "Where to?",
            "field": "destination",
            "data": {"choices": ["JFK", "LHR"]},
        }
        # A plain text answer fills the field the module named; the rest of the input stays.
        done = await send(client, text_request(None, "JFK", task_id=first.id))
        assert done.status.state == COMPLETED, done.status
        assert done.context_id == first.context_id
        assert [MessageToDict(p.data) for p in done.artifacts[0].parts] == [
            {
                "trip": "SFO -> JFK",
                "seats": 2,
                "follow_up": {"prompt": "Where to?", "field": "destination"},
            }
        ]
        stored = await client.get_task(GetTaskRequest(id=first.id))
        roles = [m.role for m in stored.history]
        assert roles == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER]
        assert stored.history[2].parts[0].text == "JFK"
    finally:
        await client.close()


@pytest.mark.parametrize(("binding", "version"), BINDINGS)
async def test_two_questions_streamed(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version, streaming=True)
    try:
        events = [e async for e in client.send_message(request("out.trip", {}))]
        kinds = [e.WhichOneof("payload") for e in events]
        assert kinds == ["task", "status_update", "status_update"]
        assert events[-1].status_update.status.state == INPUT_REQUIRED
        task_id = events[0].task.id
        # A data answer is merged too; this one brings the destination only.
        second = [
            e
            async for e in client.send_message(
                _with_task(request(None, {"destination": "LHR"}), task_id)
            )
        ]
        last = second[-1].status_update.status
        assert last.state == INPUT_REQUIRED
        assert last.message.parts[0].text == "From where?"
        third = [e async for e in client.send_message(text_request(None, "OSL", task_id))]
        assert third[-1].status_update.status.state == COMPLETED
        [artifact] = [e.artifact_update.artifact for e in third if e.HasField("artifact_update")]
        assert MessageToDict(artifact.parts[0].data)["trip"] == "OSL -> LHR"
    finally:
        await client.close()


def _with_task(req: SendMessageRequest, task_id: str) -> SendMessageRequest:
    req.message.task_id = task_id
    return req


async def test_an_answer_that_does_not_fit_asks_again(agent_url: str) -> None:
    client = await make_client(agent_url, "JSONRPC", "1.0")
    try:
        first = await send(client, request("out.trip", {"origin": "SFO"}))
        # seats must be an integer: the module does not run; the question is asked again.
        again = await send(client, request(None, {"seats": "many"}, task_id=first.id))
        assert again.status.state == INPUT_REQUIRED
        text, data = _question(again)
        assert text.endswith("Where to?") and "seats" in text
        assert data["field"] == "destination" and "seats" in data["error"]
        done = await send(client, text_request(None, "JFK", task_id=first.id))
        assert done.status.state == COMPLETED
        assert MessageToDict(done.artifacts[0].parts[0].data)["trip"] == "SFO -> JFK"
    finally:
        await client.close()


async def test_a_message_skill_that_asks_becomes_a_task(agent_url: str) -> None:
    client = await make_client(agent_url, "HTTP+JSON", "1.0")
    try:
        asked = await send(client, request("out.reply", {"text": "?"}))
        assert asked.status.state == INPUT_REQUIRED and asked.id
        assert _question(asked)[0] == "Say what?"
        done = await send(client, text_request(None, "hello", task_id=asked.id))
        assert done.status.state == COMPLETED
        assert [MessageToDict(p.data) for p in done.artifacts[0].parts] == [{"said": "hello"}]
    finally:
        await client.close()


async def test_approval_after_an_answer_resumes_the_merged_input(agent_url: str) -> None:
    """Approval on every run: the run that took the answer resumes on the merged input."""
    client = await make_client(agent_url, "GRPC", "1.0")
    try:
        parked = await send(client, request("out.guarded_trip", {"origin": "SFO"}))
        assert "approvalId" in _question(parked)[1]
        asked = await send(client, request(None, {"approved": True}, task_id=parked.id))
        assert _question(asked)[0] == "Where to?"
        parked_again = await send(client, text_request(None, "JFK", task_id=parked.id))
        assert "approvalId" in _question(parked_again)[1]
        done = await send(client, text_request(None, "approve", task_id=parked.id))
        assert done.status.state == COMPLETED, done.status
        out = MessageToDict(done.artifacts[0].parts[0].data)
        assert out["trip"] == "SFO -> JFK"
    finally:
        await client.close()


async def test_a_question_is_answered_after_a_restart(tmp_path: Any) -> None:
    """The question lives in the task store: a new server on the same store takes the answer."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_outputs(task_store=store) as url:
        client = await make_client(url, "JSONRPC", "1.0")
        try:
            asked = await send(client, request("out.trip", {"destination": "LHR", "seats": 3}))
            assert _question(asked)[0] == "From where?"
        finally:
            await client.close()
    with serve_outputs(task_store=store) as url:
        client = await make_client(url, "JSONRPC", "1.0")
        try:
            done = await send(client, text_request(None, "OSL", task_id=asked.id))
            assert done.status.state == COMPLETED, done.status
            out = MessageToDict(done.artifacts[0].parts[0].data)
            assert (out["trip"], out["seats"]) == ("OSL -> LHR", 3)
        finally:
            await client.close()

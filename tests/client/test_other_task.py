"""An agent's answer about another task than the one asked about is no answer.

``get_task("t-1")`` answered with task ``t-2``, a cancel of ``t-1`` answered with ``t-2``,
a stream of ``t-1`` that goes on with ``t-2``'s events: the client returned them as the
task asked about, and the CLI printed another task's end as this one's (``task
resubscribe t-1`` exited 0 on ``t-2``'s ``completed``). Each is
``InvalidAgentResponseError`` naming both ids (docs/client.md, *Errors*).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, InvalidAgentResponseError
from tests._support import cli, running_server
from tests.client._stub_agent import StubAgent, json_reply, sse_reply

#: what the error says: the task asked about, and the one answered
OTHER = r"for task t-1 with task t-2"


def _task(task_id: str, state: str = "TASK_STATE_WORKING") -> dict[str, Any]:
    return {"id": task_id, "contextId": "c-1", "status": {"state": state}}


def _done(task_id: str) -> dict[str, Any]:
    status = {"state": "TASK_STATE_COMPLETED"}
    return {"statusUpdate": {"taskId": task_id, "contextId": "c-1", "status": status}}


def _agent(answer: dict[str, Any], events: list[dict[str, Any]]) -> StubAgent:
    """Answers *answer* to a call, streams *events* to a stream or subscription."""

    def rpc(body: dict[str, Any]) -> Any:
        if body["method"] in ("SendStreamingMessage", "SubscribeToTask"):
            frames = [{"jsonrpc": "2.0", "id": body["id"], "result": e} for e in events]
            return sse_reply(*(f"data: {json.dumps(f)}\n\n" for f in frames))
        return json_reply({"jsonrpc": "2.0", "id": body["id"], "result": answer})

    return StubAgent(rpc=rpc, card_paths=())


@pytest.mark.parametrize("method", ["get_task", "cancel_task"])
async def test_a_call_about_one_task_answered_with_another_is_an_invalid_response(
    method: str,
) -> None:
    agent = _agent(_task("t-2"), [])
    async with running_server(agent) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match=OTHER):
            await getattr(client, method)("t-1")
        assert (await getattr(client, method)("t-2"))["id"] == "t-2"


@pytest.mark.parametrize(
    "events",
    [
        [{"task": _task("t-1")}, _done("t-2")],
        [{"task": _task("t-1")}, {"task": _task("t-2", "TASK_STATE_COMPLETED")}],
        [{"task": _task("t-1")}, {"message": {"messageId": "m", "taskId": "t-2", "parts": []}}],
    ],
    ids=["status-update", "task", "message"],
)
@pytest.mark.parametrize("how", ["stream_message", "resubscribe"])
async def test_a_stream_that_goes_on_with_another_task_is_an_invalid_response(
    events: list[dict[str, Any]], how: str
) -> None:
    seen: list[dict[str, Any]] = []

    async def follow(client: A2AClient) -> None:
        stream = client.stream_message("hi") if how == "stream_message" else None
        async for event in stream or client.resubscribe("t-1"):
            seen.append(event)

    agent = _agent(_task("t-1"), events)
    async with running_server(agent) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match=OTHER):
            await follow(client)
    assert [(e["id"], e["status"]["state"]) for e in seen] == [("t-1", "working")]


async def test_a_subscription_answered_with_another_task_from_the_start_is_refused() -> None:
    agent = _agent(_task("t-2"), [{"task": _task("t-2")}])
    async with running_server(agent) as url, A2AClient(url, protocol="1.0") as client:
        with pytest.raises(InvalidAgentResponseError, match=OTHER):
            await anext(aiter(client.resubscribe("t-1")))


async def test_the_cli_does_not_print_another_task_as_the_one_asked_about() -> None:
    agent = _agent(_task("t-2", "TASK_STATE_COMPLETED"), [{"task": _task("t-1")}, _done("t-2")])
    async with running_server(agent) as url:
        got = await cli("task", "get", url, "t-1", "--protocol", "1.0")
        follow = await cli("task", "resubscribe", url, "t-1", "--protocol", "1.0")
    for code, _out, err in (got, follow):
        assert code == 1, err
        assert err.startswith("error: InvalidAgentResponseError (-32006): ")
        assert "for task t-1 with task t-2" in err and len(err.splitlines()) == 1
    assert got[1] == ""


@pytest.mark.parametrize("how", ["send_message", "stream_message"])
async def test_a_follow_up_answered_with_another_task_is_an_invalid_response(how: str) -> None:
    """A message continuing task ``t-1`` (``task_id``) is answered with ``t-1``: an agent
    answering with ``t-2`` answered about another task (A2A 1.0.1 §3.4.2: a message's
    ``taskId`` names the task it continues)."""
    agent = _agent({"task": _task("t-2", "TASK_STATE_COMPLETED")}, [{"task": _task("t-2")}])
    async with running_server(agent) as url, A2AClient(url, protocol="1.0") as client:
        sent = (
            client.send_message("more", task_id="t-1")
            if how == "send_message"
            else anext(aiter(client.stream_message("more", task_id="t-1")))
        )
        with pytest.raises(InvalidAgentResponseError, match=OTHER):
            await sent

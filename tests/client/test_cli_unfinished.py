"""The CLI does not report a task done that the agent left running.

``call`` and ``task resubscribe`` exit 0 when the task completed or waits for input
(docs/client.md, *Command line*). An agent whose answer ends while the task still runs (a
stream closed before its final event, a status update marked ``final`` that is not, a
blocking send answered with a working task, a state the client cannot read) left them at
exit 0, as if the task had completed. They exit 6 now, as when ``--timeout`` ends the
wait: the task runs on, and the line names the command to follow it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests._support import cli, free_port, running_server
from tests.client._stub_agent import CARD_V10, StubAgent, json_reply, sse_reply

WORKING = {"id": "t-1", "contextId": "c-1", "status": {"state": "TASK_STATE_WORKING"}}


def _agent(port: int, events: list[dict[str, Any]], answer: dict[str, Any] = WORKING) -> StubAgent:
    """Streams *events* (then ends the stream) to a stream or subscription; answers
    *answer* to ``SendMessage`` and ``GetTask``."""

    def rpc(body: dict[str, Any]) -> Any:
        if body["method"] in ("SendStreamingMessage", "SubscribeToTask"):
            frames = [{"jsonrpc": "2.0", "id": body["id"], "result": e} for e in events]
            return sse_reply(*(f"data: {json.dumps(f)}\n\n" for f in frames))
        result = {"task": answer} if body["method"] == "SendMessage" else answer
        return json_reply({"jsonrpc": "2.0", "id": body["id"], "result": result})

    interface = {
        "url": f"http://127.0.0.1:{port}/rpc",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    return StubAgent(rpc=rpc, card=CARD_V10 | {"supportedInterfaces": [interface]})


def _status(state: str, **more: Any) -> dict[str, Any]:
    update = {"taskId": "t-1", "contextId": "c-1", "status": {"state": state}}
    return {"statusUpdate": update | more}


@pytest.mark.parametrize(
    ("args", "events", "answer", "state"),
    [
        # the stream ends after the task, with no final event
        (("call", "--text", "x", "--stream"), [{"task": WORKING}], WORKING, "working"),
        (("task", "resubscribe"), [{"task": WORKING}], WORKING, "working"),
        # ... and the task, read again once the stream ended, still runs
        (("call", "--text", "x"), [{"task": WORKING}], WORKING, "working"),
        # a status update marked final whose state is not
        (
            ("call", "--text", "x", "--stream"),
            [{"task": WORKING}, _status("TASK_STATE_WORKING", final=True)],
            WORKING,
            "working",
        ),
        # a state the client cannot read is no end either
        (
            ("call", "--text", "x", "--stream"),
            [{"task": WORKING | {"status": {"state": 99}}}],
            WORKING,
            "unknown",
        ),
    ],
    ids=["stream", "resubscribe", "wait", "final-working", "unknown-state"],
)
async def test_a_task_the_agent_left_running_exits_6_naming_how_to_follow_it(
    args: tuple[str, ...], events: list[dict[str, Any]], answer: dict[str, Any], state: str
) -> None:
    port = free_port()
    async with running_server(_agent(port, events, answer), port=port) as url:
        task = args[0] == "task"
        code, out, err = await cli(*((*args, url, "t-1") if task else (args[0], url, *args[1:])))
    assert code == 6, (out, err)
    assert json.loads(out.splitlines()[-1])["status"]["state"] == state
    follow = "resubscribe" if args[0] == "task" else "get"
    assert err == (
        f"error: the agent's answer ended before task t-1 did (it is {state}); it runs on: "
        f"follow it with: apcore-a2a task {follow} {url} t-1\n"
    )


async def test_a_blocking_call_answered_with_a_running_task_exits_6() -> None:
    port = free_port()
    agent = _agent(port, [])
    agent.card["capabilities"] = {"streaming": False}
    async with running_server(agent, port=port) as url:
        code, out, err = await cli("call", url, "--text", "x")
    assert code == 6, err
    assert json.loads(out)["status"]["state"] == "working"
    assert "ended before task t-1 did (it is working)" in err


async def test_no_wait_still_prints_a_running_task_and_exits_0() -> None:
    port = free_port()
    async with running_server(_agent(port, []), port=port) as url:
        code, out, err = await cli("call", url, "--text", "x", "--no-wait")
    assert (code, err) == (0, "")
    assert json.loads(out)["status"]["state"] == "working"

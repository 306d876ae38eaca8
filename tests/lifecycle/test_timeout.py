"""execution_timeout: call and stream modules end ``failed`` "Execution timed out"."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import GetTaskRequest, TaskState

from tests._sdk import request

from ._agent import agent_server
from ._client import collect, parts_data, sdk_client, summarize

FAILED = TaskState.TASK_STATE_FAILED


async def test_call_module_times_out(caplog: pytest.LogCaptureFixture) -> None:
    async with agent_server(caplog, execution_timeout=0.5) as agent:
        client = await sdk_client(agent.url)
        try:
            events = await collect(client.send_message(request("life.deaf", {"seconds": 5.0})))
            task_id = events[0].task.id
            # ended by the timeout, not the module: its thread still sleeps (order, not a
            # stopwatch)
            assert not agent.probe.done(task_id).is_set()
            assert [summarize(e) for e in events] == [
                ("task", "SUBMITTED"),
                ("status", "WORKING"),
                ("status", "FAILED"),
            ]
            text, data = parts_data(events[-1].status_update.status.message.parts)
            assert text == "Execution timed out"
            assert data["code"] == "MODULE_TIMEOUT"

            # The sync module's thread runs on; its late result must not revive the task.
            assert await asyncio.to_thread(agent.probe.done(task_id).wait, 30.0)
            assert agent.probe.token_seen_cancelled[task_id] is True
            # A window for a late result to (wrongly) reach the store: the scenario.
            await asyncio.sleep(0.2)
            stored = await client.get_task(GetTaskRequest(id=task_id))
            assert stored.status.state == FAILED
            assert list(stored.artifacts) == []
        finally:
            await client.close()


# The server's execution_timeout, and apcore's own per-module timeout (``resources.timeout``
# of life.short_nap, 200 ms), which leaves the module's task running on (it only consumes a
# late result): the run cancels the module either way.
@pytest.mark.parametrize(
    ("module", "execution_timeout"), [("life.nap", 0.3), ("life.short_nap", 60)]
)
async def test_async_call_module_times_out(
    caplog: pytest.LogCaptureFixture, module: str, execution_timeout: float
) -> None:
    async with agent_server(caplog, execution_timeout=execution_timeout) as agent:
        client = await sdk_client(agent.url, streaming=False)
        try:
            result = None
            async for response in client.send_message(request(module, {"seconds": 30})):
                result = response.task
            assert result is not None and result.status.state == FAILED
            assert parts_data(result.status.message.parts)[0] == "Execution timed out"
        finally:
            await client.close()
    # agent_server's exit checked that the abandoned module coroutine was cancelled


async def test_stream_module_times_out(caplog: pytest.LogCaptureFixture) -> None:
    async with agent_server(caplog, execution_timeout=0.4) as agent:
        client = await sdk_client(agent.url)
        try:
            events = await collect(client.send_message(request("life.drip", {"seconds": 10})))
            assert [summarize(e) for e in events] == [
                ("task", "SUBMITTED"),
                ("status", "WORKING"),
                ("artifact", False, False),
                ("status", "FAILED"),
            ]
            text, data = parts_data(events[-1].status_update.status.message.parts)
            assert text == "Execution timed out"
            assert data["code"] == "MODULE_TIMEOUT"
            stored = await client.get_task(GetTaskRequest(id=events[0].task.id))
            assert stored.status.state == FAILED
        finally:
            await client.close()
    assert any("Execution timed out" in r.getMessage() for r in caplog.records)

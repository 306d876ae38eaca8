"""execution_timeout: call and stream modules end ``failed`` "Execution timed out"."""

from __future__ import annotations

import asyncio
import time

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
            started = time.monotonic()
            events = await collect(client.send_message(request("life.deaf", {"seconds": 1.5})))
            assert time.monotonic() - started < 1.4  # ended by the timeout, not the module
            assert [summarize(e) for e in events] == [
                ("task", "SUBMITTED"),
                ("status", "WORKING"),
                ("status", "FAILED"),
            ]
            text, data = parts_data(events[-1].status_update.status.message.parts)
            assert text == "Execution timed out"
            assert data["code"] == "MODULE_TIMEOUT"

            # The sync module's thread runs on; its late result must not revive the task.
            task_id = events[0].task.id
            assert await asyncio.to_thread(agent.probe.done(task_id).wait, 5.0)
            assert agent.probe.token_seen_cancelled[task_id] is True
            await asyncio.sleep(0.2)
            stored = await client.get_task(GetTaskRequest(id=task_id))
            assert stored.status.state == FAILED
            assert list(stored.artifacts) == []
        finally:
            await client.close()


async def test_async_call_module_times_out(caplog: pytest.LogCaptureFixture) -> None:
    async with agent_server(caplog, execution_timeout=0.3) as agent:
        client = await sdk_client(agent.url, streaming=False)
        try:
            result = None
            async for response in client.send_message(request("life.nap", {"seconds": 10})):
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

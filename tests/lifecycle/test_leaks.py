"""No asyncio task outlives the server, checked on a loop closed without any cleanup.

Every test's server is already checked on shutdown (``agent_server``). This test goes
further: it runs every lifecycle path on a private event loop, stops the server, closes
the loop *without* cancelling what is left (as a crashing program would) and collects
garbage, then requires that asyncio logged nothing: no "Task was destroyed but it is
pending", no exception that was never retrieved.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState

from tests._sdk import request

from ._agent import DESTROYED, agent_server
from ._client import collect, sdk_client


async def _until_working(client: Any, task_id: str) -> None:
    deadline = time.monotonic() + 30
    while (task := await client.get_task(GetTaskRequest(id=task_id))).status.state != (
        TaskState.TASK_STATE_WORKING
    ):
        assert time.monotonic() < deadline, task
        await asyncio.sleep(0.02)


async def _every_path(caplog: pytest.LogCaptureFixture) -> None:
    async with agent_server(caplog, execution_timeout=1.0) as agent:
        client = await sdk_client(agent.url)
        polling = await sdk_client(agent.url, streaming=False)
        try:
            await collect(client.send_message(request("life.count", {"count": 3})))
            await collect(client.send_message(request("life.echo", {"text": "x"})))
            await collect(client.send_message(request("life.count", {"count": 3, "fail_after": 1})))
            await collect(client.send_message(request("life.quick", {"text": "x"})))
            await collect(client.send_message(request("life.drip", {"seconds": 5})))  # timeout
            await collect(client.send_message(request("life.nap", {"seconds": 5})))  # timeout
            for skill, data in (
                ("life.deaf", {"seconds": 1.2}),
                ("life.nap", {"seconds": 5}),
                ("life.count", {"count": 30, "delay": 0.05}),
            ):
                [started] = await collect(
                    polling.send_message(request(skill, data, return_immediately=True))
                )
                await _until_working(polling, started.task.id)  # cancel a running module
                canceled = await polling.cancel_task(CancelTaskRequest(id=started.task.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            parked = await collect(
                client.send_message(request("life.transfer", {"to": "a", "amount": 1}))
            )
            task_id = parked[0].task.id
            await collect(client.send_message(request(None, text="approve", task_id=task_id)))
            await collect(client.send_message(request("life.transfer", {"to": "b", "amount": 1})))
            # a stream still open when the server stops
            stream = client.send_message(request("life.gate", {}))
            await stream.__anext__()
            await stream.aclose()
        finally:
            await client.close()
            await polling.close()


def test_closing_the_loop_leaves_nothing_pending(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_every_path(caplog))
        leftover = [t for t in asyncio.all_tasks(loop) if not t.done()]
    finally:
        loop.close()
    assert leftover == []
    gc.collect()
    problems = [
        r.getMessage() for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR
    ]
    assert not [p for p in problems if DESTROYED in p]
    assert problems == []

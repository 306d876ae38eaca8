"""A stop with ``cancel_on_disconnect``: the streams the stop itself ends are not clients
that dropped them. A task parked in ``input-required`` (followed by a ``SubscribeToTask``
at the stop) stays parked in a durable store, and a later agent on it continues it."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from a2a.types import GetTaskRequest, SubscribeToTaskRequest, TaskState

from .._sdk import make_client, request
from .._support import free_port
from ._proc import collect_events, serve_process


@pytest.mark.parametrize("binding", ["JSONRPC", "GRPC"])
async def test_a_parked_task_followed_at_a_stop_survives_it(binding: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    settings: dict[str, Any] = {"task_store": store, "cancel_on_disconnect": True}
    events: list[Any] = []
    first = asyncio.Event()
    with serve_process(grpc_port=free_port(), shutdown_timeout=1, **settings) as (url, proc):
        sender = await make_client(url, binding, "1.0")  # no stream yet: nothing to drop
        [parked] = [e async for e in sender.send_message(request("ops.talk", {"text": "hi"}))]
        client = await make_client(url, binding, "1.0", streaming=True)
        task = parked.task if parked.HasField("task") else None
        task_id = task.id if task is not None else parked.status_update.task_id
        context_id = task.context_id if task is not None else parked.status_update.context_id
        stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
        reading = asyncio.ensure_future(collect_events(stream, events, first))
        await asyncio.wait_for(first.wait(), 30)  # the stream is open
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(reading, 60)  # a hang guard: the stream must end
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    with serve_process(**settings) as (url, _proc):
        client = await make_client(url, "JSONRPC", "1.0")
        stored = await client.get_task(GetTaskRequest(id=task_id))
        assert stored.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, stored
        reply = request("ops.talk", {"text": "bye"}, task_id=task_id, context_id=context_id)
        async for event in client.send_message(reply):
            last = event
        done = last.task if last.HasField("task") else None
        state = done.status.state if done is not None else last.status_update.status.state
    assert state == TaskState.TASK_STATE_COMPLETED, last
    assert "canceled it" not in out, out  # StreamDrops' line for a dropped stream's cancel

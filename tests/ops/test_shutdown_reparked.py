"""A subscription whose first snapshot was ``input-required`` at a stop where its task is
resumed and parks again during the drain: the stream ends only once it has sent that
second ``input-required`` (``ops/shutdown.last_events``, ``ops/stream_ends.py``,
``server/grpc_streams.CallEnds``), on SSE and on gRPC.

The subscriber reads the task as it stands (``input-required``), the task again as the
follow-up message resumes it (``input-required`` still), ``working``, then the second
ask. A stream is ended at the stop once the last state it sent is the one the drain saw
stored for its task; the resumed turn's ``working`` comes between the two asks, so the
first ask is not taken for the second (the stream would end before it only if the
drain's end came after the second ask was stored but before ``working`` was sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import SubscribeToTaskRequest, TaskState

from .._sdk import make_client, request
from .._support import TLS, free_port
from ._proc import collect_events, serve_process

#: How long the test waits for the server to act: a hang guard only.
GUARD = 60.0
IR = TaskState.TASK_STATE_INPUT_REQUIRED


def _state(event: Any) -> Any:
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return None


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_subscription_gets_the_second_park_of_its_task_during_the_drain(
    binding: str, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.touch()  # the first turn asks at once
    events: list[Any] = []
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(grpc_port=free_port(), task_store=store, shutdown_timeout=60) as (
        url,
        proc,
    ):
        sender = await make_client(url, binding, "1.0")
        asked = request("ops.ask_on_file", {"path": str(first)})
        [parked] = [e async for e in sender.send_message(asked)]
        task = parked.task
        assert task.status.state == IR, parked
        client = await make_client(url, binding, "1.0", streaming=True)
        stream = client.subscribe(SubscribeToTaskRequest(id=task.id))
        opened = asyncio.Event()

        reading = asyncio.ensure_future(collect_events(stream, events, opened))
        await asyncio.wait_for(opened.wait(), GUARD)  # the snapshot: input-required
        resumed = request(
            "ops.ask_on_file",
            {"path": str(second)},
            task_id=task.id,
            context_id=task.context_id,
            return_immediately=True,
        )
        [answer] = [e async for e in sender.send_message(resumed)]
        async with asyncio.timeout(GUARD):  # the resumed turn runs (until the file exists)
            while _state(events[-1]) != TaskState.TASK_STATE_WORKING:
                await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        async with httpx.AsyncClient(verify=TLS) as http, asyncio.timeout(GUARD):
            with contextlib.suppress(httpx.TransportError):
                while True:  # until the listener has closed: the drain has begun
                    await http.get(url + "/health")
                    await asyncio.sleep(0.02)
        second.touch()  # the turn asks again, during the drain
        await asyncio.wait_for(reading, GUARD)  # a hang guard: the stream must end
        code = await asyncio.to_thread(proc.wait, GUARD)
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert not isinstance(events[-1], Exception), (events, out)
    states = [_state(e) for e in events]  # the last event is the second ask's
    assert states[0] == IR and states[-1] == IR, (events, answer)
    assert TaskState.TASK_STATE_WORKING in states[1:-1], (events, answer)

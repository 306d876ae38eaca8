"""A task that reaches ``input-required`` during a stop's drain: its stream gets that event,
then a clean end. The drain counted only tasks that finished as ending their streams by
themselves; this one's stream was ended once its state was stored, which can come before
the event reaches the stream."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import SubscribeToTaskRequest, TaskState

from .._sdk import make_client, request
from .._support import TLS, free_port
from ._agent import V1, message_params, read_stream
from ._proc import collect_events, serve_process


def _states(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        result = event["result"]
        status = (result.get("task") or result.get("statusUpdate") or {}).get("status")
        if status is not None:
            out.append(status["state"])
    return out


@pytest.mark.parametrize("call", ["SendStreamingMessage", "SubscribeToTask"])
async def test_a_task_parked_during_the_drain_gets_its_event_to_its_stream(
    tmp_path: Path, call: str
) -> None:
    gate = tmp_path / "ask"
    events: list[dict[str, Any]] = []
    params = message_params("ops.ask_on_file", {"path": str(gate)})
    store = f"sqlite:///{tmp_path / 'tasks.db'}"  # its read after the save: a real await
    with serve_process(task_store=store, shutdown_timeout=30) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=60, verify=TLS) as http:
            if call == "SubscribeToTask":
                params["configuration"] = {"returnImmediately": True}
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
                sent = await http.post("/", json=body, headers=V1)
                task_id = sent.json()["result"]["task"]["id"]
                params = {"id": task_id}
            body = {"jsonrpc": "2.0", "id": 2, "method": call, "params": params}
            streaming = asyncio.ensure_future(read_stream(http, body, events))
            async with asyncio.timeout(30):
                while "TASK_STATE_WORKING" not in _states(events):
                    await asyncio.sleep(0.02)  # the module runs
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                while "Shutting down: waiting up to" not in proc.output():
                    await asyncio.sleep(0.02)  # the drain waits for the task
            gate.touch()  # the module asks: the task parks during the drain
            await asyncio.wait_for(streaming, 60)  # a clean end: no RemoteProtocolError
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert _states(events)[-1] == "TASK_STATE_INPUT_REQUIRED", json.dumps(events)[-2000:]


async def test_a_grpc_subscription_of_a_task_parked_during_the_drain_gets_its_event(
    tmp_path: Path,
) -> None:
    """The same over gRPC with the official a2a-sdk client: the ``input-required`` event,
    then the stream's normal end (status OK)."""
    gate = tmp_path / "ask"
    events: list[Any] = []
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_process(task_store=store, shutdown_timeout=30, grpc_port=free_port()) as (
        url,
        proc,
    ):
        client = await make_client(url, "GRPC", "1.0", streaming=True)
        started = await anext(
            aiter(client.send_message(request("ops.ask_on_file", {"path": str(gate)})))
        )
        task_id = started.task.id
        stream = client.subscribe(SubscribeToTaskRequest(id=task_id))
        reading = asyncio.ensure_future(collect_events(stream, events))
        async with asyncio.timeout(30):
            while not events:
                await asyncio.sleep(0.02)  # the task as it stands: the stream is open
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            while "Shutting down: waiting up to" not in proc.output():
                await asyncio.sleep(0.02)  # the drain waits for the task
        gate.touch()  # the module asks: the task parks during the drain
        await asyncio.wait_for(reading, 60)
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert not isinstance(events[-1], Exception), (events[-1], out)
    last = events[-1].status_update.status.state or events[-1].task.status.state
    assert last == TaskState.TASK_STATE_INPUT_REQUIRED, events

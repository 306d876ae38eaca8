"""An open stream gets its task's final ``canceled`` event at a stop, however late the
store takes it: ``serve()`` ends the streams after the drain, not on a clock of their own.

The drain cancels what still runs when ``shutdown_timeout`` ends; the event reaches a
stream once the store has saved it. Before, sse-starlette ended every stream
``shutdown_timeout`` + 1 s after the signal whatever the drain had done: a save that took
longer (22 cancels on a starved CPU, SQLite behind another writer) cut the stream before
its last event (``tests/ops/test_shutdown.py`` lost it about once in five runs beside two
busy loops). Here another process holds SQLite's write lock past that second, so the save
of the cancel waits for it, as on a loaded machine.
"""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from apcore_a2a.ops.shutdown import SHUTDOWN_MESSAGE

from .._support import TLS
from ._agent import V1, read_stream, send, streaming_body
from ._proc import serve_process
from .test_shutdown_store import _writes_held


async def test_a_stream_gets_its_canceled_event_however_late_the_store_takes_it(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    events: list[dict[str, Any]] = []
    body = streaming_body("ops.sleep", {"seconds": 60})
    with serve_process(task_store=store, shutdown_timeout=1) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=60, verify=TLS) as http:
            streaming = asyncio.ensure_future(read_stream(http, body, events))
            async with asyncio.timeout(30):
                while not any("statusUpdate" in event["result"] for event in events):
                    await asyncio.sleep(0.02)  # the module runs
            async with _writes_held(store):
                proc.send_signal(signal.SIGTERM)
                # Past where the stream was cut (the grace of 1 s, then 1 s more): the
                # cancel at the end of the grace waits for the lock to save its state.
                await asyncio.sleep(4)
            await asyncio.wait_for(streaming, 60)
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    last = events[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_CANCELED", events[-1]
    assert last["message"]["parts"][0]["text"] == SHUTDOWN_MESSAGE
    assert "is not stored" not in out  # the drain saw the state saved before it ended


#: (request of a SubscribeToTask of task {id}) on each binding and version
_SUBSCRIBE = {
    "jsonrpc-1.0": ("POST", "/", V1, {"method": "SubscribeToTask", "params": {"id": "{id}"}}),
    "jsonrpc-0.3": ("POST", "/", {}, {"method": "tasks/resubscribe", "params": {"id": "{id}"}}),
    "rest-1.0": ("GET", "/tasks/{id}:subscribe", V1, None),
    "rest-0.3": ("POST", "/v1/tasks/{id}:subscribe", {}, None),
}


@pytest.mark.parametrize("call", list(_SUBSCRIBE))
async def test_a_stream_the_drain_does_not_end_ends_cleanly_after_it(
    tmp_path: Path, call: str
) -> None:
    """A ``SubscribeToTask`` stream of a task parked in ``input-required`` gets no final
    event from the drain. With the streams' grace unbounded, uvicorn's bound on open
    connections cut it: a truncated chunked body (``RemoteProtocolError``) and an ERROR
    traceback. It now ends as a complete response once the drain has ended."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    events: list[str] = []
    with serve_process(task_store=store, shutdown_timeout=1) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=60, verify=TLS) as http:
            task = await send(http, "ops.talk", {"text": "hi"})
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
            method, path, headers, rpc = _SUBSCRIBE[call]
            body = None
            if rpc is not None:
                body = {"jsonrpc": "2.0", "id": 2, **rpc, "params": {"id": task["id"]}}
            request = http.build_request(
                method, path.replace("{id}", task["id"]), json=body, headers=headers
            )
            response = await http.send(request, stream=True)
            try:
                assert response.status_code == 200, await response.aread()
                lines = response.aiter_lines()
                async for line in lines:
                    if line.startswith("data:"):
                        events.append(line)
                        break  # the task as it stands: the stream is open
                proc.send_signal(signal.SIGTERM)
                async for line in lines:  # raised RemoteProtocolError (incomplete chunks)
                    if line.startswith("data:"):
                        events.append(line)
            finally:
                await response.aclose()
        code = await asyncio.to_thread(proc.wait, 60)
        out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    assert not re.search(r"\bERROR\b", out), out
    # ended by the stop, not by uvicorn's bound on open connections
    assert "timeout graceful shutdown exceeded" not in out, out
    assert len(events) == 1, events
    assert re.search(r"INPUT_REQUIRED|input-required", events[0]), events

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
import json
import signal
from pathlib import Path
from typing import Any

import httpx

from apcore_a2a.ops.shutdown import SHUTDOWN_MESSAGE

from .._support import TLS
from ._agent import V1, message_params
from ._proc import serve_process
from .test_shutdown_store import _writes_held


async def test_a_stream_gets_its_canceled_event_however_late_the_store_takes_it(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    events: list[dict[str, Any]] = []
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": message_params("ops.sleep", {"seconds": 60}),
    }
    with serve_process(task_store=store, shutdown_timeout=1) as (url, proc):
        async with httpx.AsyncClient(base_url=url, timeout=60, verify=TLS) as http:

            async def watch() -> None:
                async with http.stream("POST", "/", json=body, headers=V1) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data:"):
                            events.append(json.loads(line[5:]))

            streaming = asyncio.ensure_future(watch())
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

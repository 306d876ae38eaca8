"""A stream following a task whose ``canceled`` state the store refused at a stop: no
event of that state comes (nothing was stored), and the stream ends cleanly once the
drain has ended. It was left to end by itself, as the drain had seen its task end, and
stayed until uvicorn's bound on open connections cut it: a truncated chunked body for
the client, an ERROR traceback in the log."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import httpx
import pytest

from .._support import ROOT, TLS, ServerProcess, free_port, stop_process, wait_http
from ._agent import message_params, read_stream, send

_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import TaskState
from tests.ops._agent import build_registry
from apcore_a2a import serve

class RefusesCancels(InMemoryTaskStore):
    async def save(self, task, context=None):
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            raise RuntimeError("this store keeps no canceled task")
        await super().save(task, context)

serve(build_registry(), host="127.0.0.1", port=int(sys.argv[1]), shutdown_timeout=1,
      task_store=RefusesCancels())
"""


@pytest.mark.parametrize("call", ["SendStreamingMessage", "SubscribeToTask"])
async def test_a_stream_whose_canceled_state_the_store_refused_ends_cleanly(call: str) -> None:
    port = free_port()
    proc = ServerProcess([sys.executable, "-c", _SCRIPT.format(root=str(ROOT)), str(port)])
    url = f"http://127.0.0.1:{port}"
    events: list[dict[str, Any]] = []
    params = message_params("ops.sleep", {"seconds": 60})
    try:
        wait_http(url + "/health", proc=proc)
        async with httpx.AsyncClient(base_url=url, timeout=60, verify=TLS) as http:
            if call == "SubscribeToTask":
                task = await send(http, "ops.sleep", {"seconds": 60}, return_immediately=True)
                params = {"id": task["id"]}
            body = {"jsonrpc": "2.0", "id": 1, "method": call, "params": params}
            streaming = asyncio.ensure_future(read_stream(http, body, events))
            async with asyncio.timeout(30):
                while not events:
                    await asyncio.sleep(0.02)  # the module runs
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(streaming, 60)  # SubscribeToTask: RemoteProtocolError
        code = await asyncio.to_thread(proc.wait, 60)
    finally:
        stop_process(proc, timeout=30)
    out = proc.output()
    assert code == 0, out
    assert "timeout graceful shutdown exceeded" not in out, out
    assert "Exception in ASGI application" not in out, out
    assert "final state canceled of task" in out, out  # named, as the drain names it
    # nothing stored, nothing sent: the task as it was (or the SDK's error of its stream)
    assert "TASK_STATE_CANCELED" not in str(events), events

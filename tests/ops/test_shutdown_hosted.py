"""An app of ``async_serve()`` run by the host's own uvicorn stops as ``serve()`` does: an
open stream gets its task's last event (here the drain's ``canceled``), then a clean end.

Before, sse-starlette ended such a stream ``shutdown_timeout`` + 1 s after the signal,
while the drain began only at the lifespan's shutdown, once uvicorn's connections had
closed: the stream's last event was ``working``, and the task was canceled after its
client had gone.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import Any

import httpx
import pytest

from apcore_a2a.ops.shutdown import SHUTDOWN_MESSAGE

from .._support import ROOT, TLS, ServerProcess, free_port, stop_process, wait_http
from ._agent import read_stream, streaming_body

#: the host's program: uvicorn.run() of the app, plain or mounted in a Starlette app
_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from tests.ops._agent import build_registry
from apcore_a2a import async_serve
port, mounted, settings = json.loads(sys.argv[1])
app = async_serve(build_registry(gated=True), port=port, **settings)
if mounted:
    app = Starlette(routes=[Mount("/agent", app=app)])
uvicorn.run(app, host="127.0.0.1", port=port, log_level="info")
"""


@pytest.mark.parametrize("mounted", [False, True], ids=["app", "mounted"])
async def test_a_hosted_apps_stream_gets_its_canceled_event_then_ends(mounted: bool) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}" + ("/agent" if mounted else "")
    args = json.dumps([port, mounted, {"shutdown_timeout": 1}])
    proc = ServerProcess([sys.executable, "-c", _SCRIPT.format(root=str(ROOT)), args], cwd=ROOT)
    events: list[dict[str, Any]] = []
    body = streaming_body("ops.sleep", {"seconds": 60})
    try:
        wait_http(base + "/health", proc=proc)
        async with httpx.AsyncClient(base_url=base + "/", timeout=60, verify=TLS) as http:
            streaming = asyncio.ensure_future(read_stream(http, body, events))
            async with asyncio.timeout(30):
                while not any("statusUpdate" in event["result"] for event in events):
                    await asyncio.sleep(0.02)  # the module runs
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(streaming, 60)  # a clean end: no RemoteProtocolError
        code = await asyncio.to_thread(proc.wait, 60)
        proc.judged = True  # uvicorn.run() ends by delivering the signal to itself again
    finally:
        stop_process(proc, timeout=30)
    out = proc.output()
    assert code == -signal.SIGTERM, out
    assert "Traceback" not in out, out
    last = events[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_CANCELED", (events[-1], out)
    assert last["message"]["parts"][0]["text"] == SHUTDOWN_MESSAGE


#: the host's program: a uvicorn.Server run in a thread (no signal handlers of its own),
#: stopped on SIGTERM by its embedder with ``handle_exit`` or its ``should_exit``
_THREAD_SCRIPT = """
import json, signal, sys, threading
sys.path.insert(0, {root!r})
import uvicorn
from tests.ops._agent import build_registry
from apcore_a2a import async_serve
port, how = json.loads(sys.argv[1])
app = async_serve(build_registry(gated=True), port=port, shutdown_timeout=1)
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="info"))
thread = threading.Thread(target=server.run)
def stop(*_):
    if how == "handle_exit":
        server.handle_exit(signal.SIGTERM, None)
    else:
        server.should_exit = True
signal.signal(signal.SIGTERM, stop)
thread.start()
while thread.is_alive():
    thread.join(0.1)
"""


@pytest.mark.parametrize("how", ["handle_exit", "should_exit"])
async def test_an_app_under_a_uvicorn_in_a_thread_ends_its_stream_at_its_stop(how: str) -> None:
    # The thread's server installs no signal handler: the app finds it in its own loop.
    # (Before, handle_exit ended the stream by sse-starlette's process-wide flag, with
    # `working` last; should_exit left it open until the client left.)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = json.dumps([port, how])
    script = _THREAD_SCRIPT.format(root=str(ROOT))
    proc = ServerProcess([sys.executable, "-c", script, args], cwd=ROOT)
    events: list[dict[str, Any]] = []
    body = streaming_body("ops.sleep", {"seconds": 60})
    try:
        wait_http(base + "/health", proc=proc)
        async with httpx.AsyncClient(base_url=base + "/", timeout=60, verify=TLS) as http:
            streaming = asyncio.ensure_future(read_stream(http, body, events))
            async with asyncio.timeout(30):
                while not any("statusUpdate" in event["result"] for event in events):
                    await asyncio.sleep(0.02)  # the module runs
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(streaming, 30)  # a clean end: no RemoteProtocolError
        code = await asyncio.to_thread(proc.wait, 60)
    finally:
        stop_process(proc, timeout=30)
    out = proc.output()
    assert code == 0, out
    assert "Traceback" not in out, out
    last = events[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_CANCELED", (events[-1], out)
    assert last["message"]["parts"][0]["text"] == SHUTDOWN_MESSAGE

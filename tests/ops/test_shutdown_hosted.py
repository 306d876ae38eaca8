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
    # uvicorn.run() ends by delivering the signal to itself again
    await _stopped_mid_stream(proc, base, exit_code=-signal.SIGTERM)


async def _stopped_mid_stream(proc: ServerProcess, base: str, exit_code: int) -> None:
    """Follow a 60 s task's stream on the agent *proc* serves at *base*, send SIGTERM
    once it runs: the stream gets its ``canceled`` event, then a clean end, and the
    process exits with *exit_code*, no traceback."""
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
        proc.judged = True
    finally:
        stop_process(proc, timeout=30)
    out = proc.output()
    assert code == exit_code, out
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
    await _stopped_mid_stream(proc, base, exit_code=0)


#: two uvicorn servers in one event loop, each with an agent; the program stops the
#: second one alone (its should_exit) once a file appears, then prints "B ended"
_TWO_SCRIPT = """
import asyncio, json, pathlib, sys
sys.path.insert(0, {root!r})
import uvicorn
from tests.ops._agent import build_registry
from apcore_a2a import async_serve
port_a, port_b, flag = json.loads(sys.argv[1])
def server(port, timeout):
    app = async_serve(build_registry(gated=True), port=port, shutdown_timeout=timeout)
    return uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="info"))
a, b = server(port_a, 0), server(port_b, 3)
async def stop_b():
    while not pathlib.Path(flag).exists():
        await asyncio.sleep(0.05)
    b.should_exit = True
async def serve_b():
    await b.serve()
    print("B ended", flush=True)
async def main():
    await asyncio.gather(a.serve(), serve_b(), stop_b())
asyncio.run(main())
"""


async def test_the_stop_of_another_server_in_the_loop_leaves_the_apps_stream_alone(
    tmp_path: Any,
) -> None:
    # A's agent drains at once (shutdown_timeout 0); B's stop lasts 3 s. A watched the
    # server that took SIGTERM, B (started last): its drain canceled A's task at B's stop.
    port_a, port_b = free_port(), free_port()
    flag, gate = tmp_path / "stop-b", tmp_path / "gate"
    args = json.dumps([port_a, port_b, str(flag)])
    proc = ServerProcess([sys.executable, "-c", _TWO_SCRIPT.format(root=str(ROOT)), args], cwd=ROOT)
    on_a: list[dict[str, Any]] = []
    on_b: list[dict[str, Any]] = []
    try:
        wait_http(f"http://127.0.0.1:{port_a}/health", proc=proc)
        wait_http(f"http://127.0.0.1:{port_b}/health", proc=proc)
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_a}/", timeout=60, verify=TLS) as a,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}/", timeout=60, verify=TLS) as b,
        ):
            body_a = streaming_body("ops.await_file", {"path": str(gate)})
            streaming_a = asyncio.ensure_future(read_stream(a, body_a, on_a))
            body_b = streaming_body("ops.sleep", {"seconds": 60})
            streaming_b = asyncio.ensure_future(read_stream(b, body_b, on_b))
            async with asyncio.timeout(30):
                while not all(any("statusUpdate" in e["result"] for e in s) for s in (on_a, on_b)):
                    await asyncio.sleep(0.02)  # both modules run
            flag.touch()
            await asyncio.wait_for(streaming_b, 30)  # B's stream: canceled, then its end
            async with asyncio.timeout(30):
                while "B ended" not in proc.output():
                    await asyncio.sleep(0.05)
            gate.touch()  # A's task ends by itself: A was not stopping
            await asyncio.wait_for(streaming_a, 30)
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 60)
        proc.judged = True  # A's uvicorn ends by delivering the signal to itself again
    finally:
        stop_process(proc, timeout=30)
    out = proc.output()
    assert code == -signal.SIGTERM, out
    assert "Traceback" not in out, out
    assert on_b[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED", out
    last = on_a[-1]["result"]
    state = (last.get("statusUpdate") or last.get("task") or {}).get("status", {}).get("state")
    assert state == "TASK_STATE_COMPLETED", (on_a, out)

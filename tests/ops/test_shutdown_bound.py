"""SIGTERM ends the process even when a module will not stop.

A sync module blocked in its thread, or an async one that swallows ``CancelledError``,
is canceled like any task when ``shutdown_timeout`` runs out, and ignores it. The process
then waits ``shutdown_force_timeout`` more for it and exits with status 1 and one log
line naming each task (and module) it abandoned, instead of living on until the module
returns (it never might).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest

from apcore_a2a.ops.ctrl_c import ECHO
from apcore_a2a.ops.exit_deadline import NAMED, pending_work

from .._support import ROOT, TLS, ServerProcess, free_port, stop_process, wait_http
from ._agent import send, wait_state

#: Hang guard only: how long the test waits for the process to be gone after SIGTERM
#: (a stubborn module would keep it alive 120 s).
GUARD = 60.0

_SCRIPT = """
import json, sys
sys.path.insert(0, {root!r})
from tests.ops._stubborn import build_registry
from apcore_a2a import serve
serve(build_registry(), **json.loads(sys.argv[1]))
"""


def _serve(**settings: object) -> tuple[str, ServerProcess]:
    port = free_port()
    args = json.dumps({"host": "127.0.0.1", "port": port, **settings})
    proc = ServerProcess([sys.executable, "-c", _SCRIPT.format(root=str(ROOT)), args], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health", proc=proc)
    return url, proc


@pytest.mark.parametrize("module", ["stuck.sync", "stuck.async"])
async def test_sigterm_abandons_a_module_that_ignores_cancellation(
    tmp_path: Path, module: str
) -> None:
    gate = tmp_path / "never"  # never created: the module would run on
    url, proc = _serve(
        task_store=f"sqlite:///{tmp_path / 'tasks.db'}",
        shutdown_timeout=1,
        shutdown_force_timeout=1,
    )
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            task = await send(http, module, {"path": str(gate)}, return_immediately=True)
            await wait_state(http, task["id"], {"TASK_STATE_WORKING"})
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, GUARD)
        out = proc.output()
    finally:
        proc.judged = True  # exit 1 is this test's expectation, not stop_process's
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 1, out
    line = re.search(r"ERROR apcore_a2a\.ops\.shutdown: (.*abandon.*)", out)
    assert line is not None, out
    assert f"task {task['id']} (module {module})" in line.group(1)
    assert "shutdown_force_timeout" in line.group(1)
    # What the process still waits on, by name: the module's coroutine, or its thread.
    waiting = re.search(r"waiting on (.*)\); exiting", line.group(1))
    assert waiting is not None, line.group(1)
    stuck = "StuckAsync.execute" if module == "stuck.async" else "thread apcore-a2a_"
    assert stuck in waiting.group(1) and "/" not in waiting.group(1), waiting.group(1)
    assert "Traceback" not in out


async def test_sigterm_with_nothing_stubborn_still_exits_0(tmp_path: Path) -> None:
    gate = tmp_path / "release"
    url, proc = _serve(shutdown_timeout=30, shutdown_force_timeout=1)
    async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
        task = await send(http, "stuck.sync", {"path": str(gate)}, return_immediately=True)
        await wait_state(http, task["id"], {"TASK_STATE_WORKING"})
    proc.send_signal(signal.SIGTERM)
    gate.touch()  # the module finishes inside the drain
    stop_process(proc, timeout=GUARD)
    out = proc.output()
    assert "abandon" not in out, out


# A host program that calls serve(): its own thread has work to finish after the stop
# began, past the moment shutdown_force_timeout would end the process.
_HOST_SCRIPT = """
import json, pathlib, sys, threading, time
sys.path.insert(0, {root!r})
from tests.ops._stubborn import build_registry
from apcore_a2a import serve
settings = json.loads(sys.argv[1])
stopping, gate = pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])

def host_work():
    while not stopping.exists():
        time.sleep(0.05)
    time.sleep({after})
    print("host work done", flush=True)
    gate.touch()  # and only then does the stubborn module return

threading.Thread(target=host_work, daemon=True).start()
serve(build_registry(), **settings)
print("serve returned", flush=True)
"""


@pytest.mark.parametrize("workers", [1, 2])
async def test_shutdown_force_timeout_0_never_ends_the_host_process(
    tmp_path: Path, workers: int
) -> None:
    """``serve()`` ends the process (``os._exit``) when work ignores its cancel, and with
    workers the parent kills such a worker; with ``shutdown_force_timeout=0`` neither
    happens: the host program's own thread finishes its work, the stubborn module then
    returns, and ``serve()`` returns."""
    stopping, gate = tmp_path / "stopping", tmp_path / "gate"
    port = free_port()
    settings = {
        "host": "127.0.0.1",
        "port": port,
        "task_store": f"sqlite:///{tmp_path / 'tasks.db'}",
        "shutdown_timeout": 1,
        "shutdown_force_timeout": 0,
        "workers": workers,
        "cluster": workers > 1,
    }
    # past the worker's forced exit (1 s rounded up + 3 s) and the parent's kill (+ 2 s)
    script = _HOST_SCRIPT.format(root=str(ROOT), after=1 + 3 + 2 + 3)
    argv = [sys.executable, "-c", script, json.dumps(settings), str(stopping), str(gate)]
    proc = ServerProcess(argv, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", proc=proc)
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            task = await send(http, "stuck.sync", {"path": str(gate)}, return_immediately=True)
            await wait_state(http, task["id"], {"TASK_STATE_WORKING"})
        proc.send_signal(signal.SIGTERM)
        stopping.touch()
        code = await asyncio.to_thread(proc.wait, GUARD)
        out = proc.output()
    finally:
        proc.judged = True
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "abandon" not in out, out
    assert "host work done" in out and "serve returned" in out, out
    assert code == 0, out


async def test_the_exit_line_names_at_most_a_few_tasks_and_counts_the_rest() -> None:
    async def hold(gate: asyncio.Event) -> None:
        await gate.wait()

    gate = asyncio.Event()
    held = [asyncio.create_task(hold(gate), name=f"held-{i:02}") for i in range(NAMED + 4)]
    await asyncio.sleep(0)
    try:
        # Read from another thread, as the exit deadline's own thread reads it.
        said = await asyncio.to_thread(pending_work, asyncio.get_running_loop())
    finally:
        gate.set()
        await asyncio.gather(*held)
    named = re.findall(r"task (held-\d+) \(([^)]*)\)", said)
    assert 0 < len(named) <= NAMED, said  # sorted by name: this test's own task may be one
    assert all(chain.endswith(".hold > Event.wait") for _, chain in named), said
    assert re.search(r"\b\d+ more\b", said), said


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_third_ctrl_c_ends_the_stop_at_once(tmp_path: Path, workers: int) -> None:
    """After a second Ctrl-C the stop still waits for what will not end (a module that
    swallows its cancel, a frozen database as the store closes) until the exit deadline:
    ``shutdown_timeout`` + 3 s + ``shutdown_force_timeout``. A third Ctrl-C was ignored
    (128 s here); it now ends the process at once, status 1, naming what it abandons.
    With workers, the SIGINTs go to the parent alone (``docker run`` without a terminal),
    which kills its workers on the third."""
    store = {"task_store": f"sqlite:///{tmp_path / 'tasks.db'}", "cluster": workers > 1}
    url, proc = _serve(shutdown_timeout=120, shutdown_force_timeout=5, workers=workers, **store)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            gate = str(tmp_path / "never")
            task = await send(http, "stuck.async", {"path": gate}, return_immediately=True)
            await wait_state(http, task["id"], {"TASK_STATE_WORKING"})
        for said in ("Shutting down: waiting up to", "Second Ctrl-C: the stop waits"):
            proc.send_signal(signal.SIGINT)
            async with asyncio.timeout(GUARD):  # a hang guard
                while said not in proc.output():
                    await asyncio.sleep(0.05)
            await asyncio.sleep(ECHO)  # a person's next Ctrl-C, not this one delivered again
        proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(proc.wait, GUARD)  # before: 128 s
        out = proc.output()
    finally:
        proc.judged = True  # exit 1 is this test's expectation, not stop_process's
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 1, out
    assert "Traceback" not in out, out
    if workers > 1:
        assert "Third Ctrl-C: killing the workers still running" in out, out
        return
    line = re.search(
        r"ERROR apcore_a2a\.ops\.shutdown: (Third Ctrl-C: exiting at once, abandoning .*)", out
    )
    assert line is not None, out
    assert f"task {task['id']} (module stuck.async)" in line.group(1), line.group(1)

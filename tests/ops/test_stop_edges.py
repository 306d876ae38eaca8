"""The edges of a stop: a Ctrl-C once ``serve()`` has returned while a module's thread
still runs, one Ctrl-C delivered twice (the terminal's and a wrapper's), and ``--workers``
asked for from another thread. Real processes, real signals, their output and status."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import re
import signal
import socket
import sys
import threading
from pathlib import Path

import httpx
import pytest

from apcore_a2a import StartupError, serve

from .._support import ROOT, TLS, ServerProcess, free_port, wait_http
from ._agent import build_registry, send, wait_state

#: Hang guard only: how long the test waits for the process to be gone.
GUARD = 60.0

_STUCK = """
import json, sys
sys.path.insert(0, {root!r})
from tests.ops._stubborn import build_registry
from apcore_a2a import serve
serve(build_registry(), **json.loads(sys.argv[1]))
print("serve returned", flush=True)
"""

#: the CLI's extension: the stubborn sync module (the command runs from the repository)
_EXTENSION = """
from tests.ops._stubborn import StuckSync


class Stuck(StuckSync):
    pass
"""


async def _until(proc: ServerProcess, said: str) -> None:
    async with asyncio.timeout(GUARD):  # a hang guard
        while said not in proc.output():
            assert proc.poll() is None, proc.output()
            await asyncio.sleep(0.05)


async def _waiting_at_exit(pids: list[int]) -> None:
    """Until the main thread of one of *pids* has waited on a lock for a while: the
    interpreter joins the module's thread at exit (a wait for the GIL is short)."""
    seen = dict.fromkeys(pids, 0)
    async with asyncio.timeout(GUARD):  # a hang guard
        while max(seen.values()) < 10:
            for pid in pids:
                with contextlib.suppress(OSError):  # a worker gone
                    waits = "futex" in Path(f"/proc/{pid}/wchan").read_text()
                    seen[pid] = seen[pid] + 1 if waits else 0
            await asyncio.sleep(0.05)


def _ended(proc: ServerProcess) -> tuple[int, str]:
    try:
        return proc.wait(GUARD), proc.output()
    finally:
        proc.judged = True
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["serve", "cli", "cli-unforced", "workers"])
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
async def test_a_ctrl_c_while_the_exit_waits_for_a_module_ends_the_process_in_one_line(
    tmp_path: Path, how: str, second: signal.Signals
) -> None:
    """SIGTERM stops the server; a sync module ignores its cancel, and the interpreter
    waits for its thread at exit (until ``shutdown_force_timeout``, or for ever with 0). A
    Ctrl-C then was a ``KeyboardInterrupt`` traceback, and status 0 (``serve()``) or -2
    (the CLI); it now ends the process at once with one line naming what it abandons,
    status 1. A worker of ``--workers`` died of it without a word (the module's thread
    took the signal its main thread held); it says so too, a Ctrl-C in the terminal. A
    SIGTERM then (``kill``, an orchestrator's second ask) killed it without a word (status
    -15): it says so in its own line, status 1, as a Ctrl-C does."""
    port = free_port()
    force = "0" if how == "cli-unforced" else "120"  # the deadline: 124 s, or none
    stop = {"shutdown_timeout": 1, "shutdown_force_timeout": int(force)}
    if how == "serve":
        settings = json.dumps({"host": "127.0.0.1", "port": port, **stop})
        argv = [sys.executable, "-c", _STUCK.format(root=str(ROOT)), settings]
        skill = "stuck.sync"
    else:
        (tmp_path / "ext").mkdir()
        (tmp_path / "ext" / "stuck.py").write_text(_EXTENSION)
        argv = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--extensions-dir", str(tmp_path / "ext")]
        argv += ["--shutdown-timeout", "1", "--shutdown-force-timeout", force]
        if how == "workers":
            argv += ["--workers", "2", "--cluster", "--task-store", f"sqlite:///{tmp_path}/t.db"]
        skill = "stuck"
    proc = ServerProcess(argv, cwd=ROOT, session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", proc=proc)
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            path = str(tmp_path / "never")
            task = await send(http, skill, {"path": path}, return_immediately=True)
            await wait_state(http, task["id"], {"TASK_STATE_WORKING"})
        pids = [proc.pid]
        if how == "workers":
            found = re.search(r"with 2 worker processes \((\d+), (\d+)\)", proc.output())
            assert found is not None, proc.output()
            pids = [int(pid) for pid in found.groups()]
        os.killpg(proc.pid, signal.SIGTERM)
        await _until(proc, "serve returned" if how == "serve" else "Finished server process")
        await _waiting_at_exit(pids)
        os.killpg(proc.pid, second)  # Ctrl-C in the terminal
    finally:
        code, out = await asyncio.to_thread(_ended, proc)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert code == 1, out
    said = "Ctrl-C" if second == signal.SIGINT else "SIGTERM"
    if how == "cli-unforced":  # no deadline: the exit names the thread it no longer waits for
        line = f"ERROR apcore_a2a.ops.shutdown: {said} at exit: abandoning thread apcore-a2a_"
        assert line in out, out
        return
    [line] = re.findall(rf"ERROR apcore_a2a\.ops\.shutdown: ({said} after the stop: .*)", out)
    assert f"abandoning task {task['id']} (module {skill})" in line, line
    assert "main thread in " in line and "_shutdown" in line, line  # at the exit's wait


#: a wrapper that forwards what it gets to its child, a moment later (argv[2] seconds: 0.02
#: lets the child take the terminal's own first, else it would find both pending and run
#: its handler once; 0.3 is a forward on a loaded host), and says when it has; with a
#: terminal's path in argv[1], it makes that its session's controlling terminal first
_WRAPPER = """
import os, signal, subprocess, sys, time
if sys.argv[1]:
    os.open(sys.argv[1], os.O_RDWR)  # a session leader's first terminal: its own
child = subprocess.Popen(sys.argv[3:])
def forward(sig, _frame):
    time.sleep(float(sys.argv[2]))
    child.send_signal(sig)
    print("wrapper forwarded", sig, flush=True)
signal.signal(signal.SIGINT, forward)
signal.signal(signal.SIGTERM, forward)
sys.exit(child.wait())
"""

_GATED = """
import json, sys
sys.path.insert(0, {root!r})
from tests.ops._agent import build_registry
from apcore_a2a import serve
serve(build_registry(gated=True), **json.loads(sys.argv[1]))
"""


async def _forwarded(proc: ServerProcess, count: int) -> None:
    async with asyncio.timeout(GUARD):  # a hang guard
        while proc.output().count("wrapper forwarded") < count:
            assert proc.poll() is None, proc.output()
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("workers", "presses", "delay", "tty"),
    [
        (1, 1, 0.02, False),
        (1, 1, 0.3, False),
        (1, 2, 0.3, False),
        (2, 1, 0.3, False),
        (2, 2, 0.02, False),
        (2, 2, 0.3, False),
        (1, 2, 0.3, True),
        (2, 1, 0.3, True),
    ],
)
async def test_one_ctrl_c_through_a_forwarding_wrapper_counts_once(
    tmp_path: Path, workers: int, presses: int, delay: float, tty: bool
) -> None:
    """A terminal sends Ctrl-C to its whole process group, and a wrapper in it (``uv
    run``, ``npm exec``) forwards it to its child again: the server took the two for a
    second Ctrl-C and abandoned its running task (status 1), and the person's second
    Ctrl-C was a third (the process ended at once; with workers, the parent counted the two
    and killed them). Told apart by time (within 0.1 s), a forward later than that on a
    loaded host still counted twice; it is told by its sender now, the parent, whenever
    it comes. One Ctrl-C is one: the task finishes in the drain after the forward, status
    0; the second stops the wait for it, status 1. Ctrl-C is sent to the group as a
    terminal does (by a process: ``os.killpg``), or typed on a real one (a pseudo-terminal
    the wrapper's session has: the kernel sends it)."""
    gate, port = tmp_path / "release", free_port()
    settings = {"host": "127.0.0.1", "port": port, "shutdown_timeout": 60, "workers": workers}
    settings |= {"cluster": workers > 1, "task_store": f"sqlite:///{tmp_path / 'tasks.db'}"}
    server = [sys.executable, "-c", _GATED.format(root=str(ROOT)), json.dumps(settings)]
    terminal, typed = pty.openpty() if tty else (-1, -1)
    path = os.ttyname(typed) if tty else ""
    wrapper = [sys.executable, "-c", _WRAPPER, path, str(delay), *server]
    proc = ServerProcess(wrapper, cwd=ROOT, session=True)

    def ctrl_c() -> None:
        if tty:
            os.write(terminal, b"\x03")  # typed: the terminal's driver sends SIGINT
        else:
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal does

    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", proc=proc)
        async with httpx.AsyncClient(base_url=url, timeout=30, verify=TLS) as http:
            task = await send(http, "ops.await_file", {"path": str(gate)}, return_immediately=True)
            await wait_state(http, task["id"], {"TASK_STATE_WORKING"})
        ctrl_c()
        await _until(proc, "Shutting down: waiting up to")
        await _forwarded(proc, 1)  # the task still runs: the forward met the drain
        if presses == 2:
            ctrl_c()  # the person's second Ctrl-C
        else:
            gate.touch()  # the task finishes within the drain
    finally:
        code, out = await asyncio.to_thread(_ended, proc)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left
        for fd in {terminal, typed} - {-1}:
            os.close(fd)
    assert "Third Ctrl-C" not in out, out
    if presses == 1:
        assert "Second Ctrl-C" not in out, out  # before: "...for 1 running task(s)", status 1
        assert code == 0, out
    else:
        assert "Second Ctrl-C: the stop waits no longer for 1 running task(s)" in out, out
        assert code == 1, out


_MASKED = """
import json, signal, sys
sys.path.insert(0, {root!r})
from tests.ops._agent import build_registry
from apcore_a2a import serve
def state():
    held = sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))
    return [held, signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)]
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1}})  # the host's own
before = state()
serve(build_registry(), **json.loads(sys.argv[1]))
print("host's signals as before:", state() == before, before, state(), flush=True)
"""


def _main_thread_holds(pid: int) -> int:
    status = Path(f"/proc/{pid}/task/{pid}/status").read_text()
    [held] = re.findall(r"^SigBlk:\s*([0-9a-f]+)$", status, re.M)
    return int(held, 16)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_the_sender_is_read_while_serving_and_the_host_mask_is_as_before() -> None:
    """While ``serve()`` runs, its main thread holds SIGINT and SIGTERM (a thread of its
    own takes them and reads who sent each); when it returns, the host's signal mask and
    handlers are as they were."""
    port = free_port()
    settings = json.dumps({"host": "127.0.0.1", "port": port})
    argv = [sys.executable, "-c", _MASKED.format(root=str(ROOT)), settings]
    proc = ServerProcess(argv, cwd=ROOT, session=True, scripts=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
        held = _main_thread_holds(proc.pid)
        bits = {sig: 1 << (sig - 1) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
        assert all(held & bit for bit in bits.values()), hex(held)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal
    finally:
        code, out = await asyncio.to_thread(_ended, proc)
    assert code == 0, out
    assert "host's signals as before: True" in out, out


def test_workers_from_another_thread_are_refused_before_anything_starts(tmp_path: Path) -> None:
    """Only the main thread can take the signals the workers' parent forwards: it raised a
    bare ``ValueError`` once it had reserved the port (left reserved). It is now refused
    with a ``StartupError`` saying why, before anything starts."""
    port, db = free_port(), tmp_path / "tasks.db"
    raised: list[BaseException] = []

    def call() -> None:
        try:
            serve(
                build_registry(),
                host="127.0.0.1",
                port=port,
                workers=2,
                cluster=True,
                task_store=f"sqlite:///{db}",
            )
        except BaseException as exc:  # judged below
            raised.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(GUARD)
    [error] = raised
    assert isinstance(error, StartupError), repr(error)
    assert "workers=2 needs the main thread" in str(error), str(error)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # the port is not held
    assert not db.exists()

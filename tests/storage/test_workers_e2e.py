"""``--workers 2``: two server processes on one port, one cluster store (SQLite, PostgreSQL).

Connections land on either worker (the kernel spreads them), so each scenario below
crosses workers on most runs: work is done by both processes, a task is canceled and an
approval resumed from any connection, and SIGTERM stops the whole group with exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .._postgres import store_url
from .._support import (
    CLI_STOP_TIMEOUT,
    ROOT,
    START_TIMEOUT,
    TLS,
    ServerProcess,
    cli_server,
    free_port,
    stop_process,
)
from .test_replicas_e2e import PROBES

V10 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def workers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with contextlib.ExitStack() as stack:
        folder = tmp_path_factory.mktemp("workers")
        store = stack.enter_context(store_url(request.param, folder, agents=2))
        args = ["--extensions-dir", PROBES, "--workers", "2", "--cluster", "--task-store", store]
        env = {"A2A_CLUSTER_POLL_INTERVAL": "0.1"}
        url, _proc = stack.enter_context(cli_server(args, env=env))
        yield url


async def _rpc(url: str, method: str, params: dict[str, Any]) -> Any:
    # A fresh connection per call, so the kernel may pick either worker.
    async with httpx.AsyncClient(timeout=60, verify=TLS) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = await http.post(url + "/", json=body, headers=V10)
    return response.json()


def _message(skill: str | None, data: dict[str, Any], task_id: str = "") -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": data}],
    }
    if skill:
        msg["metadata"] = {"skillId": skill}
    if task_id:
        msg["taskId"] = task_id
    return msg


def _journal(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


async def test_both_workers_serve_and_share_tasks(workers: str, tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    work = {"journal": str(journal), "seconds": 0}
    done = await asyncio.gather(
        *(
            _rpc(workers, "SendMessage", {"message": _message("probe.work", work)})
            for _ in range(40)
        )
    )
    assert {d["result"]["task"]["status"]["state"] for d in done} == {"TASK_STATE_COMPLETED"}
    pids = {pid for word, pid in _journal(journal) if word == "finished"}
    assert len(pids) == 2, f"one worker did all the work: {pids}"
    # Every task is visible from every connection, whichever worker ran it.
    found = await asyncio.gather(
        *(_rpc(workers, "GetTask", {"id": d["result"]["task"]["id"]}) for d in done)
    )
    assert {f["result"]["status"]["state"] for f in found} == {"TASK_STATE_COMPLETED"}


async def test_cancel_and_approval_from_any_connection(workers: str, tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    started = await _rpc(
        workers,
        "SendMessage",
        {
            "message": _message("probe.work", {"journal": str(journal), "seconds": 300}),
            "configuration": {"returnImmediately": True},
        },
    )
    task_id = started["result"]["task"]["id"]
    deadline = time.monotonic() + 30
    while not any(word == "started" for word, _ in _journal(journal)):
        assert time.monotonic() < deadline, "the module never started"
        await asyncio.sleep(0.05)
    canceled = await _rpc(workers, "CancelTask", {"id": task_id})
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    while not any(word == "canceled" for word, _ in _journal(journal)):
        assert time.monotonic() < deadline, (
            f"the cancel never reached the module: {_journal(journal)}"
        )
        await asyncio.sleep(0.05)

    pay = tmp_path / "pay.txt"
    parked = await _rpc(
        workers,
        "SendMessage",
        {"message": _message("probe.pay", {"journal": str(pay), "amount": 7})},
    )
    assert parked["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    approved = await _rpc(
        workers,
        "SendMessage",
        {"message": _message(None, {"approved": True}, parked["result"]["task"]["id"])},
    )
    assert approved["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [w for w, *_ in _journal(pay)] == ["paid"]


def test_workers_without_a_shared_store_are_refused_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "apcore_a2a", "serve", "--extensions-dir", PROBES, "--workers", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "workers=2 needs a shared SQL task store in cluster mode" in lines[0]


def _children(pid: int) -> list[int]:
    """Processes whose parent is *pid* (Linux ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # "pid (comm) state ppid ...": the command may hold spaces, read after its ")"
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    """Whether *pid* still runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _assert_stopped(workers: list[int]) -> None:
    """*workers* stop by themselves (a generous hang guard: a graceful stop takes well
    under a second); those still running then are killed and the test fails."""
    deadline = time.monotonic() + 60
    while alive := [pid for pid in workers if _running(pid)]:
        if time.monotonic() > deadline:
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            pytest.fail(f"workers {alive} kept running after their parent was killed")
        time.sleep(0.1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent death: Linux only")
def test_workers_stop_when_their_parent_is_killed(tmp_path: Path) -> None:
    # A parent killed with SIGKILL (the OOM killer, kill -9) forwards no signal: workers
    # left serving would share the port with the group a service manager starts next.
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    args = ["--extensions-dir", PROBES, "--workers", "2", "--cluster", "--task-store", store]
    with cli_server(args) as (_url, parent):
        workers = _children(parent.pid)
        assert len(workers) == 2, workers
        parent.kill9()
        _assert_stopped(workers)


#: In a child Python: each worker notes its pid in a folder there, then waits 3 s at the
#: point *hook* names (a sitecustomize's ``_pause()``), so the test can act while the
#: worker is there (on a loaded machine such a window lasts long enough for it to happen).
_PAUSE = """
import os, pathlib, time
def _pause():
    (pathlib.Path(os.environ["APCORE_A2A_TEST_PAUSE"]) / str(os.getpid())).touch()
    time.sleep(3)
"""
#: uvicorn's ``Server.run`` builds its event loop before it installs its signal handlers
_BEFORE_UVICORN_HANDLERS = """
import uvicorn.config
_loop_factory = uvicorn.config.Config.get_loop_factory
def _paused(self):
    _pause()
    return _loop_factory(self)
uvicorn.config.Config.get_loop_factory = _paused
"""
#: between a worker's fork and ``_child``'s first line
_BEFORE_CHILD = """
import apcore_a2a._runner as runner
_child = runner._child
def _paused(*args):
    _pause()
    return _child(*args)
runner._child = _paused
"""


@contextlib.contextmanager
def _paused_workers(tmp_path: Path, hook: str) -> Iterator[tuple[ServerProcess, list[int]]]:
    """A ``--workers 2`` agent whose two workers are both paused where *hook* says."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_PAUSE + hook)
    pauses = tmp_path / "paused"
    pauses.mkdir()
    path = os.pathsep.join(p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "APCORE_A2A_TEST_PAUSE": str(pauses)}
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1"]
    cmd += ["--port", str(free_port()), "--extensions-dir", PROBES, "--workers", "2"]
    parent = ServerProcess([*cmd, "--cluster", "--task-store", store], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while len(workers := _children(parent.pid)) != 2 or not all(
            (pauses / str(pid)).exists() for pid in workers
        ):
            assert parent.poll() is None and time.monotonic() < deadline, parent.output()
            time.sleep(0.05)
        yield parent, workers
    finally:
        stop_process(parent, timeout=CLI_STOP_TIMEOUT)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent death: Linux only")
def test_workers_stop_when_their_parent_dies_before_uvicorn_handles_signals(
    tmp_path: Path,
) -> None:
    # The parent-death SIGTERM then came to the handler serve() keeps around uvicorn's
    # (for an exit status 0), which dropped it: the worker served on for ever.
    with _paused_workers(tmp_path, _BEFORE_UVICORN_HANDLERS) as (parent, workers):
        parent.kill9()
        _assert_stopped(workers)
        # Each stopped as on a SIGTERM of its own: gracefully, not killed by the signal.
        for pid in workers:
            assert f"Finished server process [{pid}]" in parent.output(), parent.output()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only")
def test_a_worker_signalled_before_its_own_handlers_stops_without_a_traceback(
    tmp_path: Path,
) -> None:
    # Between its fork and _child's first line a worker still had the parent's forwarding
    # handler: a Ctrl-C to the group ran it there, and it failed on its siblings
    # ("can only test a child process") with a traceback. A worker now holds the signal
    # until its server takes it, and stops as a server does (it died of it: exit 1).
    with _paused_workers(tmp_path, _BEFORE_CHILD) as (parent, workers):
        os.kill(workers[0], signal.SIGINT)
        _assert_stopped(workers[:1])
        # The parent sees its worker gone and stops the other, as for any lost worker.
        assert parent.wait(timeout=START_TIMEOUT) == 0, parent.output()
        assert f"Finished server process [{workers[0]}]" in parent.output(), parent.output()
        assert "Traceback" not in parent.output(), parent.output()


#: in the parent, before it forks its first worker
_BEFORE_FORKS = """
import multiprocessing.process
_start = multiprocessing.process.BaseProcess.start
def _paused(self):
    if self.name.endswith("-0"):
        _pause()
    return _start(self)
multiprocessing.process.BaseProcess.start = _paused
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only")
def test_a_stop_that_comes_while_the_workers_are_forked_reaches_each(tmp_path: Path) -> None:
    # A SIGTERM to the parent before it had forked a worker was forwarded to none: the
    # workers served on, the parent waited shutdown_timeout + 10 s and killed them (exit 1).
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_PAUSE + _BEFORE_FORKS)
    pauses = tmp_path / "paused"
    pauses.mkdir()
    path = os.pathsep.join(p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "APCORE_A2A_TEST_PAUSE": str(pauses)}
    cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1"]
    cmd += ["--port", str(free_port()), "--extensions-dir", PROBES, "--workers", "2"]
    cmd += ["--cluster", "--task-store", f"sqlite:///{tmp_path / 'tasks.db'}"]
    cmd += ["--shutdown-timeout", "60"]
    parent = ServerProcess(cmd, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not (pauses / str(parent.pid)).exists():
            assert parent.poll() is None and time.monotonic() < deadline, parent.output()
            time.sleep(0.05)
        parent.send_signal(signal.SIGTERM)
        code = parent.wait(timeout=START_TIMEOUT)  # a hang guard; before: 70 s, then exit 1
        parent.judged = True
    finally:
        stop_process(parent, timeout=CLI_STOP_TIMEOUT)
    out = parent.output()
    assert "did not stop in time" not in out, out
    assert code == 0, out
    assert "Traceback" not in out, out

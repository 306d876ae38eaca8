"""A Ctrl-C that ends the process through the exit deadline (``ExitDeadline.exit_soon``,
the third Ctrl-C of a stop, or one once ``serve()`` returned with work abandoned) ends it
wherever the signal found the main thread: a real process, its main thread inside one of
threading's own locks as the SIGINT arrives (the registry's, which ``Thread.start`` and
``threading.enumerate`` take as the loop starts an executor's thread; the shutdown locks',
which a join takes). The handler starts a daemon thread to exit from: a deadlock with
either was reported as possible. CPython 3.11's new thread reports its start before it
takes the registry lock, and a daemon thread takes no shutdown lock: this guards that."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .._support import ROOT

SCRIPT = r"""
import os, signal, sys, threading, time

from apcore_a2a.ops.exit_deadline import ExitDeadline

deadline = ExitDeadline(60.0, 60.0, lambda: [("t-1", "stuck.module")])
deadline.arm()
deadline.take_ctrl_c()
print("ready", flush=True)
with getattr(threading, sys.argv[1]):  # the main thread inside threading's lock
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
time.sleep(60)
"""


@pytest.mark.parametrize("lock", ["_active_limbo_lock", "_shutdown_locks_lock"])
def test_a_ctrl_c_inside_a_threading_lock_still_ends_the_process(lock: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, lock],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"the process hung after its Ctrl-C: {out!r} {err!r}") from None
    assert process.returncode == 1, err
    assert (
        "Ctrl-C after the stop: exiting at once, abandoning task t-1 (module stuck.module)" in err
    )
    assert "Traceback" not in err

"""Tripwire of ``upstream/interpreter_exit.py``: CPython's steps of its exit that
``end_process`` takes are still there and still do what it relies on."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_PROGRAM = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from apcore_a2a.upstream.interpreter_exit import end_process

    def late() -> None:
        time.sleep(0.2)
        print("thread done", flush=True)

    ThreadPoolExecutor(1).submit(int).result()  # an idle worker: ends once its pool stops
    threading.Thread(target=late).start()
    atexit.register(lambda: sys.stdout.write("atexit ran"))  # flushed by end_process
    end_process(3)
    """
)


def test_end_process_waits_for_threads_runs_atexit_and_flushes() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout.splitlines() == ["thread done", "atexit ran"]

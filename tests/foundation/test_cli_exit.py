"""The ``apcore-a2a`` command ends its process without tearing down every module (about
0.4 s of CPU after ``serve`` stopped), but as Python's own exit would in all else: a
module's unfinished thread is waited for, every ``atexit`` handler runs after it (telemetry
exporters flush there), and what was printed reaches the reader."""

from __future__ import annotations

import contextlib
import sys
import textwrap
import time
from pathlib import Path

from tests._support import ServerProcess, cli_server, stop_process

#: A module whose import leaves a thread that ends only once the test lets it, an idle
#: thread pool, and an ``atexit`` handler that notes whether that thread had ended when it ran.
_MODULE = """
import atexit, pathlib, threading, time
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel

HERE = pathlib.Path({folder!r})


def _work() -> None:
    while not (HERE / "go").exists():
        time.sleep(0.01)
    (HERE / "thread-done").write_text("yes")


threading.Thread(target=_work, name="unfinished", daemon=False).start()
# an idle pool's worker (not a daemon either) ends once Python's exit stops its pool
ThreadPoolExecutor(1).submit(int).result()
atexit.register(lambda: (HERE / "atexit").write_text(str((HERE / "thread-done").exists())))


class Nothing(BaseModel):
    pass


class Hold:
    description = "answers nothing"
    input_schema = Nothing
    output_schema = Nothing

    def execute(self, inputs: dict, context: object) -> dict:
        return {{}}
"""


def test_serve_waits_for_a_modules_thread_then_runs_the_atexit_handlers(tmp_path: Path) -> None:
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "hold.py").write_text(textwrap.dedent(_MODULE.format(folder=str(tmp_path))))
    with contextlib.ExitStack() as stack:
        # the thread ends however the test does: a process left waiting for it would not
        stack.callback((tmp_path / "go").write_text, "")
        _base, proc = stack.enter_context(cli_server(["--extensions-dir", str(ext)]))
        proc.terminate()
        while "Finished server process" not in proc.output():
            assert proc.poll() is None, proc.output()
            time.sleep(0.05)
        # The server has stopped; the module's thread still runs, so the process does too.
        time.sleep(0.3)
        assert proc.poll() is None, proc.output()
        assert not (tmp_path / "atexit").exists()
        (tmp_path / "go").write_text("")
        assert proc.wait(timeout=30) == 0, proc.output()
    assert (tmp_path / "thread-done").read_text() == "yes"
    assert (tmp_path / "atexit").read_text() == "True"  # after the thread ended


def test_what_a_command_prints_reaches_a_pipe_in_full() -> None:
    # stdout is a pipe here (block-buffered): the table is the last thing written.
    proc = ServerProcess([sys.executable, "-m", "apcore_a2a", "config", "table"])
    assert proc.wait(timeout=60) == 0, proc.output()
    lines = proc.output().splitlines()
    assert lines[0].startswith("| file key |") and len(lines) > 40
    assert lines[-1].startswith("| `") and lines[-1].endswith(" |")
    stop_process(proc, timeout=5)

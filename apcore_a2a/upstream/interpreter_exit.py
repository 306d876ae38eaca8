"""The ``apcore-a2a`` process ends without CPython's teardown of every module it loaded.

CPython 3.11's exit (``Py_FinalizeEx``), once the command has returned, waits for the
threads, runs the ``atexit`` handlers, flushes the output, and then collects and frees the
objects of every module: for the 1,400 modules of ``serve`` (a2a-sdk's imports bring
SQLAlchemy, FastAPI, grpc), about 0.4 s of CPU, a second or more on a busy machine, after
the agent has stopped. Nothing reads those objects again, so :func:`end_process` takes the
steps before that teardown, in CPython's order and with its own functions, and ends the
process. Only the console script calls it: a program that imports us keeps Python's exit.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from typing import NoReturn


class _Terminated(BaseException):
    """A SIGTERM came while the exit waited for a thread."""


def _terminated(_signum: int, _frame: object) -> None:
    raise _Terminated


def end_process(code: int) -> NoReturn:
    """Exit with *code* as Python's exit would, less the teardown of the modules; a Ctrl-C
    or a SIGTERM while it waits for a thread ends that wait, as Python's Ctrl-C does, in
    one line (not its ``KeyboardInterrupt`` traceback; a SIGTERM was a silent death, status
    -15), with status 1 if *code* was 0: the thread's work is abandoned."""
    # A handler of the process's own (ExitDeadline's, with its deadline) stays.
    term = signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if term:
        signal.signal(signal.SIGTERM, _terminated)
    # Thread pools stopped, then every thread that is not a daemon (a module's work) waited
    # for: a module that ignored its cancel, with shutdown_force_timeout 0, waits for ever.
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except (KeyboardInterrupt, _Terminated) as stop:
        main = threading.main_thread()
        running = [t.name for t in threading.enumerate() if not t.daemon and t is not main]
        code = code or 1  # work was abandoned: not a clean stop
        logging.getLogger("apcore_a2a.ops.shutdown").error(
            "%s at exit: abandoning thread %s still running; exiting with status %d",
            "Ctrl-C" if isinstance(stop, KeyboardInterrupt) else "SIGTERM",
            ", thread ".join(running) or "(none)",
            code,
        )
    finally:
        if term:  # what follows (atexit's handlers) dies of it, as before
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # logging, telemetry exporters, weakref finalizers, a coverage run's data
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # Python's answer to output it could not flush
    os._exit(code)

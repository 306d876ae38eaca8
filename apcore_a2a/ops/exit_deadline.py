"""The bound of a stopping process: it is gone ``shutdown_force_timeout`` seconds after
the drain and its streams had their time, even if some work ignores its cancel.

A module can refuse to stop: a plain ``def execute`` blocked in its thread (the
interpreter joins that thread before it exits), an ``async def execute`` that swallows
``CancelledError`` (``asyncio.run`` waits for it). Nothing inside the process can end
such a call, so :class:`ExitDeadline` ends the process: it logs one line naming the tasks
and modules it abandons and exits with :data:`ABANDONED_EXIT`, skipping what is left of
the interpreter's teardown. Only ``serve()`` (the CLI) arms it: it owns the process,
and says so in its docstring; ``shutdown_force_timeout=0`` leaves it unarmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

logger = logging.getLogger("apcore_a2a.ops.shutdown")

#: Most tasks and threads the exit line names (the rest are counted).
NAMED = 8
#: Coroutines named per task: the outermost, then the innermost ones.
_DEPTH = 5

#: Exit status of a process that stopped without the work it abandoned.
ABANDONED_EXIT = 1
#: The exit line of a Ctrl-C once ``serve()`` has returned, the deadline counting.
_AFTER_STOP = "Ctrl-C after the stop: exiting at once, abandoning %s (the process waited on %s)"
#: ...and of a SIGTERM then (an orchestrator's second ask, ``kill``): it died of the signal
#: without a word, status -15.
_TERM_AFTER_STOP = _AFTER_STOP.replace("Ctrl-C", "SIGTERM", 1)


class ExitDeadline:
    """Exit the process *seconds* after :meth:`arm` unless :meth:`disarm` came first.

    *abandoned* lists what still runs then (``(task_id, module_id)`` pairs), for the log
    line; *force_timeout* is the part of *seconds* that setting gave, named in that line.
    """

    def __init__(
        self,
        seconds: float,
        force_timeout: float,
        abandoned: Callable[[], list[tuple[str, str]]],
    ) -> None:
        self.seconds = seconds
        self.force_timeout = force_timeout
        self.abandoned = abandoned
        self._disarmed = threading.Event()
        self._watch: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leaving = False

    def arm(self) -> None:
        """Start counting (once; a second call keeps the first deadline)."""
        if self._watch is not None:
            return
        with contextlib.suppress(RuntimeError):  # armed outside a loop: no tasks to name
            self._loop = asyncio.get_running_loop()
        # A daemon thread: it neither keeps the process alive nor waits for the loop,
        # which the stubborn work may be blocking.
        self._watch = threading.Thread(
            target=self._wait, name="apcore-a2a-exit-deadline", daemon=True
        )
        self._watch.start()

    def disarm(self) -> None:
        """The shutdown finished: nothing to force."""
        self._disarmed.set()

    def exit_soon(self, why: str, interrupted: FrameType | None) -> None:
        """:meth:`exit_now` with *why*, from a thread of its own (once): called by a signal
        handler, which may have interrupted the main thread (in *interrupted*, which the
        line names) inside a lock the exit line's reads take."""
        if not self._leaving:
            self._leaving = True
            # A daemon: it takes none of threading's shutdown locks, which the interrupted
            # main thread may hold (a join), and reports its start before it takes the
            # registry's (tests/ops/test_exit_from_handler.py).
            threading.Thread(target=self.exit_now, args=(why, interrupted), daemon=True).start()

    def take_ctrl_c(self) -> None:
        """``serve()`` stopped, but work it abandoned runs on (the interpreter waits for a
        module's thread at exit) until the deadline: a Ctrl-C meanwhile ends the process at
        once, status :data:`ABANDONED_EXIT`, with one line, as in the stop. It was
        Python's ``KeyboardInterrupt`` at exit: a traceback, then status 0 or -2. A SIGTERM
        meanwhile does the same, in its own words (it was a silent death, status -15)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, lambda _sig, frame: self.exit_soon(_AFTER_STOP, frame))
            signal.signal(
                signal.SIGTERM, lambda _sig, frame: self.exit_soon(_TERM_AFTER_STOP, frame)
            )

    def _wait(self) -> None:
        if self._disarmed.wait(self.seconds):
            return
        self.exit_now()

    def exit_now(self, why: str | None = None, interrupted: FrameType | None = None) -> None:
        """Log what is abandoned and end the process with :data:`ABANDONED_EXIT`. *why*,
        the line's words in place of the deadline's, has two ``%s``: what is abandoned,
        and what the stop waits on (the main thread in *interrupted*, if given)."""
        try:
            self._say(why, interrupted)
        finally:  # whatever the log did, the process ends
            os._exit(ABANDONED_EXIT)

    def _say(self, why: str | None, interrupted: FrameType | None) -> None:
        calls = self.abandoned()
        what = (
            ", ".join(f"task {task} (module {module})" for task, module in calls)
            if calls
            else "no module call, but the shutdown did not finish (a connection, the task "
            "store or a background task)"
        )
        if why is None:
            why = (
                f"Shutting down: abandoning %s, still running {self.force_timeout:.1f} s "
                "after the drain (shutdown_force_timeout; waiting on %s)"
            )
        logger.error(
            why + "; exiting with status %d",
            what,
            pending_work(self._loop, interrupted),
            ABANDONED_EXIT,
        )
        logging.shutdown()  # flush the handlers: os._exit skips the interpreter's teardown
        sys.stderr.flush()


def pending_work(
    loop: asyncio.AbstractEventLoop | None, interrupted: FrameType | None = None
) -> str:
    """What a stop that does not finish waits on, for its operator: the tasks of *loop*
    (each with the coroutines it awaits through), the main thread's innermost functions
    (from *interrupted*, where a signal found it, if given) and the other threads that
    keep the process alive. Names only (no file paths, no values), at most :data:`NAMED`
    of each. Safe from another thread than *loop*'s."""
    parts: list[str] = []
    tasks: list[asyncio.Task[Any]] = []
    if loop is not None:
        with contextlib.suppress(RuntimeError):  # changed while read from this thread
            tasks = sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name())
    parts += [f"task {t.get_name()} ({_chain(t.get_coro())})" for t in tasks[:NAMED]]
    main = threading.main_thread()
    frame = interrupted or sys._current_frames().get(main.ident or 0)
    if frame is not None and main is not threading.current_thread():
        names: list[str] = []
        while frame is not None and len(names) < _DEPTH - 1:
            names.append(frame.f_code.co_qualname)
            frame = frame.f_back
        parts.append("main thread in " + " < ".join(names))
    threads = [t for t in threading.enumerate() if not t.daemon and t is not main and t.is_alive()]
    parts += [f"thread {t.name}" for t in threads[:NAMED]]
    hidden = max(len(tasks) - NAMED, 0) + max(len(threads) - NAMED, 0)
    if hidden:
        parts.append(f"{hidden} more")
    return ", ".join(parts) or "nothing named"


def _chain(awaited: Any) -> str:
    """``outer > ... > innermost`` of a coroutine and the coroutines it awaits, by
    qualified name (the future the innermost one awaits has none)."""
    names: list[str] = []
    for _ in range(100):  # an await chain is no deeper; a bound all the same
        name = getattr(awaited, "__qualname__", None)
        if name is None:
            break
        names.append(name)
        awaited = (
            getattr(awaited, "cr_await", None)
            or getattr(awaited, "gi_yieldfrom", None)
            or getattr(awaited, "ag_await", None)
        )
    if len(names) > _DEPTH:
        names = [names[0], "...", *names[-(_DEPTH - 1) :]]
    return " > ".join(names)

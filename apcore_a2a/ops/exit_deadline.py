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

import logging
import os
import sys
import threading
from collections.abc import Callable

logger = logging.getLogger("apcore_a2a.ops.shutdown")

#: Exit status of a process that stopped without the work it abandoned.
ABANDONED_EXIT = 1


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

    def arm(self) -> None:
        """Start counting (once; a second call keeps the first deadline)."""
        if self._watch is not None:
            return
        # A daemon thread: it neither keeps the process alive nor waits for the loop,
        # which the stubborn work may be blocking.
        self._watch = threading.Thread(
            target=self._wait, name="apcore-a2a-exit-deadline", daemon=True
        )
        self._watch.start()

    def disarm(self) -> None:
        """The shutdown finished: nothing to force."""
        self._disarmed.set()

    def _wait(self) -> None:
        if self._disarmed.wait(self.seconds):
            return
        self.exit_now()

    def exit_now(self) -> None:
        """Log what is abandoned and end the process with :data:`ABANDONED_EXIT`."""
        calls = self.abandoned()
        what = (
            ", ".join(f"task {task} (module {module})" for task, module in calls)
            if calls
            else "no module call, but the shutdown did not finish (a connection, the task "
            "store or a background task)"
        )
        logger.error(
            "Shutting down: abandoning %s, still running %.1f s after the drain "
            "(shutdown_force_timeout); exiting with status %d",
            what,
            self.force_timeout,
            ABANDONED_EXIT,
        )
        logging.shutdown()  # flush the handlers: os._exit skips the interpreter's teardown
        sys.stderr.flush()
        os._exit(ABANDONED_EXIT)

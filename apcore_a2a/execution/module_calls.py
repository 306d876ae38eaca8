"""The module calls running in this process, wherever they run (a task, a pool thread).

A canceled run stops waiting for its module at once, but the module itself may go on: a
plain ``def execute`` keeps its thread, an ``async def execute`` may swallow the
cancellation. :class:`ModuleCalls` knows which calls have not returned yet, so a shutdown
that cannot wait for them any longer can say what it abandons (ops/exit_deadline.py).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator


class ModuleCalls:
    """The module calls that have started and not yet returned (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._calls: dict[int, tuple[str, str]] = {}

    @contextlib.contextmanager
    def running(self, task_id: str, module_id: str) -> Iterator[None]:
        """Count the call of *module_id* for *task_id* as running while the block runs
        (enter it in the thread or task the module runs in)."""
        key = next(self._ids)
        with self._lock:
            self._calls[key] = (task_id, module_id)
        try:
            yield
        finally:
            with self._lock:
                del self._calls[key]

    def snapshot(self) -> list[tuple[str, str]]:
        """``(task_id, module_id)`` of each call still running, oldest first."""
        with self._lock:
            return [self._calls[key] for key in sorted(self._calls)]

"""A continued task's module starts once the task is stored ``working`` (cluster mode).

A message that continues a parked task (an approval, an answer to a question) emits
``working``, and the module would start at once: the SDK saves the event afterwards, in
its own task. A cancel another replica stored meanwhile made that save fail only once the
module had run: a payment made on a task that stayed ``canceled``, its approval never
recorded. Waiting for the save puts the two in the store's order: a cancel stored first
fails the save, and the SDK cancels the run before the module starts; a cancel stored
after it cancels a running module (docs/reliability.md). One process orders a cancel and a
run itself, so it does not wait.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState


class StoredWorking:
    """Runs waiting for their task's ``working`` save; :meth:`saved` is a save listener."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[None]] = {}

    def saved(self, task: Task, context: ServerCallContext) -> None:
        """Tell the run waiting for *task* that its ``working`` status is stored."""
        if task.status.state != TaskState.TASK_STATE_WORKING:
            return
        waiting = self._waiting.pop(task.id, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    @contextlib.contextmanager
    def expected(self, task_id: str) -> Iterator[asyncio.Future[None]]:
        """Watch for *task_id*'s next ``working`` save (before it is emitted: the save
        may land first); await the yielded future once it is emitted. A save refused by a
        cancel stored first cancels the waiting run (the SDK does)."""
        waiting = self._waiting[task_id] = asyncio.get_running_loop().create_future()
        try:
            yield waiting
        finally:
            if self._waiting.get(task_id) is waiting:
                del self._waiting[task_id]
            waiting.cancel()

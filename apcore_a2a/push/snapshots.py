"""The task as it was just saved, for deliveries that carry the whole ``Task`` (0.3).

The SDK hands the push sender only the event (a status or artifact update), but a 0.3
receiver expects the whole task. The SDK's consumer saves the updated task through the
task store and then, in the same coroutine, calls the sender; so a thin view of the
task store that remembers each saved task gives the sender exactly the task after the
event, with no extra read and without knowing the task's owner.

Only the latest save of each task is kept, as a reference (no copy), and the sender takes
it away when it handles the event; a bounded number of entries guards against saves that
no event follows (a cancel from another replica, recovery of interrupted tasks).

Example::

    snapshots = TaskSnapshots()
    handler = DefaultRequestHandler(task_store=snapshots.observe(store), ...)
"""

from __future__ import annotations

from a2a.server.cluster import VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import Task
from cachetools import LRUCache

from apcore_a2a.storage.observed import observe_saves

__all__ = ["TaskSnapshots"]


class TaskSnapshots:
    """The last saved ``Task`` per task id (at most *limit* tasks)."""

    def __init__(self, limit: int = 1024) -> None:
        self._tasks: LRUCache[str, Task] = LRUCache(maxsize=limit)

    def remember(self, task: Task) -> None:
        self._tasks[task.id] = task

    def take(self, task_id: str) -> Task | None:
        """The task as last saved (forgotten afterwards), or ``None``."""
        return self._tasks.pop(task_id, None)

    def __len__(self) -> int:
        return len(self._tasks)

    def observe(self, store: TaskStore | VersionedTaskStore) -> TaskStore | VersionedTaskStore:
        """*store* seen through a view that remembers every saved task here."""
        return observe_saves(store, self._saved)

    def _saved(self, task: Task, context: ServerCallContext) -> None:
        self.remember(task)

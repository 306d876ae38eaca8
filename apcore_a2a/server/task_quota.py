"""Per-caller quota of unfinished tasks (``max_unfinished_tasks_per_caller``).

One caller must not fill the task store for everybody (parked ``input-required`` tasks
stay until someone answers them). The quota counts, per caller key (the task owner, or
``ip:<address>`` for anonymous callers; the key the stream quota uses), the tasks this
process has seen saved in an unfinished state (``submitted``, ``working``,
``input-required``, ``auth-required``) and not yet finished. A new task over the quota
gets :class:`~apcore_a2a.errors.QuotaExceededError` (-32091, HTTP 429, gRPC
``RESOURCE_EXHAUSTED``); messages continuing an existing task are never refused by it.

The count is this process's: in cluster mode each replica counts the tasks it serves,
so a caller spread over N replicas may hold up to N times the quota. A task can also
end without this process seeing the save (canceled through another replica, evicted
from the memory store): a caller found at its quota has its tasks checked against the
store (at most once per ``RECHECK_SECONDS``) before it is refused.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState

from apcore_a2a.errors import QuotaExceededError

__all__ = ["CALLER_STATE_KEY", "TaskQuota"]

#: ``ServerCallContext.state`` key holding the caller key of the request
CALLER_STATE_KEY = "apcore_a2a.caller"
#: Seconds a caller over its quota is told to wait (tasks finish or time out meanwhile).
RETRY_AFTER = 30
#: Seconds between two checks of one caller's counted tasks against the store.
RECHECK_SECONDS = 5.0

TaskLookup = Callable[[str, ServerCallContext], Awaitable[Task | None]]

_UNFINISHED = frozenset(
    {
        TaskState.TASK_STATE_SUBMITTED,
        TaskState.TASK_STATE_WORKING,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)


def caller_key(context: ServerCallContext) -> str:
    """The quota key of a request: set by the HTTP/gRPC context builders, else the user."""
    key = context.state.get(CALLER_STATE_KEY)
    if isinstance(key, str) and key:
        return key
    return context.user.user_name or "anonymous"


class TaskQuota:
    """Unfinished tasks per caller key; ``limit`` 0 turns the quota off."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._tasks: dict[str, set[str]] = {}
        self._caller_of: dict[str, str] = {}
        self._checked_at: dict[str, float] = {}

    async def check(self, context: ServerCallContext, lookup: TaskLookup) -> None:
        """Raise ``QuotaExceededError`` when the caller may not start another task."""
        if not self.limit:
            return
        caller = caller_key(context)
        if self.held_by(caller) >= self.limit:
            await self._recheck(caller, context, lookup)
        if self.held_by(caller) >= self.limit:
            raise QuotaExceededError(
                f"Task quota exceeded: at most {self.limit} unfinished tasks per caller; "
                "finish or cancel some first",
                retry_after=RETRY_AFTER,
            )

    def saved(self, task: Task, context: ServerCallContext) -> None:
        """Follow one save of *task* (a ``storage.observed`` listener)."""
        if not self.limit:
            return
        caller = self._caller_of.get(task.id)
        if task.status.state in _UNFINISHED:
            if caller is None:
                caller = self._caller_of[task.id] = caller_key(context)
            self._tasks.setdefault(caller, set()).add(task.id)
        elif caller is not None:
            self._forget(task.id, caller)

    async def _recheck(self, caller: str, context: ServerCallContext, lookup: TaskLookup) -> None:
        now = time.monotonic()
        if now - self._checked_at.get(caller, 0.0) < RECHECK_SECONDS:
            return
        self._checked_at[caller] = now
        for task_id in list(self._tasks.get(caller, ())):
            stored = await lookup(task_id, context)
            if stored is None or stored.status.state not in _UNFINISHED:
                self._forget(task_id, caller)
        if caller not in self._tasks:
            self._checked_at.pop(caller, None)

    def _forget(self, task_id: str, caller: str) -> None:
        self._caller_of.pop(task_id, None)
        held = self._tasks.get(caller)
        if held is not None:
            held.discard(task_id)
            if not held:
                del self._tasks[caller]

    def held_by(self, caller: str) -> int:
        return len(self._tasks.get(caller, ()))

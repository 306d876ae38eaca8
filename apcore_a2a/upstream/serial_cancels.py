"""Cancels of one task take turns, and a cancel that did not cancel is refused.

a2a-sdk 1.3's ``DefaultRequestHandler.on_cancel_task`` reads the task, finds it running and
cancels its run. Cancels that arrive together all read it running before any of them wrote
``CANCELED``: each cancels it again, each answers success, and the task's stream gets a second
``CANCELED`` or none that ends it. In turn, the second reads the first's ``CANCELED`` and gets
the SDK's own ``TaskNotCancelableError``.

A cancel that loses to its task's last event is ``TaskNotCancelableError`` too. The SDK's
``on_cancel_task`` has the task's ``ActiveTask`` cancel the run (``_cancel_local``). A run
whose result was already queued when that cancel reached it finishes as it would have (our
executor writes no ``CANCELED`` over a result on its way), and the SDK answered the cancel
with that ``COMPLETED`` (or ``FAILED``) task as a success. A2A 1.0.1 §3.1.5: a cancel's
output is the task with its cancellation status, and a task that is not cancelable
(already completed, failed or canceled) is ``TaskNotCancelableError`` (-32002 / HTTP 400 /
``FAILED_PRECONDITION``), as the SDK answers a cancel that reads the task finished, and as
its V1 handler answered this one.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import Task, TaskState
from a2a.utils.errors import TaskNotCancelableError


class CancelTurns:
    """One lock per task a cancel is in flight for: cancels of other tasks never wait on it,
    and it is gone once no cancel of its task holds or waits for it."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @asynccontextmanager
    async def turn(self, task_id: str) -> AsyncIterator[None]:
        """Hold *task_id*'s turn: the cancels before it have answered."""
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = asyncio.Lock()
        async with lock:
            yield


def refuse_lost_cancels(handler: DefaultRequestHandler) -> None:
    """A cancel of a task that *handler* runs here answers ``TaskNotCancelableError``
    unless it left the task ``CANCELED`` (this handler only)."""
    cancel_local: Any = handler._cancel_local

    async def canceled_or_refused(task_id: str, context: ServerCallContext) -> Task:
        task: Task = await cancel_local(task_id, context)
        if task.status.state != TaskState.TASK_STATE_CANCELED:
            state = TaskState.Name(task.status.state)
            raise TaskNotCancelableError(
                message=f"Task cannot be canceled - current state: {state}"
            )
        return task

    handler._cancel_local = canceled_or_refused  # type: ignore[method-assign]

"""A cancel that loses to its task's last event is ``TaskNotCancelableError``.

a2a-sdk 1.3's ``on_cancel_task`` reads the task, finds it running, and has its
``ActiveTask`` cancel the run (``_cancel_local``). A run whose result was already queued
when that cancel reached it finishes as it would have (our executor writes no ``CANCELED``
over a result on its way), and the SDK answered the cancel with that ``COMPLETED`` (or
``FAILED``) task as a success. A2A 1.0.1 §3.1.5: a cancel's output is the task with its
cancellation status, and a task that is not cancelable (already completed, failed or
canceled) is ``TaskNotCancelableError`` (-32002 / HTTP 400 / ``FAILED_PRECONDITION``), as the
SDK answers a cancel that reads the task finished, and as its V1 handler answered this one.
"""

from __future__ import annotations

from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import Task, TaskState
from a2a.utils.errors import TaskNotCancelableError


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

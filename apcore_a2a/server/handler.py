"""The SDK request handler with the few answers apcore-a2a words differently."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import CancelTaskRequest, Task, TaskState
from a2a.utils.errors import TaskNotCancelableError

__all__ = ["ApCoreRequestHandler", "state_label"]

TaskLookup = Callable[[str, ServerCallContext], Awaitable[Task | None]]


def state_label(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``."""
    name = str(TaskState.Name(state))
    return name.removeprefix("TASK_STATE_").lower().replace("_", "-")


class ApCoreRequestHandler(DefaultRequestHandler):
    """``DefaultRequestHandler`` whose not-cancelable error names the task's state."""

    def __init__(self, *args: Any, task_lookup: TaskLookup, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._task_lookup = task_lookup

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        try:
            task: Task | None = await super().on_cancel_task(params, context)
            return task
        except TaskNotCancelableError:
            stored = await self._task_lookup(params.id, context)
            if stored is None:
                raise
            state = state_label(stored.status.state)
            raise TaskNotCancelableError(
                message=f"Task is not cancelable: current state is {state}"
            ) from None

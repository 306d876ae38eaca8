"""Whether a2a-sdk's run of a task has ended: its consumer has saved, or given up on, every
event the run queued (the stop's drain waits for no save after that); and which tasks a
handler still holds a run of (what a stop names when the handler's close does not end)."""

from __future__ import annotations

from a2a.server.request_handlers import DefaultRequestHandler


def run_ended(handler: DefaultRequestHandler, task_id: str) -> bool:
    """Whether *handler* holds no run of *task_id* that is still applying its events."""
    run = handler._active_task_registry._active_tasks.get(task_id)
    return run is None or run.is_finished


def held_runs(handler: DefaultRequestHandler) -> list[str]:
    """The ids of the tasks *handler* still holds a run of (ended or not: the SDK's close
    forgets them only once every run's producer and consumer have ended)."""
    return list(handler._active_task_registry._active_tasks)

"""Whether a2a-sdk's run of a task has ended: its consumer has saved, or given up on, every
event the run queued (the stop's drain waits for no save after that)."""

from __future__ import annotations

from a2a.server.request_handlers import DefaultRequestHandler


def run_ended(handler: DefaultRequestHandler, task_id: str) -> bool:
    """Whether *handler* holds no run of *task_id* that is still applying its events."""
    run = handler._active_task_registry._active_tasks.get(task_id)
    return run is None or run.is_finished

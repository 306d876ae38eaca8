"""A run whose start is refused closes its event queues.

a2a-sdk 1.3's ``ActiveTaskRegistry.get_or_create`` builds an ``ActiveTask``, whose two
``EventQueueSource`` each start a dispatcher task, then starts it. When the start refuses
(it reads the task finished: a follow-up or a second cancel that a cancel beat to the
store), the registry drops the run with both dispatchers still waiting, for ever: the
garbage collector destroys them later, and asyncio logs "Task was destroyed but it is
pending!" at ERROR for each (two records per refused message, which a client racing its
own follow-ups with cancels makes at will). Here the refused run's queues are closed.
"""

from __future__ import annotations

from typing import Any

from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.request_handlers import DefaultRequestHandler


def close_unstarted_runs(handler: DefaultRequestHandler) -> None:
    """A run *handler*'s registry fails to start closes its queues (this handler's only)."""
    registry = handler._active_task_registry
    get_or_create = registry.get_or_create

    async def closing(task_id: str, *args: Any, **kwargs: Any) -> ActiveTask:
        try:
            return await get_or_create(task_id, *args, **kwargs)
        except BaseException:
            # The refused start scheduled the run's removal: it is still registered, and
            # finished without a producer (a run that started has one).
            run = registry._active_tasks.get(task_id)
            if run is not None and run.is_finished and run._producer_task is None:
                await run._event_queue_agent.close(immediate=True)
                await run._event_queue_subscribers.close(immediate=True)
            raise

    registry.get_or_create = closing  # type: ignore[method-assign]

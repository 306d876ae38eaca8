"""A run whose start is refused or cancelled is closed and forgotten.

a2a-sdk 1.3's ``ActiveTaskRegistry.get_or_create`` registers a new ``ActiveTask``, whose
two ``EventQueueSource`` each start a dispatcher task, then awaits its start (a store
read). When the start refuses (it reads the task finished: a follow-up or a second cancel
that a cancel beat to the store), the registry drops the run with both dispatchers still
waiting, for ever: the garbage collector destroys them later, and asyncio logs "Task was
destroyed but it is pending!" at ERROR for each. When the start is cancelled during its
read (the client hung up on a stream, a gRPC deadline), the run stays registered, neither
started nor finished: every later message for its task is handed that run and waits for
ever for a producer that does not exist, and so does a ``CancelTask`` (it waits for the
run to finish), holding the task's cancel turn (``serial_cancels.py``). Here a run this
call built and could not start is taken out of the registry and closed. A call that comes
while a run's start reads the task is handed that run: a ``SubscribeToTask`` then waits
for the task the start has not read yet, for ever if the start is cancelled (closing the
run does not wake it). Here such a call waits for that start's answer and asks again:
handed the started run, or a new one built for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.request_handlers import DefaultRequestHandler


def close_unstarted_runs(handler: DefaultRequestHandler) -> None:
    """A run *handler*'s registry fails to start is closed (this handler's only), and a call
    handed a run another call is still starting waits for that start, then asks again."""
    registry = handler._active_task_registry
    get_or_create = registry.get_or_create
    #: task id -> set once the call that may be building its run has its answer
    starts: dict[str, asyncio.Event] = {}

    async def closing(task_id: str, *args: Any, **kwargs: Any) -> ActiveTask:
        while True:
            before = registry._active_tasks.get(task_id)
            mine = None
            if before is None:  # this call may build the run
                mine = starts[task_id] = asyncio.Event()
            try:
                run = await get_or_create(task_id, *args, **kwargs)
            except BaseException:
                built = registry._active_tasks.get(task_id)
                # Built by this call (a started run has a producer): forgotten at once, with
                # no await, so a hang-up's cancel scope cannot stop it, and the next call
                # builds anew.
                if built is not None and built is not before and built._producer_task is None:
                    with registry._lock:
                        del registry._active_tasks[task_id]
                    # Its close sets it finished: a cancel already waiting on it then answers.
                    closed = asyncio.ensure_future(built.aclose())
                    registry._cleanup_tasks.add(closed)  # the registry's close waits for it
                    closed.add_done_callback(registry._cleanup_tasks.discard)
                raise
            finally:
                if mine is not None:
                    if starts.get(task_id) is mine:
                        del starts[task_id]
                    mine.set()
            starting = starts.get(task_id)
            if run._producer_task is not None or run.is_finished or starting is None:
                return run
            # Another call's run, still reading the task to start: a subscriber or message
            # handed it would wait for ever if that start is cancelled (no producer comes, and
            # a subscriber waits for a task it never reads). Its answer first, then anew.
            await starting.wait()

    registry.get_or_create = closing  # type: ignore[method-assign]

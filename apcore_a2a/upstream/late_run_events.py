"""A run's events that reach the SDK after its task is finished in the store are dropped, quietly.

a2a-sdk 1.3's ``ActiveTask`` consumer, when a save meets a finished task another writer
stored (a cancel answered by another worker or replica), reloads the task, ends its streams
and cancels the run, but goes on applying the events the run had queued before that cancel
reached it: a chunk appended to the canceled task (or, when the cancel came before the
artifact was stored, ``InvalidAgentResponseError`` "append=True for nonexistent artifact"
logged at ERROR), a result saved on it, each published to the other replicas. Those events
lost the race to the cancel; here the consumer never takes them (logged at DEBUG).

The same branch closes the streams' queue there and then, while the run's end is still to
come: the consumer forwards the run's request-completed marker (queued when the run
returned, before the consumer reached the refused save) to that closed queue ("Queue was
closed during enqueuing", WARNING), and the ending producer closes it again, its dispatcher
gone ("Dispatcher task is not running", WARNING). Nothing is lost: the streams had the
stored task and ended. Here the closed queue takes nothing more and a second graceful
close returns, quietly.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES, ActiveTask
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent

logger = logging.getLogger("apcore_a2a.upstream.late_run_events")

#: what a run enqueues (the SDK's own request markers and a failed run's error pass)
_RUN_EVENTS = (Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent, Message)


def drop_late_run_events(handler: DefaultRequestHandler) -> None:
    """Every ``ActiveTask`` *handler* starts from now on drops the events its run queued
    once its task is finished (this handler's tasks only)."""
    registry = handler._active_task_registry
    registry._active_tasks = _Watched(registry._active_tasks)


class _Watched(dict[str, ActiveTask]):
    """The registry's tasks: each is watched as it is registered, before it starts."""

    def __setitem__(self, task_id: str, active: ActiveTask) -> None:
        _watch(active)
        super().__setitem__(task_id, active)


def _watch(active: ActiveTask) -> None:
    queue = active._event_queue_agent
    taken = queue.dequeue_event

    async def dequeue_event() -> Any:
        while True:
            event = await taken()
            # The consumer's task: a finished one was saved or reloaded from the store.
            task = active._task_manager._current_task
            if (
                task is None
                or task.status.state not in TERMINAL_TASK_STATES
                or not isinstance(event, _RUN_EVENTS)
            ):
                return event
            logger.debug(
                "Task %s is finished: its run's late %s is dropped",
                active.task_id,
                type(event).__name__,
            )
            queue.task_done()  # as the consumer acknowledges each event it takes

    # The consumer reads this attribute at each event: its own queue, this ActiveTask only.
    queue.dequeue_event = dequeue_event  # type: ignore[method-assign]

    streams = active._event_queue_subscribers
    forward, close = streams.enqueue_event, streams.close

    async def enqueue_event(event: Any) -> None:
        if streams.is_closed():  # where the SDK would warn that it drops the event
            logger.debug("Task %s is finished: its streams ended before this event", active.task_id)
            return
        await forward(event)

    async def close_once(immediate: bool = False) -> None:
        if immediate or not streams.is_closed():  # a forced close still stops everything
            await close(immediate)

    # Read by the consumer and the producer at each use: this ActiveTask's queue only.
    streams.enqueue_event = enqueue_event  # type: ignore[method-assign]
    streams.close = close_once  # type: ignore[method-assign]

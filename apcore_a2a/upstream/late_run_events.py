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
import weakref
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
    # The replacements below live on the ActiveTask's own queues, so they reach it and the
    # queues only through a weak reference: a strong one is a cycle (queue -> its method ->
    # ActiveTask -> queue) that kept every finished call's objects, about 90 per call, for
    # the cyclic garbage collector (issue 43). The consumer, awaiting them, holds the task.
    owner = weakref.ref(active)
    queue_type = type(active._event_queue_agent)
    streams_type = type(active._event_queue_subscribers)

    async def dequeue_event() -> Any:
        watched: Any = owner()
        queue = watched._event_queue_agent
        while True:
            event = await queue_type.dequeue_event(queue)
            # The consumer's task: a finished one was saved or reloaded from the store.
            task = watched._task_manager._current_task
            if (
                task is None
                or task.status.state not in TERMINAL_TASK_STATES
                or not isinstance(event, _RUN_EVENTS)
            ):
                return event
            logger.debug(
                "Task %s is finished: its run's late %s is dropped",
                watched.task_id,
                type(event).__name__,
            )
            queue.task_done()  # as the consumer acknowledges each event it takes

    # The consumer reads this attribute at each event: its own queue, this ActiveTask only.
    active._event_queue_agent.dequeue_event = dequeue_event  # type: ignore[method-assign]

    async def enqueue_event(event: Any) -> None:
        watched: Any = owner()
        streams = watched._event_queue_subscribers
        # Its flag, not is_closed(): the SDK traces that method, a span per event.
        if streams._is_closed:  # where the SDK would warn that it drops the event
            logger.debug(
                "Task %s is finished: its streams ended before this event", watched.task_id
            )
            return
        await streams_type.enqueue_event(streams, event)

    async def close_once(immediate: bool = False) -> None:
        streams = owner()._event_queue_subscribers  # type: ignore[union-attr]
        if immediate or not streams._is_closed:  # a forced close still stops everything
            await streams_type.close(streams, immediate)

    # Read by the consumer and the producer at each use: this ActiveTask's queue only.
    streams = active._event_queue_subscribers
    streams.enqueue_event = enqueue_event  # type: ignore[method-assign]
    streams.close = close_once  # type: ignore[method-assign]

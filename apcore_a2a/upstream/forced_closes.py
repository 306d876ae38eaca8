"""A request handler closed while runs still run closes them quietly.

a2a-sdk 1.3's ``ActiveTaskRegistry.aclose`` (``DefaultRequestHandler.aclose``, which our
lifespan's stop calls once the drain is over) force-closes each run: ``ActiveTask.aclose``
closes the run's queue at once, which stops the queue's dispatcher on purpose, and only then
cancels the run's producer, whose ``finally`` closes that queue again, gracefully: it finds
the dispatcher stopped and logs "Dispatcher task is not running. Cannot wait for event
dispatch." at WARNING. Nothing is lost there that the forced close did not drop on purpose,
yet the WARNING comes once for every run still running: a second Ctrl-C that abandons 200
tasks logged 200 of them after its own one line. Here, for the runs a handler of ours
closes, a graceful close of a queue already closed whose dispatcher has ended returns, as
the SDK's own close does after that WARNING. A dispatcher that failed by itself is not
concerned: its queue was not closed, and its failure has its own ERROR record.
"""

from __future__ import annotations

import weakref
from typing import Any

from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.request_handlers import DefaultRequestHandler


def quiet_forced_closes(handler: DefaultRequestHandler) -> None:
    """The runs still running when *handler* closes end without a WARNING each."""
    registry = handler._active_task_registry
    aclose = registry.aclose

    async def closing() -> None:
        with registry._lock:  # the SDK's own snapshot takes it the same way
            runs: list[ActiveTask] = list(registry._active_tasks.values())
        for run in runs:
            _close_once(run._event_queue_agent)
        await aclose()

    registry.aclose = closing  # type: ignore[method-assign]


def _close_once(queue: Any) -> None:
    # Through a weak reference, as late_run_events.py's: no cycle through the queue's method.
    owner, close = weakref.ref(queue), type(queue).close

    async def close_once(immediate: bool = False) -> None:
        closing: Any = owner()
        if closing is None:
            return
        if not immediate and closing._is_closed and closing._dispatcher_task.done():
            return  # closed at once before: nothing is left to wait for
        await close(closing, immediate)

    queue.close = close_once

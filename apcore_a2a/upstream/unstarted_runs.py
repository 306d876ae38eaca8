"""A run the SDK set up for a message but could not start is closed, not left pending.

a2a-sdk 1.3's ``ActiveTaskRegistry.get_or_create`` builds an ``ActiveTask`` (two event
queues, each with a dispatcher ``asyncio.Task`` started in its constructor), then starts
it; when the start fails (the task is finished in the store, or gone) it hands the
``ActiveTask`` to its cleanup and forgets it, queues open. Their dispatchers wait for ever,
reached only through a reference cycle: the cyclic collector destroys them pending
("Task was destroyed but it is pending!", and OpenTelemetry's "Failed to detach context"
from the traced dispatcher closed outside its own task). An answer that a cancel overtook
after it claimed its task's wait meets exactly that. Here the cleanup of an ``ActiveTask``
that never started closes it (its public ``aclose``), a close the registry's own
``aclose`` waits for.
"""

from __future__ import annotations

import asyncio
import weakref

from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.request_handlers import DefaultRequestHandler


def close_unstarted_runs(handler: DefaultRequestHandler) -> None:
    """Every ``ActiveTask`` *handler*'s registry builds from now on is closed when its
    start fails (this handler's registry only)."""
    registry = handler._active_task_registry
    owner = weakref.ref(registry)  # a strong one would be a cycle: registry -> cleanup -> it

    def on_cleanup(active: ActiveTask) -> None:
        held = owner()
        if held is None:
            return
        if active._producer_task is None:  # its start failed: nothing else closes it
            closing = asyncio.ensure_future(active.aclose())
            held._cleanup_tasks.add(closing)
            closing.add_done_callback(held._cleanup_tasks.discard)
        type(held)._on_active_task_cleanup(held, active)

    # Each ActiveTask is handed the registry's attribute as it is built: this registry's.
    registry._on_active_task_cleanup = on_cleanup  # type: ignore[method-assign,assignment]

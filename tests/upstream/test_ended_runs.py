"""Watch: a2a-sdk's request handler offers no accessor for its runs (its ``ActiveTask`` of
a task), so the stop's drain cannot ask whether a task's run has applied every event.

``apcore_a2a.upstream.ended_runs.run_ended`` and ``held_runs`` (the tasks a stop's bounded
close names) read the handler's registry. The first test
fails the day the handler or its registry gains a public member: use it and delete the
file. The second holds the reading to what the SDK does: a run is held while its events
are applied, and is gone (or finished) after.
"""

from __future__ import annotations

import asyncio

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.agent_execution.active_task_registry import ActiveTaskRegistry
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types import GetTaskRequest, TaskState, TaskStatus, TaskStatusUpdateEvent

from apcore_a2a.upstream.ended_runs import held_runs, run_ended

from ._plain import plain_handler, start_working


def test_the_handler_still_gives_no_access_to_its_runs() -> None:
    public = sorted(name for name in dir(DefaultRequestHandler) if not name.startswith("_"))
    assert not [name for name in public if "active" in name or "run" in name]
    assert sorted(n for n in dir(ActiveTaskRegistry) if not n.startswith("_")) == [
        "aclose",
        "get",
        "get_or_create",
    ]


class _Gated(AgentExecutor):
    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        working = TaskState.TASK_STATE_WORKING
        await event_queue.enqueue_event(new_task(context.task_id, context.context_id, working))
        await self.gate.wait()
        done = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=context.task_id, context_id=context.context_id, status=done
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


async def test_a_run_is_held_until_its_events_are_applied() -> None:
    executor = _Gated()
    handler = plain_handler(executor)
    task_id = await start_working(handler)
    assert not run_ended(handler, task_id)
    assert held_runs(handler) == [task_id]
    executor.gate.set()
    async with asyncio.timeout(10):
        while not run_ended(handler, task_id):
            await asyncio.sleep(0.01)
    # Ended once the final state is stored, not before.
    stored = await handler.on_get_task(GetTaskRequest(id=task_id), ServerCallContext())
    assert stored is not None and stored.status.state == TaskState.TASK_STATE_COMPLETED
    assert run_ended(handler, "no-such-task")
    await handler.aclose()
    assert held_runs(handler) == []  # the close forgets the runs it ended

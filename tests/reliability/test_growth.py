"""What grows with the number of distinct callers, values and requests: nothing may stay
behind per caller once its last request ended, and nothing a caller sends may become a new
metric label, a log line of its own or an unbounded span attribute."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus

from apcore_a2a.edge.call import CallRecord, attach
from apcore_a2a.server.task_quota import RECHECK_SECONDS, TaskQuota

CALLERS = 10_000


async def test_callers_found_at_their_task_quota_leave_no_memory_behind() -> None:
    # Each caller reaches its quota with a task that then ends unseen (evicted, failed by
    # another replica); its next request rechecks, frees the slot and is served. Once the
    # caller is gone, only the rechecks of the last RECHECK_SECONDS may be remembered.
    now = [0.0]
    quota = TaskQuota(1, clock=lambda: now[0])

    async def ended(task_id: str, _context: ServerCallContext) -> Task:
        return Task(id=task_id, status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))

    for i in range(CALLERS):
        caller = f"apikey:caller-{i}"
        assert await quota.slots.take("task", caller, f"task-{i}", 1)  # its unfinished task
        context = ServerCallContext()
        attach(context, CallRecord("jsonrpc", "1.0", "SendMessage", caller))
        await quota.reserve(context, ended)  # at its quota: rechecked, then served
        await quota.settle(context)  # the request made no task: the slot is given back
        assert await quota.slots.holders("task", caller) == []
        now[0] += 1.0
    assert len(quota.recent_checks) <= RECHECK_SECONDS + 1

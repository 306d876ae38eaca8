"""``Stores.on_save`` returns what removes the listener: a later save does not call it,
removing it twice does nothing, and the same listener named twice is two listeners."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus

from apcore_a2a.settings import Settings
from apcore_a2a.storage import open_stores


async def test_a_removed_listener_hears_no_later_save() -> None:
    stores = open_stores("memory://", Settings())
    await stores.start()
    heard: list[str] = []
    context = ServerCallContext()

    def listener(task: Task, _context: ServerCallContext) -> None:
        heard.append(task.id)

    try:
        first = stores.on_save(listener)
        second = stores.on_save(listener)
        task = Task(
            id="t-1", context_id="c-1", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
        )
        await stores.task_store.save(task, context)
        first()
        first()  # once is enough; the second registration stays
        task.status.state = TaskState.TASK_STATE_COMPLETED
        await stores.task_store.save(task, context)
        second()
        task.id = "t-2"
        await stores.task_store.save(task, context)
    finally:
        await stores.aclose()
    assert heard == ["t-1", "t-1", "t-1"]

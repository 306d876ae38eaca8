"""The SDK behaviour ``apcore_a2a/upstream/serial_cancels.py`` answers with
``refuse_lost_cancels``: a cancel of a running task whose run finishes as the cancel reaches
it answers success with the finished task on a plain ``DefaultRequestHandler``. A failure
here means the SDK refuses it now: delete that refusal."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.types import CancelTaskRequest, TaskState
from a2a.utils.errors import TaskNotCancelableError

from apcore_a2a.upstream.serial_cancels import refuse_lost_cancels

from ._plain import WorksUntilCanceled, plain_handler, start_working


async def _cancel(refuse: bool) -> object:
    """What a cancel of a task that finishes as it is canceled answers."""
    handler = plain_handler(WorksUntilCanceled(TaskState.TASK_STATE_COMPLETED))
    if refuse:
        refuse_lost_cancels(handler)
    try:
        task_id = await start_working(handler)
        try:
            return await handler.on_cancel_task(CancelTaskRequest(id=task_id), ServerCallContext())
        except TaskNotCancelableError as refused:
            return refused
    finally:
        await handler.aclose()


async def test_the_sdk_answers_a_cancel_with_the_completed_task() -> None:
    answer = await _cancel(refuse=False)
    assert not isinstance(answer, TaskNotCancelableError), answer
    assert answer.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]


async def test_refused_it_is_not_cancelable() -> None:
    answer = await _cancel(refuse=True)
    assert isinstance(answer, TaskNotCancelableError), answer
    assert "TASK_STATE_COMPLETED" in str(answer)

"""The SDK behaviour ``apcore_a2a/upstream/serial_cancels.py`` answers: cancels of one running
task sent at once all succeed on a plain ``DefaultRequestHandler`` (each read the task still
running). A failure here means the SDK lets one win now: delete that file."""

from __future__ import annotations

import asyncio

from a2a.server.context import ServerCallContext
from a2a.types import CancelTaskRequest
from a2a.utils.errors import TaskNotCancelableError

from apcore_a2a.upstream.serial_cancels import CancelTurns

from ._plain import WorksUntilCanceled, plain_handler, start_working


async def _cancels(turns: CancelTurns | None) -> list[object]:
    """Six cancels at once of one running task: what each answered."""
    handler = plain_handler(WorksUntilCanceled())
    try:
        task_id = await start_working(handler)

        async def cancel() -> object:
            call = handler.on_cancel_task(CancelTaskRequest(id=task_id), ServerCallContext())
            try:
                if turns is None:
                    return await call
                async with turns.turn(task_id):
                    return await call
            except TaskNotCancelableError as refused:
                return refused

        return list(await asyncio.gather(*(cancel() for _ in range(6))))
    finally:
        await handler.aclose()


async def test_cancels_sent_together_all_win_on_the_plain_sdk() -> None:
    answers = await _cancels(None)
    assert not any(isinstance(a, TaskNotCancelableError) for a in answers), answers


async def test_in_turn_one_cancel_wins_and_the_others_are_the_sdks_refusal() -> None:
    answers = await _cancels(CancelTurns())
    refused = [a for a in answers if isinstance(a, TaskNotCancelableError)]
    assert len(refused) == 5, answers
    turns = CancelTurns()
    async with turns.turn("t"):
        assert len(turns._locks) == 1
    assert len(turns._locks) == 0  # no lock is kept for a task no cancel waits on

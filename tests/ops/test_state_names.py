"""The names a run's states are reported by (metrics, telemetry, shutdown, busy refusals),
read from tables made once, are the names ``TaskState`` gives: every state A2A defines,
and a number it does not define refused as ``TaskState.Name`` refuses it."""

from __future__ import annotations

import pytest
from a2a.types import Task, TaskState, TaskStatus, TaskStatusUpdateEvent

from apcore_a2a.execution.observer import Execution, state_name
from apcore_a2a.streams.tap import Answer


@pytest.mark.parametrize("number", TaskState.values())
def test_every_state_is_named_as_task_state_names_it(number: int) -> None:
    name = TaskState.Name(number)
    assert state_name(number) == name.removeprefix("TASK_STATE_").lower().replace("_", "-")
    execution = Execution("t", "c", "skill", None, None)
    execution.saw(TaskStatusUpdateEvent(task_id="t", status=TaskStatus(state=number)))
    assert execution.state == state_name(number)
    answer = Answer()
    answer.saw(Task(id="t", context_id="c", status=TaskStatus(state=number)))
    assert answer.state == name


def test_a_number_no_state_has_is_refused() -> None:
    with pytest.raises(ValueError):
        state_name(99)
    with pytest.raises(ValueError):
        Answer().saw(Task(id="t", status=TaskStatus(state=99)))

"""A follow-up that a cancel beat to its task's run, or that met the run finishing, is
refused as for a finished task.

a2a-sdk 1.3 queues a follow-up for the task's parked run, then answers with what that run
streams next. A ``CancelTask`` that ends the run before it takes the message streams the
``CANCELED`` status: a blocking send answers the canceled task, a stream that status, as if
the message had been taken, while no history holds it. The message is refused instead,
with the SDK's own answer for a message to a finished task (``ActiveTask.start``).

``ActiveTask.subscribe`` checks the run, then queues on it: a cancel or the last event can
shut the queue in between, and ``QueueShutDown`` (:data:`FINISHED_RUN`) left as an internal
error. Such a message gets the SDK's refusal of a finished run (:func:`finished_refusal`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.types import SendMessageRequest, Task, TaskState, TaskStatusUpdateEvent
from a2a.utils._async_queue_compat import QueueShutDown
from a2a.utils.errors import UnsupportedOperationError

from apcore_a2a._history import message_in

#: what a message meets when its task's run shut its request queue first
FINISHED_RUN = QueueShutDown


def finished_refusal(task_id: str) -> UnsupportedOperationError:
    """The SDK's refusal of a message for a finished run (``ActiveTask.subscribe``)."""
    return UnsupportedOperationError(message=f"Task {task_id} is already completed.")


async def refuse_untaken(
    first: object,
    params: SendMessageRequest,
    lookup: Callable[[str, ServerCallContext], Awaitable[Task | None]],
    context: ServerCallContext,
) -> None:
    """Raise the finished task's refusal when *first* (the answer to the follow-up
    *params*, blocking, or its stream's first event) finishes the task and the task's
    history does not hold the follow-up; *lookup* reads the stored task (the answer's
    history may be cut)."""
    if isinstance(first, Task):
        task_id, history = first.id, first.history
    elif isinstance(first, TaskStatusUpdateEvent):
        task_id, history = first.task_id, []
    else:
        return
    state, message_id = first.status.state, params.message.message_id
    if state not in TERMINAL_TASK_STATES or message_in(history, message_id) is not None:
        return
    task = await lookup(task_id, context)
    if task is None or message_in(task.history, message_id) is None:
        raise UnsupportedOperationError(
            message=f"Task {task_id} is in terminal state: {TaskState.Name(state)}"
        )

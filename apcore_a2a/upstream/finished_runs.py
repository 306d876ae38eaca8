"""A message that meets its task's run as the run finishes gets the SDK's own refusal,
not the ``QueueShutDown`` the run's closed request queue raises.
"""

from __future__ import annotations

from a2a.utils._async_queue_compat import QueueShutDown
from a2a.utils.errors import UnsupportedOperationError

#: what a message meets when its task's run shut its request queue first
FINISHED_RUN = QueueShutDown


def finished_refusal(task_id: str) -> UnsupportedOperationError:
    """The SDK's refusal of a message for a finished run (``ActiveTask.subscribe``)."""
    return UnsupportedOperationError(message=f"Task {task_id} is already completed.")

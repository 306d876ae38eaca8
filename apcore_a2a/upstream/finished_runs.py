"""A message that meets its task's run as the run finishes gets the SDK's own refusal.

Upstream (a2a-sdk 1.3, ``ActiveTask.subscribe``): a message checks that the task's run has
not finished, then queues itself on the run. A cancel, the run's last event or (cluster
mode) another replica's terminal event can shut the run's request queue in between, and
the put raises ``QueueShutDown``, which leaves as an internal error (HTTP 500, -32603,
``INTERNAL``). The answer ``subscribe`` gives a finished run is
``UnsupportedOperationError``: a message method catches :data:`FINISHED_RUN` and raises
:func:`finished_refusal` instead. Deletable when
the SDK answers it itself: ``tests/upstream/test_finished_runs.py`` fails then.
"""

from __future__ import annotations

from a2a.utils._async_queue_compat import QueueShutDown
from a2a.utils.errors import UnsupportedOperationError

#: what a message meets when its task's run shut its request queue first
FINISHED_RUN = QueueShutDown


def finished_refusal(task_id: str) -> UnsupportedOperationError:
    """The SDK's refusal of a message for a finished run (``ActiveTask.subscribe``)."""
    return UnsupportedOperationError(message=f"Task {task_id} is already completed.")

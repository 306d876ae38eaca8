"""A message that meets its task's run as the run finishes gets the SDK's own refusal.

Upstream (a2a-sdk 1.3, ``ActiveTask.subscribe``): a message checks that the task's run has
not finished, then queues itself on the run. A cancel, the run's last event or (cluster
mode) another replica's terminal event can shut the run's request queue in between, and
the put raises ``QueueShutDown``, which leaves as an internal error (HTTP 500, -32603,
``INTERNAL``). The answer ``subscribe`` gives a finished run is
``UnsupportedOperationError``; :func:`refused_if_finished` gives that one. Deletable when
the SDK answers it itself: ``tests/upstream/test_finished_runs.py`` fails then.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from a2a.utils._async_queue_compat import QueueShutDown
from a2a.utils.errors import UnsupportedOperationError


@contextmanager
def refused_if_finished(task_id: str) -> Iterator[None]:
    """Turn a message's ``QueueShutDown`` into the SDK's finished-run refusal."""
    try:
        yield
    except QueueShutDown:
        raise UnsupportedOperationError(message=f"Task {task_id} is already completed.") from None

"""CPU per event of the memory store's event log (``storage/event_log.py``), in-process.

``python -m benchmarks.event_log [-n 200000]`` prints one JSON line, ns per
``MemoryEventLog.append`` (the whole cost the log adds to a save) in three cases: events
of tasks already logged (most events: the steady state), the first event of a new task
with the log full and one caller (an eviction each), and the same with 1,000 callers
holding one log each and one caller adding tasks (its own oldest log goes each time).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from a2a.types import TaskState, TaskStatus, TaskStatusUpdateEvent

from apcore_a2a.storage.event_log import MemoryEventLog
from apcore_a2a.storage.stores import EVENT_LOG_TASKS

_EVENT = TaskStatusUpdateEvent(
    task_id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
)


def _full(owners: int) -> MemoryEventLog:
    log = MemoryEventLog(per_task=100, max_tasks=EVENT_LOG_TASKS)
    for i in range(EVENT_LOG_TASKS):
        log.append(f"held-{i}", _EVENT, owner=f"caller-{i % owners}")
    return log


def _ns_per_call(n: int, call: Callable[[int], object]) -> float:
    start = time.perf_counter_ns()
    for i in range(n):
        call(i)
    return (time.perf_counter_ns() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=200_000)
    n = parser.parse_args().n
    known, alone, crowd = _full(1), _full(1), _full(EVENT_LOG_TASKS)
    result = {
        "events_of_logged_tasks_ns": _ns_per_call(
            n, lambda i: known.append(f"held-{i % EVENT_LOG_TASKS}", _EVENT, owner="caller-0")
        ),
        "new_task_one_caller_ns": _ns_per_call(
            n, lambda i: alone.append(f"new-{i}", _EVENT, owner="caller-0")
        ),
        "new_task_among_1000_callers_ns": _ns_per_call(
            n, lambda i: crowd.append(f"new-{i}", _EVENT, owner="caller-0")
        ),
    }
    print(json.dumps({key: round(value) for key, value in result.items()}))


if __name__ == "__main__":
    main()

"""CPU per event of the memory store's event log (``storage/event_log.py``), in-process.

``python -m benchmarks.event_log [-n 200000]`` prints one JSON line, ns per
``MemoryEventLog.append`` (the whole cost the log adds to a save) in three cases: events
of tasks already logged (most events: the steady state), the first event of a new task
with the log full and one caller (an eviction each), and the same with 1,000 callers
holding one log each and one caller adding tasks (its own oldest log goes each time); then
what a follow-up logs, the whole task (``--history`` KB of history), appended to one task's
log again and again: ns per append, and the bytes the log then holds for that task.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent

from apcore_a2a.settings import Settings
from apcore_a2a.storage.event_log import MemoryEventLog
from apcore_a2a.storage.stores import EVENT_LOG_TASKS

PER_TASK_BYTES = Settings().task_event_log_bytes

_EVENT = TaskStatusUpdateEvent(
    task_id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
)


def _full(owners: int) -> MemoryEventLog:
    log = MemoryEventLog(per_task=100, max_tasks=EVENT_LOG_TASKS, per_task_bytes=PER_TASK_BYTES)
    for i in range(EVENT_LOG_TASKS):
        log.append(f"held-{i}", _EVENT, owner=f"caller-{i % owners}")
    return log


def _task(history_kb: int) -> Task:
    """A task whose history holds *history_kb* KB in 10 KB messages."""
    said = [
        Message(message_id=str(i), role=Role.ROLE_USER, parts=[Part(text="x" * 10_000)])
        for i in range(max(1, history_kb // 10))
    ]
    status = TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED)
    return Task(id="t", context_id="c", status=status, history=said)


def _ns_per_call(n: int, call: Callable[[int], object]) -> float:
    start = time.perf_counter_ns()
    for i in range(n):
        call(i)
    return (time.perf_counter_ns() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=200_000)
    parser.add_argument("--history", type=int, default=1000, help="KB of each task event")
    args = parser.parse_args()
    n = args.n
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
    one = MemoryEventLog(per_task=100, max_tasks=EVENT_LOG_TASKS, per_task_bytes=PER_TASK_BYTES)
    task = _task(args.history)
    result["whole_task_event_ns"] = _ns_per_call(
        max(1, n // 100), lambda i: one.append("t", task, owner="caller-0")
    )
    result["whole_task_event_bytes"] = task.ByteSize()
    result["whole_task_log_bytes"] = one.held_bytes
    print(json.dumps({key: round(value) for key, value in result.items()}))


if __name__ == "__main__":
    main()

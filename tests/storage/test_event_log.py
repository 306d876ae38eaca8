"""The bounded in-process event log behind Last-Event-ID without cluster mode."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import Message, Part, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError

from apcore_a2a.settings import Settings
from apcore_a2a.storage.event_log import MemoryEventLog
from apcore_a2a.storage.stores import open_stores

from ._helpers import settings


def _event(task_id: str, n: int) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=f"ctx-{n}",
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
    )


async def _replay(log: MemoryEventLog, task_id: str, after: int) -> list[int]:
    return [seq async for seq, _v, _e in log.tail(task_id, after, until_idle=True)]


async def test_replays_what_it_keeps_and_refuses_an_id_whose_successors_are_gone() -> None:
    log = MemoryEventLog(per_task=3, max_tasks=10, per_task_bytes=1 << 20)
    ids = [log.append("t1", _event("t1", n), owner="o") for n in range(5)]
    log.append("t2", _event("t2", 0), owner="o")  # ids are per process, shared by tasks
    assert await _replay(log, "t1", ids[1]) == ids[2:]
    assert await _replay(log, "t1", ids[4]) == []
    for lost in (0, ids[0]):
        with pytest.raises(InvalidParamsError, match="no longer kept"):
            await _replay(log, "t1", lost)


async def test_keeps_only_the_most_recently_active_tasks() -> None:
    log = MemoryEventLog(per_task=3, max_tasks=2, per_task_bytes=1 << 20)
    first = log.append("old", _event("old", 0), owner="o")
    log.append("a", _event("a", 0), owner="o")
    log.append("b", _event("b", 0), owner="o")
    with pytest.raises(InvalidParamsError):
        await _replay(log, "old", first)


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        MemoryEventLog(per_task=0, max_tasks=1, per_task_bytes=1 << 20)


async def test_keeps_a_tasks_bytes_bound_oldest_out_first_and_its_latest_event_always() -> None:
    size = _event("t1", 0).ByteSize()
    log = MemoryEventLog(per_task=100, max_tasks=2, per_task_bytes=3 * size)
    ids = [log.append("t1", _event("t1", n), owner="o") for n in range(5)]
    assert log.held_bytes == 3 * size
    assert await _replay(log, "t1", ids[1]) == ids[2:]
    with pytest.raises(InvalidParamsError, match="no longer kept"):
        await _replay(log, "t1", ids[0])
    big = Task(id="t1", context_id="c", history=[Message(parts=[Part(text="x" * 4 * size)])])
    latest = log.append("t1", big, owner="o")  # over the bound alone: kept, the rest gone
    assert log.position("t1") == latest and log.held_bytes > 4 * size
    # The whole task replaces the events before it: a resume from any of them gets it.
    for before in (0, ids[0], ids[3], ids[4]):
        assert await _replay(log, "t1", before) == [latest]
    after = log.append("t1", _event("t1", 5), owner="o")  # the task alone filled the bound
    with pytest.raises(InvalidParamsError, match="no longer kept"):
        await _replay(log, "t1", ids[4])
    assert await _replay(log, "t1", latest) == [after]
    log.append("a", _event("a", 0), owner="o")
    log.append("b", _event("b", 0), owner="o")  # t1's log goes, with its bytes
    assert log.held_bytes == _event("a", 0).ByteSize() + _event("b", 0).ByteSize()


async def test_a_reader_the_bounds_left_behind_is_refused_not_handed_a_gap() -> None:
    log = MemoryEventLog(per_task=3, max_tasks=2, per_task_bytes=1 << 20)
    first = log.append("t1", _event("t1", 0), owner="o")
    reader = log.tail("t1", 0)
    assert (await anext(reader))[0] == first
    for n in range(1, 5):  # 4 events while the reader waits: the oldest of them fell out
        log.append("t1", _event("t1", n), owner="o")
    with pytest.raises(InvalidParamsError, match=f"Last-Event-ID {first}: .* no longer kept"):
        await anext(reader)


def _ended(task_id: str) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=task_id, context_id="ctx-0", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    )


async def test_a_bound_over_all_tasks_drops_finished_tasks_logs_first() -> None:
    size = _event("t", 0).ByteSize()
    log = MemoryEventLog(per_task=100, max_tasks=100, per_task_bytes=1 << 20, total_bytes=4 * size)
    live = log.append("live", _event("live", 0), owner="a")
    done = log.append("done", _event("done", 0), owner="b")
    log.append("done", _ended("done"), owner="b")
    new = [log.append("new", _event("new", n), owner="c") for n in range(2)]
    # Five events past a bound of four: the finished task's log went, not the older live one.
    assert log.held_bytes <= 4 * size
    assert await _replay(log, "live", 0) == [live]
    assert await _replay(log, "new", new[0]) == new[1:]
    with pytest.raises(InvalidParamsError, match="no longer kept"):
        await _replay(log, "done", done)


async def test_past_the_bound_a_live_tasks_log_goes_and_its_reader_is_told() -> None:
    size = _event("t", 0).ByteSize()
    log = MemoryEventLog(per_task=100, max_tasks=100, per_task_bytes=1 << 20, total_bytes=2 * size)
    first = log.append("a", _event("a", 0), owner="a")
    reader = log.tail("a", 0)
    assert (await anext(reader))[0] == first
    waiting = asyncio.ensure_future(anext(reader))
    await asyncio.sleep(0)
    for n in range(2):  # another caller's events fill the bound: the least recent log goes
        log.append("b", _event("b", n), owner="b")
    assert log.held_bytes <= 2 * size
    with pytest.raises(InvalidParamsError, match=f"Last-Event-ID {first}: .* no longer kept"):
        await waiting
    # The task logs again: a new log, which a resume from before it is not handed as if whole.
    log.append("a", _event("a", 1), owner="a")
    with pytest.raises(InvalidParamsError, match="no longer kept"):
        await _replay(log, "a", first)


def test_the_bound_over_all_tasks_is_a_setting() -> None:
    stores = open_stores("memory://", settings(task_event_log_total_bytes=12345))
    assert isinstance(stores.event_log, MemoryEventLog)
    assert stores.event_log.total_bytes == 12345
    assert Settings.defaults().task_event_log_total_bytes == 256 * 1024 * 1024


def _big(task_id: str) -> TaskStatusUpdateEvent:
    text = Message(message_id="m", parts=[Part(text="x" * 2000)])
    status = TaskStatus(state=TaskState.TASK_STATE_WORKING, message=text)
    return TaskStatusUpdateEvent(task_id=task_id, context_id="ctx-0", status=status)


async def test_past_the_bound_the_caller_holding_the_most_bytes_gives_up_a_log() -> None:
    bound = 3 * _event("v1", 0).ByteSize() + 2 * _big("a1").ByteSize()
    log = MemoryEventLog(per_task=100, max_tasks=100, per_task_bytes=1 << 20, total_bytes=bound)
    kept = {t: log.append(t, _event(t, 0), owner="victim") for t in ("v1", "v2", "v3")}
    flood = log.append("a1", _big("a1"), owner="attacker")
    log.append("a2", _big("a2"), owner="attacker")
    log.append("a2", _big("a2"), owner="attacker")  # past the bound
    # The attacker holds fewer logs than the victim but most of the bytes: one of its own
    # logs goes, not the victim's small live ones (their readers would be refused).
    assert log.held_bytes <= bound
    for task_id, seq in kept.items():
        assert await _replay(log, task_id, seq - 1) == [seq]
    with pytest.raises(InvalidParamsError, match="no longer kept"):
        await _replay(log, "a1", flood)

"""``FairPool`` (``execution/fair_pool.py``) at its own interface, as an attacker uses it:
thousands of waiting calls from one caller, many callers at once, cancels of waiting calls,
a call that raises, a shutdown with calls waiting. One thread, held by a call that waits
for an event, so the order the waiting calls run in is the pool's alone.
"""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError, Future
from typing import Any

import pytest

from apcore_a2a.execution.fair_pool import FairPool

WAIT = 30.0


def _held(pool: FairPool) -> tuple[threading.Event, Future[Any]]:
    """The pool's one thread, held by caller ``x`` until the event is set."""
    release = threading.Event()
    return release, pool.lane("x").submit(release.wait, WAIT)


def test_the_waiting_callers_are_served_in_turn_behind_one_callers_thousands() -> None:
    pool = FairPool(1)
    ran: list[tuple[str, int]] = []
    release, held = _held(pool)
    flood = [pool.lane("ip:192.0.2.1").submit(ran.append, ("a", i)) for i in range(2000)]
    others = [pool.lane(f"apikey::c{i}").submit(ran.append, (f"c{i}", 0)) for i in range(10)]
    release.set()
    for future in [held, *flood, *others]:
        future.result(WAIT)
    pool.shutdown()
    # a's first call was first in line; then every other caller, then the rest of a's.
    assert [who for who, _ in ran[:11]] == ["a"] + [f"c{i}" for i in range(10)]
    assert ran[11:] == [("a", i) for i in range(1, 2000)]


def test_cancelled_waiting_calls_leave_the_line_and_never_run() -> None:
    pool = FairPool(1)
    ran: list[str] = []
    release, held = _held(pool)
    waiting = [pool.lane("a").submit(ran.append, "a") for _ in range(1000)]
    assert all(future.cancel() for future in waiting)
    after = pool.lane("b").submit(ran.append, "b")
    release.set()
    after.result(WAIT)
    # the thread the cancelled calls never held is free for the next call of theirs
    pool.lane("a").submit(ran.append, "a again").result(WAIT)
    assert held.result(WAIT) is True
    assert ran == ["b", "a again"]
    pool.shutdown()


def test_a_call_that_raises_hands_its_error_on_and_frees_its_thread() -> None:
    pool = FairPool(1, share=1)

    def fail() -> None:
        raise ValueError("module failed")

    with pytest.raises(ValueError, match="module failed"):
        pool.lane("a").submit(fail).result(WAIT)
    assert pool.lane("a").submit(lambda: "next").result(WAIT) == "next"
    pool.shutdown()


def test_shutdown_cancels_the_waiting_calls_and_lets_the_running_one_return() -> None:
    pool = FairPool(1)
    release, held = _held(pool)
    waiting = [pool.lane(f"c{i % 3}").submit(lambda: "ran") for i in range(6)]
    pool.shutdown(wait=False)
    for future in waiting:
        with pytest.raises(CancelledError):
            future.result(WAIT)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.lane("c0").submit(lambda: "late")
    release.set()
    assert held.result(WAIT) is True
    pool.shutdown(wait=True)  # returns: the thread stopped once its call returned

"""The ``sync_workers`` threads, shared fairly by callers.

A plain ``ThreadPoolExecutor`` serves waiting calls first come, first served: a caller's
call waits behind another caller's whole backlog. :class:`FairPool` queues the calls that
find no thread per caller and, as threads free up, serves the waiting callers in turn
(round-robin; a caller's own calls in order). Turns cannot free a thread that one caller's
running calls hold; a *share* can: one caller holds at most that many threads, and its
next call waits for one of its own to return (never refused) while the rest serve others.
By default the share is three quarters of the threads (rounded up, at least one thread
left to others once there are two): a sync module that hangs keeps its thread past every
timeout, so without a share one caller's hung calls could hold them all for ever.

The threads are a ``ThreadPoolExecutor``'s (started as needed, joined by the interpreter
before it exits); at most *workers* calls are handed to it at once, so it never queues.

Example::

    pool = FairPool(32, share=8)
    await loop.run_in_executor(pool.lane("apikey::alice"), work)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

#: one waiting call: what to run, with which arguments
_Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def default_share(workers: int) -> int:
    """The threads one caller holds at most when no share is set: 24 of 32, 1 of 2."""
    return max(1, workers - max(1, workers // 4))


class FairPool:
    """*workers* threads; a caller holds at most *share* of them (``None``:
    :func:`default_share`)."""

    def __init__(self, workers: int, share: int | None = None, name: str = "apcore-a2a") -> None:
        self._threads = ThreadPoolExecutor(workers, thread_name_prefix=name)
        self._workers = workers
        self._share = min(share or default_share(workers), workers)
        self._lock = threading.Lock()
        self._closed = False
        #: calls handed to the threads and not returned yet, in all and per caller
        self._busy = 0
        self._running: dict[str, int] = {}
        #: per caller, its calls waiting for a thread, oldest first
        self._waiting: dict[str, OrderedDict[Future[Any], _Call]] = {}
        #: the callers with waiting calls and room in their share, next to serve first
        self._turns: OrderedDict[str, None] = OrderedDict()

    def lane(self, caller: str) -> Lane:
        """The executor of *caller*'s calls (``loop.run_in_executor`` takes it)."""
        return Lane(self, caller)

    def submit(self, caller: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn(*args, **kwargs)`` for *caller* when a thread is free and its turn comes;
        cancelling the future before then takes the call out of the queue."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._waiting.setdefault(caller, OrderedDict())[future] = (fn, args, kwargs)
            if self._running.get(caller, 0) < self._share:
                self._turns[caller] = None  # a caller already in line keeps its place
            started = self._next_calls()
        future.add_done_callback(lambda done: self._forget(caller, done))
        self._start(started)
        return future

    def shutdown(self, wait: bool = True) -> None:
        """No new calls, and the waiting ones are cancelled; the threads stop once their
        calls return (*wait*: this returns then)."""
        with self._lock:
            self._closed = True
            waiting = [future for queue in self._waiting.values() for future in queue]
        for future in waiting:
            future.cancel()
        # Not cancel_futures: a call handed over but not started is cancelled by _run.
        self._threads.shutdown(wait)

    def _next_calls(self) -> list[tuple[str, Future[Any], _Call]]:
        """Take the calls the free threads run next, one per caller in turn (lock held)."""
        started = []
        while self._busy < self._workers and self._turns:
            caller, _ = self._turns.popitem(last=False)
            queue = self._waiting[caller]
            future, call = queue.popitem(last=False)
            held = self._running[caller] = self._running.get(caller, 0) + 1
            self._busy += 1
            if not queue:
                del self._waiting[caller]
            elif held < self._share:
                self._turns[caller] = None  # to the back of the line
            started.append((caller, future, call))
        return started

    def _start(self, started: list[tuple[str, Future[Any], _Call]]) -> None:
        for caller, future, call in started:
            try:
                self._threads.submit(self._run, caller, future, call)
            except RuntimeError:  # shut down meanwhile (or the interpreter): it never runs
                future.cancel()
                self._start(self._returned(caller))

    def _run(self, caller: str, future: Future[Any], call: _Call) -> None:
        try:
            if self._closed:
                future.cancel()  # handed over just before the shutdown: as if still waiting
            if future.set_running_or_notify_cancel():
                fn, args, kwargs = call
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # the call's, as ThreadPoolExecutor hands it on
                    future.set_exception(exc)
                else:
                    future.set_result(result)
        finally:
            self._start(self._returned(caller))

    def _returned(self, caller: str) -> list[tuple[str, Future[Any], _Call]]:
        """*caller*'s call gave its thread back: the calls that run next."""
        with self._lock:
            self._busy -= 1
            held = self._running[caller] - 1
            if held:
                self._running[caller] = held
            else:
                del self._running[caller]
            if caller in self._waiting and held < self._share:
                self._turns.setdefault(caller)
            return [] if self._closed else self._next_calls()

    def _forget(self, caller: str, future: Future[Any]) -> None:
        """A cancelled call still waiting leaves the queue (it held no thread)."""
        if not future.cancelled():
            return
        with self._lock:
            queue = self._waiting.get(caller)
            if queue is None or queue.pop(future, None) is None or queue:
                return
            del self._waiting[caller]
            self._turns.pop(caller, None)


class Lane(Executor):
    """One caller's view of a :class:`FairPool` (a run's own: ``Run.pool``)."""

    def __init__(self, pool: FairPool, caller: str) -> None:
        self._pool = pool
        self._caller = caller
        #: the call handed over last (running, done, or waiting for a thread)
        self.last: Future[Any] | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.last = self._pool.submit(self._caller, fn, *args, **kwargs)
        return self.last

"""Graceful shutdown: let running tasks finish, then cancel what is left.

:func:`drain` runs when the server stops taking requests (``serve()`` right after closing
its listeners; the app lifespan again, for apps run by another ASGI server). Leftover tasks
are canceled through the request handler, like a client's ``CancelTask``, so each is stored
as ``canceled`` and open streams get that event. ``returnImmediately`` tasks count like any
other (executions are tracked, not connections); ``input-required`` tasks are left as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from a2a.server.context import ServerCallContext
from a2a.types import CancelTaskRequest, Task
from a2a.utils.errors import A2AError

from apcore_a2a.edge.call import with_record
from apcore_a2a.execution.observer import TERMINAL_STATES, state_name, task_state
from apcore_a2a.upstream.ended_runs import held_runs, run_ended

if TYPE_CHECKING:
    from apcore_a2a.execution.observer import Execution
    from apcore_a2a.ops.operations import ServerView

logger = logging.getLogger("apcore_a2a.ops.shutdown")

#: Status message of the tasks canceled because the server stopped.
SHUTDOWN_MESSAGE = "Canceled: the server is shutting down"
#: Shortest wait for the final state of a finished task to reach the store (the drain
#: waits until the end of the grace period, and this long for tasks canceled then).
_SETTLE_SECONDS = 2.0
#: Seconds the gRPC calls get, once the drain has ended, to send their last message
#: (their task's last event, ``NOT_SERVING``), as the HTTP connections (``_runner.py``).
_LAST_WRITES = 3.0
#: Seconds the request handler's close gets after the drain, at least (else what is left of
#: ``shutdown_timeout``): it cancels every run and waits for each to end, and a run that
#: does not take its cancel (its save waiting on a locked SQLite file, whose cancelled
#: connection SQLAlchemy closes under ``asyncio.shield``) is left then, so the stores close.
CLOSE_GRACE = 2.0
#: Task ids a warning names at most (the rest counted).
_NAMED = 8
#: states an execution can be left in without a final event to wait for
_UNSETTLED = frozenset({"submitted", "working"})


async def drain(state: ServerView, grace: float) -> None:
    """Wait up to *grace* seconds for running executions, cancel the rest, and wait for
    their final states to be stored.

    One drain per server: a second call (the lifespan's, after ``serve()`` began one on
    SIGTERM) waits for the first, so whoever closes the store next closes it after it.
    """
    ops = state.ops
    if ops.draining is None:
        ops.draining = asyncio.ensure_future(_drain(state, grace))
    # Shielded: one caller given up on does not end the drain of another.
    try:
        await asyncio.shield(ops.draining)
    except asyncio.CancelledError:
        # The drain itself given up on (a second Ctrl-C): its waiters go on with the stop.
        task = asyncio.current_task()
        if not ops.draining.cancelled() or (task is not None and task.cancelling()):
            raise


async def _drain(state: ServerView, grace: float) -> None:
    ops = state.ops
    now = time.monotonic()
    if ops.shutdown_deadline is None:
        ops.shutdown_deadline = now + max(grace, 0.0)
        # Requests waiting on a key fetch (a JWKS endpoint that hangs) are refused now
        # rather than canceled with a 500 when the grace period ends.
        close = getattr(state.extras.get("auth"), "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:
                logger.exception("The authenticator could not be closed")
    deadline = ops.shutdown_deadline
    remaining = max(deadline - now, 0.0)
    grpc_server = state.extras.get("grpc")
    # gRPC keeps accepting until told; its grace outlasts ours so our cancels, not its
    # own, end the calls still running at the deadline.
    stopping = (
        asyncio.ensure_future(grpc_server.stop(remaining + 5.0))
        if grpc_server is not None
        else None
    )
    saves = _Saves(state)
    stop_listening = state.stores.on_save(saves)
    try:
        await _wait(state, saves, deadline)
    finally:  # also when a second Ctrl-C cancels the drain
        stop_listening()
    if grpc_server is not None:  # its streams no task's end reaches end now, status OK;
        grpc_server.ends.end(last_events(state))  # a call still open then is cut (RST_STREAM)
        with contextlib.suppress(Exception):  # (a Watch or stream whose client reads nothing)
            await grpc_server.stop(_LAST_WRITES)
    if stopping is not None:
        with contextlib.suppress(Exception):
            await stopping


async def close_runs(state: ServerView, running: Callable[[], list[str]]) -> None:
    """Close the request handler (a2a-sdk cancels each run and waits for it), waiting at
    most what is left of the drain's deadline, and :data:`CLOSE_GRACE` at least. A close
    still waiting then goes on alone, named in one WARNING with the tasks whose runs it
    waits for (*running*: those whose module still runs here)."""
    closing = asyncio.ensure_future(state.handler.aclose())
    deadline = state.ops.shutdown_deadline
    left = deadline - time.monotonic() if deadline is not None else 0.0
    grace = max(left, CLOSE_GRACE)
    try:
        await asyncio.wait([closing], timeout=grace)
    except asyncio.CancelledError:
        closing.cancel()  # the stop given up on (a second Ctrl-C): as the close was before
        raise
    if closing.done():
        closing.result()
        return
    # Not cancelled: that is what it does not take. Kept, so that nothing collects it.
    state.extras["abandoned_close"] = closing
    held, modules = held_runs(state.handler), set(running())
    named = ", ".join(f"{t} (module still running)" if t in modules else t for t in held[:_NAMED])
    more = f" and {len(held) - _NAMED} more" if len(held) > _NAMED else ""
    logger.warning(
        "Shutting down: the runs of %d task(s) did not close %.1f s after the drain (%s%s): "
        "a run that does not take its cancel; abandoning them, the stores close now; %s",
        len(held),
        grace,
        named or "none held",
        more,
        state.stores.left_behind("them"),
    )


def last_events(state: ServerView) -> dict[str, str]:
    """The tasks whose last event the drain saw stored, on its way to their streams, each
    with its state (``TASK_STATE_CANCELED``): those that finished, and those that parked
    in ``input-required`` / ``auth-required`` during the drain (the SDK ends no
    subscription there, and that event may reach its stream after the drain has ended).
    A state the store did not take sends no event: its streams wait for none."""
    seen, unstored = state.ops.tracker.recorded or [], state.ops.unstored
    return {
        e.task_id: task_state(e.state)
        for e in seen
        if e.state not in _UNSETTLED and not e.reply and e.task_id not in unstored
    }


async def _wait(state: ServerView, saves: _Saves, deadline: float) -> None:
    """Let the runs end within the grace period, cancel the rest, and wait for their
    final states to be stored."""
    ops = state.ops
    tracker = ops.tracker
    seen = tracker.record()
    if tracker.active:
        logger.info(
            "Shutting down: waiting up to %.1f s for %d running task(s)",
            max(deadline - time.monotonic(), 0.0),
            tracker.active,
        )
    await tracker.wait_idle(deadline - time.monotonic())
    leftover = [e for e in tracker.running() if not e.reply]
    if leftover:
        logger.warning("Shutting down: canceling %d task(s) still running", len(leftover))
        await asyncio.gather(*(_cancel(state, e) for e in leftover))
    # An execution has ended once its last event is queued; the SDK stores it a moment
    # later, and closing the handler before that would lose it.
    finished = [e for e in seen if e.state not in _UNSETTLED and not e.reply]
    # Within the grace period, but the cancels at its end get a moment of their own.
    await saves.wait(finished, max(deadline - time.monotonic(), _SETTLE_SECONDS))


class _Saves:
    """The store's save listener during a drain: which finished executions' final states
    are saved (a read of the store would queue behind the very write it waits for)."""

    def __init__(self, state: ServerView) -> None:
        self.state = state
        self.last: dict[str, str] = {}  # task id -> state last saved since the drain began
        self.waiting: dict[str, Execution] = {}
        self.done = asyncio.Event()

    def __call__(self, task: Task, _context: ServerCallContext) -> None:
        saved = self.last[task.id] = state_name(task.status.state)
        execution = self.waiting.get(task.id)
        if execution is not None and _settled(execution, saved):
            self._stop_waiting(task.id)

    def _stop_waiting(self, task_id: str) -> None:
        del self.waiting[task_id]
        if not self.waiting:
            self.done.set()

    async def wait(self, finished: list[Execution], seconds: float) -> None:
        """Wait up to *seconds* for the final states of *finished*; name each not stored."""
        self.waiting = {e.task_id: e for e in finished if not _settled(e, self.last.get(e.task_id))}
        reads = [asyncio.ensure_future(self._ended(e)) for e in self.waiting.values()]
        try:
            if self.waiting:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.done.wait(), seconds)
        finally:  # a second Ctrl-C cancels the drain: no read polls on after it
            for read in reads:
                read.cancel()
        for execution in list(self.waiting.values()):
            _unsaved(self.state, execution)

    async def _ended(self, execution: Execution) -> None:
        """Read the task back until its final state is heard or read, or the SDK's run of
        it has ended (every save made or failed): then the read after it is the last word.
        Another writer may have ended the task (a replica's cancel, saved before the drain
        listened): the store refuses the run's own save, and no listener hears of it."""
        state, task_id = self.state, execution.task_id
        context = execution.call_context or ServerCallContext()
        while task_id in self.waiting:
            ended, unread = run_ended(state.handler, task_id), False
            task: Task | None = None
            try:
                task = await state.stores.get_task(task_id, context)
            except Exception:  # the last word only once the run has ended (a save may land)
                unread = True
            if task is not None:
                self(task, context)
            if ended and task_id in self.waiting:
                self._stop_waiting(task_id)
                if task is not None or unread:  # a run that stored nothing leaves nothing
                    _unsaved(state, execution)
                return
            await asyncio.sleep(0.1)


def _unsaved(state: ServerView, execution: Execution) -> None:
    state.ops.unstored.add(execution.task_id)
    logger.warning(
        "Shutting down: the final state %s of task %s is not stored: the task store did "
        "not take it (refused it, locked by another process, or unreachable); %s",
        execution.state,
        execution.task_id,
        state.stores.left_behind("the task"),
    )


def _settled(execution: Execution, saved: str | None) -> bool:
    return saved == execution.state or saved in TERMINAL_STATES


async def _cancel(state: ServerView, execution: Execution) -> None:
    # As the caller who started it (owner scoping applies), with the reason to show.
    context = with_record(
        execution.call_context or ServerCallContext(), cancel_reason=SHUTDOWN_MESSAGE
    )
    try:
        await state.handler.on_cancel_task(CancelTaskRequest(id=execution.task_id), context)
    except A2AError as exc:
        logger.debug("Task %s not canceled at shutdown: %s", execution.task_id, exc)
    except Exception:
        logger.exception("Task %s could not be canceled at shutdown", execution.task_id)

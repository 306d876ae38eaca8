"""A run whose save failed is one line naming its task and the store's error.

a2a-sdk 1.3's ``EventConsumer.run`` logs a save that failed (a store outage, an
application's own store refusing it) as ``Consumer[<id>]: Failed`` at ERROR with a
traceback through the SDK and our store chain, then writes the task failed; when that write
fails too (the store is still down), the exception leaves the consumer's task, which nobody
awaits: asyncio logs "Task exception was never retrieved" with two more tracebacks when the
task is collected. Here, for the runs of our handlers only: the consumer's record is one
line, ``Task <id>: its state could not be saved (Task store unavailable; retry later); its
run ended``, at ERROR, without traceback (the store chain logged the outage itself), and
the exception its task ends with is retrieved (DEBUG). A consumer that failed for another
reason (the run raised an A2A error of the SDK's, or the SDK refused one of its events)
keeps the SDK's record, traceback included: it is no save's. The records' filter is on the
SDK's ``active_task`` logger while an agent of ours runs, and acts only in the runs our
handlers started (a context variable they are created under); the loop's exception handler
is not touched.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

from a2a.server.agent_execution.active_task import ActiveTask
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.utils.errors import A2AError

from apcore_a2a._text import echoed
from apcore_a2a.errors import OwnError
from apcore_a2a.upstream import WhileOurs

#: the SDK's logger of a run's consumer
LOGGER = "a2a.server.agent_execution.active_task"
#: its record of a consumer that failed (its one argument: the task id)
_FAILED = "Consumer[%s]: Failed"

logger = logging.getLogger("apcore_a2a.server")
#: set while one of our handlers builds a run: its tasks are created in a copy of it
_OURS: contextvars.ContextVar[bool] = contextvars.ContextVar("apcore_a2a_run", default=False)


def problem(exc: BaseException) -> str:
    """The store's error as the line names it: our own error's words, another's type."""
    if isinstance(exc, OwnError):
        return str(exc.message)
    return f"{type(exc).__name__}: {echoed(exc, limit=200)}"


def store_failure(exc: BaseException) -> bool:
    """Whether a consumer failed on *exc* as a save fails: one of our own errors (the
    store chain's) or an exception that is no A2A error (an application store's own). An
    A2A error of the SDK's is the run's (its producer raised it: ``InternalError``) or the
    SDK's refusal of an event (``InvalidAgentResponseError``): its record stays the SDK's."""
    return isinstance(exc, OwnError) or not isinstance(exc, A2AError)


class _FailedSaves(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _FAILED or not _OURS.get() or not record.exc_info:
            return True
        error = record.exc_info[1]
        if error is None or not store_failure(error):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        record.msg = "Task %s: its state could not be saved (%s); its run ended"
        record.args = (*args[:1], problem(error))
        record.exc_info, record.exc_text = None, None
        return True


_ON = WhileOurs(_FailedSaves(), LOGGER)


async def attach() -> None:
    """An agent of ours starts: its runs' failed saves are one line each."""
    _ON.attach()


async def detach() -> None:
    """An agent of ours stopped; the last one takes the filter off."""
    _ON.detach()


def _retrieved(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        logger.debug("run %s ended with %s", task.get_name(), problem(exc))


def report_failed_saves(handler: DefaultRequestHandler) -> None:
    """The runs *handler*'s registry builds are ours: their failed saves are one line, the
    exception their consumer ends with retrieved."""
    registry = handler._active_task_registry
    get_or_create = registry.get_or_create

    async def ours(task_id: str, *args: Any, **kwargs: Any) -> ActiveTask:
        token = _OURS.set(True)
        try:
            run = await get_or_create(task_id, *args, **kwargs)
        finally:
            _OURS.reset(token)
        consumer = run._consumer_task
        if consumer is not None:  # added once per task: a callback already there is kept
            consumer.remove_done_callback(_retrieved)
            consumer.add_done_callback(_retrieved)
        return run

    registry.get_or_create = ours  # type: ignore[method-assign]

"""Watching executions: what runs right now, and how each run ended.

The executor wraps every ``execute()`` in :func:`observe`. Observers (metrics, telemetry,
the :class:`ExecutionTracker` of graceful shutdown) get ``started`` and ``finished`` with
one :class:`Execution`, whose final ``state`` and ``error_code`` are read off the events
the run emits (:meth:`Execution.saw`), so the executor itself keeps no counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from a2a.types import Message, Task, TaskState, TaskStatusUpdateEvent
from apcore import TraceContext

from apcore_a2a import _logging
from apcore_a2a.edge.call import call_of

if TYPE_CHECKING:
    from a2a.server.agent_execution import RequestContext
    from a2a.server.context import ServerCallContext

logger = logging.getLogger("apcore_a2a.execution.observer")

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})


@functools.cache  # spelled once per state A2A defines (a run's events name three per call)
def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``"input-required"`` (``ValueError`` for a number
    A2A does not define, as ``TaskState.Name``)."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


def task_state(state: str) -> str:
    """``completed`` (0.3) or ``TASK_STATE_COMPLETED`` (1.0) -> ``TASK_STATE_COMPLETED``."""
    name = state.upper().replace("-", "_")
    return name if name.startswith("TASK_STATE_") else f"TASK_STATE_{name}"


@dataclass(slots=True, eq=False)
class Execution:
    """One ``execute()`` call: which task and skill, and (once it ended) how it ended.

    ``state`` follows the events the executor enqueues; ``error_code`` is the apcore error
    code of a failed run; ``reply`` marks an answer that was a message, not a task.
    """

    task_id: str
    context_id: str
    skill_id: str
    method: str | None
    call_context: ServerCallContext | None
    trace_id: str | None = None
    started_at: float = field(default_factory=time.monotonic)
    state: str = "working"
    error_code: str | None = None
    reply: bool = False
    seconds: float = 0.0

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL_STATES

    def saw(self, event: Any) -> None:
        """Note the task state (and error code) an event the run enqueues carries."""
        if isinstance(event, TaskStatusUpdateEvent | Task):
            status = event.status
            self.state = state_name(status.state)
            if status.HasField("message"):
                self.error_code = _error_code(status.message) or self.error_code
        elif isinstance(event, Message):
            self.state = "completed"
            self.reply = True

    def refused(self, code: str) -> None:
        """The run was to answer with a message and failed with *code*: no task was kept."""
        self.state, self.error_code, self.reply = "failed", code, True


class ExecutionObserver(Protocol):
    """Told when an execution starts and when it has ended (in the executing task)."""

    def started(self, execution: Execution) -> None: ...

    def finished(self, execution: Execution) -> None: ...


class ExecutionTracker:
    """The executions in progress, for ``active_tasks`` and for draining on shutdown."""

    def __init__(self) -> None:
        self._running: set[Execution] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        #: while recording (a shutdown), every execution seen, running or started since
        self.recorded: list[Execution] | None = None

    def started(self, execution: Execution) -> None:
        self._running.add(execution)
        self._idle.clear()
        if self.recorded is not None:
            self.recorded.append(execution)

    def record(self) -> list[Execution]:
        """Start recording: the running executions now, and those started from now on."""
        if self.recorded is None:
            self.recorded = self.running()
        return self.recorded

    def finished(self, execution: Execution) -> None:
        self._running.discard(execution)
        if not self._running:
            self._idle.set()

    @property
    def active(self) -> int:
        return len(self._running)

    def running(self) -> list[Execution]:
        """A snapshot of the executions in progress, oldest first."""
        return sorted(self._running, key=lambda e: e.started_at)

    async def wait_idle(self, seconds: float) -> bool:
        """Wait up to *seconds* for no execution to be running; ``True`` if none is."""
        if not self._running:
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(seconds, 0.0)):
                await self._idle.wait()
        return not self._running


def _error_code(message: Message) -> str | None:
    for part in message.parts:
        if part.HasField("data") and part.data.HasField("struct_value"):
            code = part.data.struct_value.fields.get("code")
            if code is not None and code.HasField("string_value"):
                return str(code.string_value)
    return None


def _trace_id_of(call_context: ServerCallContext | None) -> str | None:
    """The trace id of an inbound W3C ``traceparent``, read as apcore reads it for the run."""
    headers = call_context.state.get("headers") if call_context is not None else None
    parent = TraceContext.extract(headers) if isinstance(headers, dict) else None
    return parent.trace_id if parent is not None else None


@contextlib.contextmanager
def observe(
    observers: Sequence[ExecutionObserver],
    context: RequestContext,
    skill_id: str,
) -> Iterator[Execution]:
    """Run one execution under *observers*; yields the :class:`Execution` its run notes
    its events on.

    Records logged inside carry the task id, skill id and trace id. An observer that
    raises is logged and skipped: watching must never break a task.
    """
    call_context = context.call_context
    call = call_of(call_context)  # its A2A method, as the edge named it on every binding
    execution = Execution(
        task_id=context.task_id or "",
        context_id=context.context_id or "",
        skill_id=skill_id,
        method=call.method if call is not None else None,
        call_context=call_context,
        trace_id=_trace_id_of(call_context),
    )
    for observer in observers:
        _call(observer.started, execution)
    token = _logging.bind(task_id=execution.task_id, skill_id=skill_id, trace_id=execution.trace_id)
    try:
        yield execution
    except asyncio.CancelledError:
        if not execution.ended:
            execution.state = "canceled"
        raise
    except BaseException as exc:
        if not execution.ended:
            execution.state = "failed"
            code = getattr(exc, "code", None) or type(exc).__name__
            execution.error_code = execution.error_code or str(code)
        raise
    finally:
        execution.seconds = time.monotonic() - execution.started_at
        _logging.unbind(token)
        for observer in reversed(observers):
            _call(observer.finished, execution)


def _call(hook: Callable[[Execution], None], execution: Execution) -> None:
    try:
        hook(execution)
    except Exception:
        logger.exception("Execution observer %r failed", hook)

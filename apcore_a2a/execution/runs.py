"""One ``execute()`` in progress (:class:`Run`), the events it emits and a streaming
module's chunks (which one is the last, its data chunks merged).

The cancellation rules live here: a canceled run emits nothing more, a finished run is not
overwritten by a late cancel, and the task apcore runs an async module in is cancelled
with it. A module with a plain ``def execute`` runs on the agent's own thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers.proto_helpers import new_data_part, new_message
from a2a.server.agent_execution import RequestContext
from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _TERMINAL
from a2a.server.events import EventQueue
from a2a.types import (
    Artifact,
    Message,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from apcore import CancelToken, Context, TraceContext
from google.protobuf.json_format import MessageToDict

from apcore_a2a.approval import APPROVED_KEY
from apcore_a2a.errors import QuotaExceededError
from apcore_a2a.execution.fair_pool import Lane
from apcore_a2a.execution.identity import identity_of
from apcore_a2a.execution.observer import Execution
from apcore_a2a.upstream.apcore_execute import RunModule
from apcore_a2a.upstream.apcore_schema_cache import WrappedStep

logger = logging.getLogger("apcore_a2a.executor")


class ModuleCalls:
    """The module calls that have started and not yet returned (thread-safe), wherever they
    run (a task, a pool thread). A canceled run stops waiting for its module at once, but
    the module may go on (a plain ``def execute`` keeps its thread, an ``async def execute``
    may swallow the cancellation): a shutdown that cannot wait for them any longer says
    what it abandons (ops/exit_deadline.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[object, tuple[str, str]] = {}

    @contextlib.contextmanager
    def running(self, task_id: str, module_id: str) -> Iterator[None]:
        """Count the call of *module_id* for *task_id* as running while the block runs
        (enter it in the thread or task the module runs in)."""
        key = object()
        with self._lock:
            self._calls[key] = (task_id, module_id)
        try:
            yield
        finally:
            with self._lock:
                del self._calls[key]

    def snapshot(self) -> list[tuple[str, str]]:
        """``(task_id, module_id)`` of each call still running, oldest first."""
        with self._lock:
            return list(self._calls.values())


class NoThread(Exception):
    """A sync module's call that waited for a worker thread until its timeout (the
    argument, seconds) and never ran: a refusal the caller may retry, not a module that
    timed out."""


def refusal_of(exc: BaseException) -> QuotaExceededError | None:
    """The answer to a call that never got a sync worker thread (*exc*), or ``None``."""
    if not isinstance(exc, NoThread):
        return None
    logger.warning("A sync module's call waited for a thread until its timeout; refused")
    return QuotaExceededError(
        "No sync worker thread came free for this call within execution_timeout "
        f"({exc.args[0]:g} s): the caller's other calls hold its share of them "
        "(sync_workers_per_caller), or every one is busy; retry later"
    )


@dataclass(slots=True)
class Run:
    """One ``execute()`` in progress.

    The SDK cancels ``execute()`` only after ``cancel()`` has enqueued CANCELED, so a
    result that lands in between must not follow it into the queue: ``canceled`` stops
    all further events. ``ended`` records that a terminal event was already enqueued,
    so a late cancel does not overwrite a finished task.
    """

    queue: EventQueue
    task_id: str
    context_id: str
    token: CancelToken = field(default_factory=CancelToken)
    canceled: bool = False
    ended: bool = False
    #: the question (``turns.PendingInput``) this run's input answers, if any
    answering: Any = None
    #: the message whose input this run resumes (an approval's run), if not its own
    input_of: str = ""
    #: an approval this run resumes for a module its module calls (``APPROVED_KEY``)
    approved: dict[str, str] | None = None
    #: the apcore ``Context.data`` the module ran with (read back for ``reply_as``)
    data: dict[str, Any] | None = None
    #: the tasks apcore ran the module in (see track_module_tasks)
    spawned: weakref.WeakSet[asyncio.Task[Any]] = field(default_factory=weakref.WeakSet)
    #: the threads a module with a plain ``def execute`` runs on
    pool: Lane | None = None
    #: what the observers are told of this run (``None``: no observers)
    execution: Execution | None = None
    #: where the module's call is counted while it runs (``None``: not counted)
    calls: ModuleCalls | None = None
    #: the module the run calls (known once its apcore context is built)
    module_id: str = ""
    #: the save a follow-up's module waits for before it starts (``turns.StoredWorking``)
    waiting: asyncio.Future[bool] | None = None

    async def emit(self, event: Any) -> None:
        if self.canceled:
            return
        if isinstance(event, TaskStatusUpdateEvent) and event.status.state in _TERMINAL:
            self.ended = True
        if self.execution is not None:
            self.execution.saw(event)
        await self.queue.enqueue_event(event)

    async def status(
        self,
        state: TaskState,
        message: Message | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Emit a status update of this run's task."""
        status = TaskStatus(state=state, message=message)
        status.timestamp.GetCurrentTime()
        event = TaskStatusUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, status=status
        )
        if metadata:
            event.metadata.update(metadata)
        await self.emit(event)

    async def artifact(
        self, artifact_id: str, parts: list[Part], *, append: bool = False, last: bool = True
    ) -> None:
        """Emit an update of the task's result artifact."""
        artifact = Artifact(artifact_id=artifact_id, name="result", parts=parts)
        await self.emit(
            TaskArtifactUpdateEvent(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=artifact,
                append=append,
                last_chunk=last,
            )
        )

    def message(self, text: str, data: dict[str, Any]) -> Message:
        """An agent message on this run's task: a text part and, if *data*, a data part."""
        parts = [Part(text=text), *([new_data_part(data)] if data else [])]
        return new_message(parts, self.context_id, self.task_id)

    def apcore_context(self, context: RequestContext, module_id: str, timeout: float) -> Any:
        """The apcore ``Context`` of the module call: identity, W3C trace parent, this run's
        cancel token, deadline and the ``a2a.*`` facts (kept as :attr:`data`)."""
        self.module_id = module_id
        call_context = context.call_context
        headers = call_context.state.get("headers") if call_context is not None else None
        message = context.message
        data: dict[str, Any] = {
            "a2a.task_id": context.task_id,
            "a2a.context_id": context.context_id,
            "a2a.message_id": message.message_id if message is not None else None,
            "a2a.skill_id": module_id,
        }
        if message is not None and message.HasField("metadata"):
            data["a2a.message_metadata"] = MessageToDict(message.metadata)
        if context.metadata:
            data["a2a.request_metadata"] = context.metadata
        if self.approved is not None:
            data[APPROVED_KEY] = dict(self.approved)
        apcore_context = Context.create(
            identity=identity_of(call_context),
            trace_parent=TraceContext.extract(headers) if headers else None,
            cancel_token=self.token,
            data=data,
            global_deadline=time.time() + timeout,
        )
        self.data = apcore_context.data
        return apcore_context

    def never_got_a_thread(self) -> bool:
        """Whether the sync module's call still waits for a thread: if so it is taken out
        of the line here, so it never runs (a timeout then ended a wait, not a module)."""
        call = self.pool.last if self.pool is not None else None
        return call is not None and call.cancel()

    def stop(self) -> None:
        """Cancel the module: its apcore token, and the task apcore runs it in; or, not
        started yet, its wait for its ``working`` save."""
        self.token.cancel()
        for task in list(self.spawned):
            task.cancel()
        if self.waiting is not None:
            self.waiting.cancel()


#: How long a streamed chunk waits for the next one to learn whether it was the last: long
#: enough for a generator that returns right after its final yield (apcore's stream
#: pipeline adds a few awaits), short enough that a slow stream barely notices.
LAST_CHUNK_GRACE = 0.02

_END = object()


async def with_last_flag(chunks: AsyncIterator[Any]) -> AsyncGenerator[tuple[Any, bool], None]:
    """Yield ``(chunk, is_last)`` for each chunk of ``chunks``, in order.

    A2A marks an artifact's final chunk ``lastChunk`` and allows no empty closing update,
    but only the generator's end says which chunk was the last: each chunk waits up to
    :data:`LAST_CHUNK_GRACE` for the next; when the generator ends first it goes out as the
    last, else as not (and the task's terminal status closes the artifact). The caller owns
    ``chunks`` (and closes it); a pending read is cancelled here when the consumer stops
    early, so the generator is never closed while it is running."""
    held: Any = _END
    pending: asyncio.Task[Any] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(chunks, _END))
            if held is not _END:
                done, _ = await asyncio.wait({pending}, timeout=LAST_CHUNK_GRACE)
                if not done:
                    yield held, False
                    held = _END
            failure: Exception | None = None
            try:
                following = await pending
            except Exception as exc:
                following, failure = _END, exc
            pending = None
            if held is not _END:
                # A module that fails mid-stream still delivers what it yielded before.
                yield held, following is _END and failure is None
            if following is _END:
                if failure is not None:
                    raise failure
                return
            held = following
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending


def deep_merge(target: dict[str, Any], chunk: dict[str, Any]) -> None:
    """Merge *chunk* into *target*, dicts key by key (a streamed module's data chunks)."""
    for key, value in chunk.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            deep_merge(target[key], value)
        else:
            target[key] = value


#: the run whose module is executing in the current asyncio context
CURRENT_RUN: ContextVar[Run | None] = ContextVar("apcore_a2a_run", default=None)


class _RunStep(WrappedStep):
    """apcore's ``execute`` step in our runs: a sync module on the run's pool, and the task
    apcore runs the module in recorded for :meth:`Run.stop` (upstream/apcore_execute.py)."""

    def view(self, module: Any) -> Any:
        run = CURRENT_RUN.get()
        if run is None:
            return module
        calls = run.calls
        tracked = functools.partial(calls.running, run.task_id, run.module_id) if calls else None
        # An async module runs where apcore runs it; a sync one on the run's pool (every
        # run the executor starts has one).
        pool = None if inspect.iscoroutinefunction(module.execute) else run.pool
        return RunModule(module, run.spawned, asyncio.current_task(), pool, tracked, _thread())


def _thread() -> contextvars.Context:
    """The context a sync module's thread runs in: this one (the caller for
    ``current_identity()``, the task's log fields), without the run: a module that calls
    another from its thread is not the run's step, whose tasks live on the loop."""
    context = contextvars.copy_context()
    context.run(CURRENT_RUN.set, None)
    return context


def track_module_tasks(executor: Any) -> None:
    """Let the runs of *executor* run sync modules on their pool and cancel the tasks apcore
    starts for their modules, by wrapping its ``execute`` step (idempotent; no loop-wide
    task factory or default executor)."""
    strategy: Any = getattr(executor, "current_strategy", None)  # None: not an apcore Executor
    step = next((s for s in getattr(strategy, "steps", ()) if s.name == "execute"), None)
    if step is not None and not isinstance(step, _RunStep):
        strategy.replace("execute", _RunStep(step))

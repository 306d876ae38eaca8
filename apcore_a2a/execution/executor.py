"""``ApCoreAgentExecutor``: the SDK ``AgentExecutor`` that runs apcore modules.

One ``execute()`` per message: enqueue the submitted ``Task`` (history holds the user
message, metadata the skill id), then ``working``, then run the module through apcore's
``Executor`` -- ``call_async()`` for ordinary modules, ``stream()`` for modules with a
``stream()`` method, so ACL, approval, validation, middleware and timeouts always apply --
and finish with artifact + ``completed``, ``input-required`` (approval pending),
``rejected``, ``canceled`` or ``failed`` with a sanitized status message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidParamsError

from apcore_a2a.adapters.errors import MappedError, clean_for_log, map_error
from apcore_a2a.adapters.parts import input_from_parts, output_to_parts
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.execution import approvals
from apcore_a2a.execution.chunks import with_last_flag
from apcore_a2a.execution.context import apcore_context_for
from apcore_a2a.execution.events import (
    ARTIFACT_NAME,
    agent_message,
    chunk_event,
    deep_merge,
    status_event,
)
from apcore_a2a.execution.observer import ExecutionObserver, observe
from apcore_a2a.execution.routing import SKILL_METADATA_KEY, ApCoreRequestContext
from apcore_a2a.execution.runs import CURRENT_RUN, Run, TaskTracker

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

__all__ = ["ApCoreAgentExecutor"]

logger = logging.getLogger("apcore_a2a.executor")

CANCEL_MESSAGE = "Canceled by client"
#: call_context.state key naming why the server itself canceled (e.g. shutting down)
CANCEL_REASON_KEY = "apcore_a2a.cancel_reason"
TIMEOUT_MESSAGE = "Execution timed out"
#: a reserved apcore input key; only a resume on the A2A task may set it
_RESUME_KEY = "_approval_token"


class ApCoreAgentExecutor(AgentExecutor):
    """Run apcore modules for the a2a-sdk request handler.

    *executor* is an ``apcore.Executor``; *settings* supplies ``execution_timeout``;
    *observers* are told when each execution starts and how it ended (metrics, spans).
    """

    def __init__(
        self, executor: Any, settings: Settings, observers: Sequence[ExecutionObserver] = ()
    ) -> None:
        self._executor = executor
        self._timeout = settings.execution_timeout
        self._runs: dict[str, Run] = {}
        self._observers = tuple(observers)

    # -- AgentExecutor ---------------------------------------------------------------
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        spec = getattr(context, "skill", None)
        if spec is None or not self._observers:
            await self._execute(context, event_queue)
            return
        with observe(self._observers, context, spec.module_id, event_queue) as queue:
            await self._execute(context, queue)

    async def _execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        spec = getattr(context, "skill", None)
        message = context.message
        if spec is None or message is None:  # pragma: no cover - builder always sets it
            raise InvalidParamsError(message="Message could not be routed to a skill")
        assert isinstance(context, ApCoreRequestContext)
        stored = context.current_task or context.stored_task
        inputs = _without_token(context.module_input)

        if stored is None and spec.reply == "message":
            await self._reply_with_message(context, spec, inputs, event_queue)
            return

        run = self._runs[task_id] = Run()
        try:
            if stored is None:
                task = Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                )
                task.status.timestamp.GetCurrentTime()
                task.metadata.update({SKILL_METADATA_KEY: spec.module_id})
                await run.emit(event_queue, task)
                working = status_event(task_id, context_id, TaskState.TASK_STATE_WORKING)
            else:
                resumed = await self._resume(run, stored, message, spec, event_queue)
                if resumed is None:
                    return
                inputs, working = resumed
            await run.emit(event_queue, working)
            await self._run(run, context, spec, inputs, event_queue)
        finally:
            if self._runs.get(task_id) is run:
                del self._runs[task_id]

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        run = self._runs.get(task_id)
        if run is not None:
            if run.ended:
                return  # the result is already on its way; CANCELED must not overwrite it
            run.canceled = True
            run.stop()
        # The SDK cancels our execute() right after this returns (a sync module keeps its
        # thread; its late result is dropped by Run.emit). The canceled status is written
        # here so it carries a reason and every open stream receives it.
        state = context.call_context.state if context.call_context is not None else {}
        reason = str(state.get(CANCEL_REASON_KEY) or CANCEL_MESSAGE)
        await event_queue.enqueue_event(
            status_event(
                task_id,
                context.context_id or "",
                TaskState.TASK_STATE_CANCELED,
                agent_message(task_id, context.context_id or "", reason, {}),
            )
        )

    def running_task_ids(self) -> list[str]:
        """Ids of the tasks whose module is executing in this process."""
        return list(self._runs)

    def stop_canceled_elsewhere(self, task_id: str) -> None:
        """Stop the module of *task_id*: another replica canceled the task in the store.

        The module's cancel token fires; whatever the run emits next conflicts with the
        stored CANCELED task, and the SDK then ends the local run as canceled.
        """
        run = self._runs.get(task_id)
        if run is not None and not run.ended:
            run.stop()

    # -- running ---------------------------------------------------------------------
    async def _run(
        self,
        run: Run,
        context: RequestContext,
        spec: SkillSpec,
        inputs: dict[str, Any],
        event_queue: EventQueue,
    ) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        message: Message | None = None
        try:
            value, streamed = await self._invoke(run, context, spec, inputs, event_queue)
        except TimeoutError:
            mapped = map_error(_Timeout(), module_id=spec.module_id)
            self._log(spec, mapped, None)
            await self._finish_error(run, context, event_queue, mapped)
            return
        except Exception as exc:
            await self._handle_failure(run, context, spec, event_queue, exc)
            return

        parts = output_to_parts(value, wrapped_result=spec.wrapped_result)
        if streamed:
            # The chunks already built the artifact; the status carries the merged result.
            message = Message(
                message_id=uuid.uuid4().hex,
                role=Role.ROLE_AGENT,
                task_id=task_id,
                context_id=context_id,
                parts=parts,
            )
        elif parts:
            artifact = Artifact(artifact_id=uuid.uuid4().hex, name=ARTIFACT_NAME, parts=parts)
            await run.emit(
                event_queue,
                TaskArtifactUpdateEvent(
                    task_id=task_id, context_id=context_id, artifact=artifact, last_chunk=True
                ),
            )
        await run.emit(
            event_queue, status_event(task_id, context_id, TaskState.TASK_STATE_COMPLETED, message)
        )

    async def _invoke(
        self,
        run: Run,
        context: RequestContext,
        spec: SkillSpec,
        inputs: dict[str, Any],
        event_queue: EventQueue | None,
    ) -> tuple[Any, bool]:
        """Run the module under ``execution_timeout``; returns (result, streamed).

        *event_queue* receives the chunks of a streaming module; without one the module
        is called as a whole. Cancellation and timeout stop the module (``Run.stop``).
        """
        TaskTracker.install(asyncio.get_running_loop())
        apcore_context = apcore_context_for(context, spec, run.token, self._timeout)
        marker = CURRENT_RUN.set(run)
        try:
            async with asyncio.timeout(self._timeout):
                if spec.streaming and event_queue is not None:
                    return await self._stream(
                        run, spec, inputs, apcore_context, context, event_queue
                    )
                value = await self._executor.call_async(spec.module_id, inputs, apcore_context)
                return value, False
        except (TimeoutError, asyncio.CancelledError):
            run.stop()
            raise
        finally:
            CURRENT_RUN.reset(marker)

    async def _stream(
        self,
        run: Run,
        spec: SkillSpec,
        inputs: dict[str, Any],
        apcore_context: Any,
        context: RequestContext,
        event_queue: EventQueue,
    ) -> tuple[dict[str, Any] | None, bool]:
        """Run a streaming module; each chunk becomes an artifact update on one id.

        A chunk goes out as soon as the next one arrives, the module's generator ends,
        or a short grace passes (see ``chunks.with_last_flag``); the last one carries
        ``last_chunk`` when the generator ends within that grace. Returns the merged
        result and whether any chunk came.
        """
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        artifact_id = uuid.uuid4().hex
        merged: dict[str, Any] = {}
        sent = 0
        stream = self._executor.stream(spec.module_id, inputs, apcore_context)
        # aclosing: a cancel or timeout closes the module's generator now, not at GC.
        async with contextlib.aclosing(stream) as chunks:
            flagged = with_last_flag(chunks)
            async with contextlib.aclosing(flagged):
                async for chunk, last in flagged:
                    parts = output_to_parts(chunk) or [Part(text="")]
                    event = chunk_event(
                        task_id, context_id, artifact_id, parts, append=sent > 0, last=last
                    )
                    await run.emit(event_queue, event)
                    sent += 1
                    deep_merge(merged, chunk)
        return (merged if sent else None), sent > 0

    async def _reply_with_message(
        self,
        context: RequestContext,
        spec: SkillSpec,
        inputs: dict[str, Any],
        event_queue: EventQueue,
    ) -> None:
        """Skills that opted into stateless replies answer with one ``Message``."""
        try:
            value, _ = await self._invoke(Run(), context, spec, inputs, None)
        except TimeoutError:
            mapped = map_error(_Timeout(), module_id=spec.module_id)
            self._log(spec, mapped, None)
            raise _as_a2a(mapped) from None
        except Exception as exc:
            mapped = map_error(exc, module_id=spec.module_id)
            self._log(spec, mapped, exc)
            raise _as_a2a(mapped) from None
        reply = Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_AGENT,
            context_id=context.context_id or "",
            parts=output_to_parts(value, wrapped_result=spec.wrapped_result),
        )
        reply.metadata.update({SKILL_METADATA_KEY: spec.module_id})
        await event_queue.enqueue_event(reply)

    # -- follow-ups and approval (input-required) ------------------------------------
    async def _resume(
        self, run: Run, stored: Task, message: Message, spec: SkillSpec, event_queue: EventQueue
    ) -> tuple[dict[str, Any], TaskStatusUpdateEvent] | None:
        """Inputs and ``working`` event for a follow-up, or ``None`` if it ended here."""
        reply = approvals.answer(stored, message, self._executor)
        if reply is None:
            # Not an approval answer: the follow-up's own input re-runs the skill.
            working = status_event(stored.id, stored.context_id, TaskState.TASK_STATE_WORKING)
            return _without_token(input_from_parts(message.parts, spec.input_facts)), working
        if reply.resume_token is None:
            await run.emit(event_queue, reply.event)
            return None
        # Re-run on the input that asked for approval, never on the approving message.
        pending = approvals.pending_approval(stored)
        original = approvals.asking_message(stored, pending) if pending is not None else None
        if original is None:
            await run.emit(event_queue, approvals.lost_input_event(stored))
            return None
        inputs = _without_token(input_from_parts(original.parts, spec.input_facts))
        inputs[_RESUME_KEY] = reply.resume_token
        return inputs, reply.event

    # -- failures --------------------------------------------------------------------
    async def _handle_failure(
        self,
        run: Run,
        context: RequestContext,
        spec: SkillSpec,
        event_queue: EventQueue,
        exc: BaseException,
    ) -> None:
        if getattr(exc, "code", None) == "APPROVAL_PENDING":
            message_id = context.message.message_id if context.message is not None else ""
            pending = approvals.from_error(exc, spec.module_id, message_id)
            await run.emit(
                event_queue,
                approvals.input_required_event(
                    context.task_id or "", context.context_id or "", pending
                ),
            )
            return
        mapped = map_error(exc, module_id=spec.module_id)
        self._log(spec, mapped, exc)
        await self._finish_error(run, context, event_queue, mapped)

    async def _finish_error(
        self,
        run: Run,
        context: RequestContext,
        event_queue: EventQueue,
        mapped: MappedError,
    ) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        state = {
            "rejected": TaskState.TASK_STATE_REJECTED,
            "canceled": TaskState.TASK_STATE_CANCELED,
        }.get(mapped.outcome, TaskState.TASK_STATE_FAILED)
        message = agent_message(task_id, context_id, mapped.message, mapped.status_data())
        await run.emit(event_queue, status_event(task_id, context_id, state, message))
        if mapped.outcome == "raise" and mapped.a2a_error is not None:
            raise mapped.a2a_error

    @staticmethod
    def _log(spec: SkillSpec, mapped: MappedError, exc: BaseException | None) -> None:
        level = getattr(logging, mapped.log_level.upper(), logging.ERROR)
        detail = clean_for_log(exc) if exc is not None else mapped.message
        logger.log(
            level,
            "Skill %s failed: %s (%s)",
            spec.module_id,
            mapped.code,
            detail,
            exc_info=exc if level >= logging.ERROR and exc is not None else None,
        )


class _Timeout(Exception):
    """Stand-in for an apcore MODULE_TIMEOUT raised by our own deadline."""

    code = "MODULE_TIMEOUT"
    details: dict[str, Any] = {}
    message = TIMEOUT_MESSAGE


def _as_a2a(mapped: MappedError) -> Exception:
    if mapped.a2a_error is not None:
        return mapped.a2a_error
    from a2a.utils.errors import InternalError

    # The apcore code marks the message as ours (already sanitized), so the error
    # scrubbing keeps it instead of answering a bare "Internal error".
    return InternalError(message=mapped.message, data={"apcoreCode": mapped.code})


def _without_token(inputs: dict[str, Any] | None) -> dict[str, Any]:
    """Client input minus ``_approval_token``: a client-chosen token would skip approval."""
    return {k: v for k, v in (inputs or {}).items() if k != _RESUME_KEY}

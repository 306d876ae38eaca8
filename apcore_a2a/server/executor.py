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
import logging
import time
import uuid
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
from apcore import CancelToken, Context, TraceContext
from google.protobuf.json_format import MessageToDict

from apcore_a2a.adapters.errors import MappedError, clean_for_log, map_error
from apcore_a2a.adapters.parts import input_from_parts, output_to_parts
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.server import approvals
from apcore_a2a.server.call_context import identity_of
from apcore_a2a.server.routing import SKILL_METADATA_KEY, ApCoreRequestContext

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

__all__ = ["ApCoreAgentExecutor"]

logger = logging.getLogger("apcore_a2a.executor")

_ARTIFACT_NAME = "result"
CANCEL_MESSAGE = "Canceled by client"
TIMEOUT_MESSAGE = "Execution timed out"


def _agent_message(task_id: str, context_id: str, text: str, data: dict[str, Any]) -> Message:
    parts = [Part(text=text)]
    if data:
        part = Part()
        part.data.struct_value.update(data)
        parts.append(part)
    return Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=parts,
    )


def _status(
    task_id: str,
    context_id: str,
    state: TaskState,
    message: Message | None = None,
    metadata: dict[str, Any] | None = None,
) -> TaskStatusUpdateEvent:
    status = TaskStatus(state=state)
    status.timestamp.GetCurrentTime()
    if message is not None:
        status.message.CopyFrom(message)
    event = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
    if metadata:
        event.metadata.update(metadata)
    return event


class ApCoreAgentExecutor(AgentExecutor):
    """Run apcore modules for the a2a-sdk request handler.

    *executor* is an ``apcore.Executor``; *settings* supplies ``execution_timeout``.
    """

    def __init__(self, executor: Any, settings: Settings) -> None:
        self._executor = executor
        self._timeout = settings.execution_timeout
        self._tokens: dict[str, CancelToken] = {}

    # -- AgentExecutor ---------------------------------------------------------------
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        spec = getattr(context, "skill", None)
        message = context.message
        if spec is None or message is None:  # pragma: no cover - builder always sets it
            raise InvalidParamsError(message="Message could not be routed to a skill")
        assert isinstance(context, ApCoreRequestContext)
        stored = context.current_task or context.stored_task
        inputs = context.module_input

        if stored is None and spec.reply == "message":
            await self._reply_with_message(context, spec, event_queue)
            return

        if stored is None:
            task = Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
            task.status.timestamp.GetCurrentTime()
            task.metadata.update({SKILL_METADATA_KEY: spec.module_id})
            await event_queue.enqueue_event(task)
        else:
            inputs = await self._resume_inputs(stored, message, spec, event_queue)
            if inputs is None:
                return

        await event_queue.enqueue_event(_status(task_id, context_id, TaskState.TASK_STATE_WORKING))
        await self._run(context, spec, inputs or {}, event_queue)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        token = self._tokens.pop(task_id, None)
        if token is not None:
            token.cancel()
        # The SDK cancels our execute() right after this returns; the canceled status is
        # written here so it carries a reason and any open stream receives it.
        await event_queue.enqueue_event(
            _status(
                task_id,
                context.context_id or "",
                TaskState.TASK_STATE_CANCELED,
                _agent_message(task_id, context.context_id or "", CANCEL_MESSAGE, {}),
            )
        )

    # -- running ---------------------------------------------------------------------
    def _apcore_context(self, context: RequestContext, spec: SkillSpec, token: CancelToken) -> Any:
        call_context = context.call_context
        headers = call_context.state.get("headers") if call_context is not None else None
        trace_parent = None
        if headers and "traceparent" in headers:
            try:
                trace_parent = TraceContext.extract(headers)
            except Exception:
                logger.debug("Ignoring malformed traceparent %s", clean_for_log(headers))
        message = context.message
        data: dict[str, Any] = {
            "a2a.task_id": context.task_id,
            "a2a.context_id": context.context_id,
            "a2a.message_id": message.message_id if message is not None else None,
            "a2a.skill_id": spec.module_id,
        }
        if message is not None and message.HasField("metadata"):
            data["a2a.message_metadata"] = MessageToDict(message.metadata)
        if context.metadata:
            data["a2a.request_metadata"] = context.metadata
        return Context.create(
            identity=identity_of(call_context),
            trace_parent=trace_parent,
            cancel_token=token,
            data=data,
            global_deadline=time.time() + self._timeout,
        )

    async def _run(
        self,
        context: RequestContext,
        spec: SkillSpec,
        inputs: dict[str, Any],
        event_queue: EventQueue,
    ) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        token = CancelToken()
        self._tokens[task_id] = token
        apcore_context = self._apcore_context(context, spec, token)
        try:
            async with asyncio.timeout(self._timeout):
                if spec.streaming:
                    result = await self._stream(spec, inputs, apcore_context, context, event_queue)
                    artifact_id = None if result is None else result[1]
                    value = None if result is None else result[0]
                else:
                    value = await self._executor.call_async(spec.module_id, inputs, apcore_context)
                    artifact_id = None
        except TimeoutError:
            token.cancel()
            await self._finish_error(
                context, spec, event_queue, map_error(_Timeout(), module_id=spec.module_id)
            )
            return
        except asyncio.CancelledError:
            token.cancel()
            raise
        except Exception as exc:
            await self._handle_failure(context, spec, event_queue, exc)
            return
        finally:
            self._tokens.pop(task_id, None)

        if artifact_id is None:
            parts = output_to_parts(value, wrapped_result=spec.wrapped_result)
            if parts:
                await event_queue.enqueue_event(
                    TaskArtifactUpdateEvent(
                        task_id=task_id,
                        context_id=context_id,
                        artifact=Artifact(
                            artifact_id=uuid.uuid4().hex, name=_ARTIFACT_NAME, parts=parts
                        ),
                        last_chunk=True,
                    )
                )
            completed = _status(task_id, context_id, TaskState.TASK_STATE_COMPLETED)
        else:
            final = output_to_parts(value, wrapped_result=spec.wrapped_result)
            message = Message(
                message_id=uuid.uuid4().hex,
                role=Role.ROLE_AGENT,
                task_id=task_id,
                context_id=context_id,
                parts=final,
            )
            completed = _status(task_id, context_id, TaskState.TASK_STATE_COMPLETED, message)
        await event_queue.enqueue_event(completed)

    async def _stream(
        self,
        spec: SkillSpec,
        inputs: dict[str, Any],
        apcore_context: Any,
        context: RequestContext,
        event_queue: EventQueue,
    ) -> tuple[Any, str] | None:
        """Run a streaming module; each chunk becomes an artifact update on one id.

        Returns the merged result and the artifact id, or ``None`` when no chunk came.
        """
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        artifact_id = uuid.uuid4().hex
        merged: dict[str, Any] = {}
        pending: dict[str, Any] | None = None
        sent = 0
        async for chunk in self._executor.stream(spec.module_id, inputs, apcore_context):
            if pending is not None:
                await self._emit_chunk(
                    task_id, context_id, artifact_id, pending, sent, False, event_queue
                )
                sent += 1
            pending = chunk
            _deep_merge(merged, chunk)
        if pending is None:
            return None
        await self._emit_chunk(task_id, context_id, artifact_id, pending, sent, True, event_queue)
        return merged, artifact_id

    @staticmethod
    async def _emit_chunk(
        task_id: str,
        context_id: str,
        artifact_id: str,
        chunk: Any,
        index: int,
        last: bool,
        event_queue: EventQueue,
    ) -> None:
        await event_queue.enqueue_event(
            TaskArtifactUpdateEvent(
                task_id=task_id,
                context_id=context_id,
                artifact=Artifact(
                    artifact_id=artifact_id,
                    name=_ARTIFACT_NAME,
                    parts=output_to_parts(chunk) or [Part(text="")],
                ),
                append=index > 0,
                last_chunk=last,
            )
        )

    async def _reply_with_message(
        self, context: RequestContext, spec: SkillSpec, event_queue: EventQueue
    ) -> None:
        """Skills that opted into stateless replies answer with one ``Message``."""
        assert isinstance(context, ApCoreRequestContext)
        token = CancelToken()
        apcore_context = self._apcore_context(context, spec, token)
        try:
            async with asyncio.timeout(self._timeout):
                value = await self._executor.call_async(
                    spec.module_id, context.module_input or {}, apcore_context
                )
        except TimeoutError:
            token.cancel()
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

    # -- approval (input-required) ---------------------------------------------------
    async def _resume_inputs(
        self, stored: Task, message: Message, spec: SkillSpec, event_queue: EventQueue
    ) -> dict[str, Any] | None:
        """Inputs for a follow-up message, or ``None`` if the task was finished here."""
        task_id, context_id = stored.id, stored.context_id
        pending = approvals.pending_approval(stored)
        if pending is None or stored.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            # A follow-up with fresh input re-runs the skill on it.
            return input_from_parts(message.parts, spec.input_facts)
        decision = approvals.read_decision(message)
        if decision is None:
            await event_queue.enqueue_event(
                approvals.input_required_event(task_id, context_id, pending, again=True)
            )
            return None
        approvals.record_decision(self._executor, pending.approval_id, decision)
        if not decision.approved:
            reason = decision.reason or "Rejected by user"
            await event_queue.enqueue_event(
                _status(
                    task_id,
                    context_id,
                    TaskState.TASK_STATE_REJECTED,
                    _agent_message(
                        task_id,
                        context_id,
                        f"Approval rejected: {reason}",
                        {"code": "APPROVAL_DENIED", "message": reason, "type": "ApprovalRejected"},
                    ),
                )
            )
            return None
        original = stored.history[0] if stored.history else message
        inputs = input_from_parts(original.parts, spec.input_facts)
        inputs["_approval_token"] = pending.approval_id
        return inputs

    # -- failures --------------------------------------------------------------------
    async def _handle_failure(
        self,
        context: RequestContext,
        spec: SkillSpec,
        event_queue: EventQueue,
        exc: BaseException,
    ) -> None:
        if getattr(exc, "code", None) == "APPROVAL_PENDING":
            pending = approvals.from_error(exc, spec.module_id)
            await event_queue.enqueue_event(
                approvals.input_required_event(
                    context.task_id or "", context.context_id or "", pending
                )
            )
            return
        mapped = map_error(exc, module_id=spec.module_id)
        self._log(spec, mapped, exc)
        await self._finish_error(context, spec, event_queue, mapped)

    async def _finish_error(
        self,
        context: RequestContext,
        spec: SkillSpec,
        event_queue: EventQueue,
        mapped: MappedError,
    ) -> None:
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        state = {
            "rejected": TaskState.TASK_STATE_REJECTED,
            "canceled": TaskState.TASK_STATE_CANCELED,
        }.get(mapped.outcome, TaskState.TASK_STATE_FAILED)
        message = _agent_message(task_id, context_id, mapped.message, mapped.status_data())
        await event_queue.enqueue_event(_status(task_id, context_id, state, message))
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

    return InternalError(message=mapped.message)


def _deep_merge(target: dict[str, Any], chunk: Any) -> None:
    if not isinstance(chunk, dict):
        return
    for key, value in chunk.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_merge(target[key], value)
        else:
            target[key] = value

"""``ApCoreAgentExecutor``: the SDK ``AgentExecutor`` that runs apcore modules.

One ``execute()`` per message: enqueue the submitted ``Task`` (history: the user message;
metadata: the skill id), then ``working``, then run the module through apcore's ``Executor``
(``call_async()``, or ``stream()`` for a module with one: ACL, approval, validation,
middleware and timeouts always apply); finish with artifact + ``completed``,
``input-required`` (approval pending, or the module asked: ``execution/turns.py``),
``rejected``, ``canceled`` or ``failed`` with a sanitized status message. Skills that
answer with messages (``reply: "message"`` or ``"auto"``) run the module first and record
a task only when the call needs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from a2a.helpers.proto_helpers import new_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Message, Part, TaskState
from a2a.utils.errors import A2AError, InternalError
from apcore import ACLDeniedError
from apcore.cancel import ExecutionCancelledError

from apcore_a2a.adapters.errors import (
    ExecutionTimeout,
    MappedError,
    as_a2a_error,
    map_error,
    nested_input,
    one_line,
    own_denial,
)
from apcore_a2a.adapters.outputs import TASK_HOOK_KEY, input_required_of, reply_of, text_from_value
from apcore_a2a.adapters.parts import OutputTooDeep, is_file, output_to_parts, too_deep
from apcore_a2a.adapters.skills import SkillSpec
from apcore_a2a.edge.call import call_of
from apcore_a2a.execution import runs, turns
from apcore_a2a.execution.fair_pool import FairPool
from apcore_a2a.execution.identity import identity_of, run_denial, sight
from apcore_a2a.execution.observer import ExecutionObserver, observe
from apcore_a2a.execution.routing import SKILL_METADATA_KEY, ApCoreRequestContext
from apcore_a2a.execution.runs import CURRENT_RUN, NoThread, Run, refusal_of, track_module_tasks
from apcore_a2a.upstream.apcore_output_errors import output_invalid, raise_module_fault
from apcore_a2a.upstream.apcore_system_views import call_seen
from apcore_a2a.upstream.sdk_first_event import let_first_event_out

if TYPE_CHECKING:
    from apcore_a2a.settings import Settings

logger = logging.getLogger("apcore_a2a.executor")

CANCEL_MESSAGE = "Canceled by client"
_END_STATES = {"rejected": TaskState.TASK_STATE_REJECTED, "canceled": TaskState.TASK_STATE_CANCELED}
#: apcore errors of an input that did not validate
_BAD_INPUT = ("SCHEMA_VALIDATION_ERROR", "GENERAL_INVALID_INPUT")


class ApCoreAgentExecutor(AgentExecutor):
    """Run apcore modules for the a2a-sdk request handler.

    *executor* is an ``apcore.Executor``; *settings* supplies ``execution_timeout``,
    ``sync_workers`` (the threads modules with a plain ``def execute`` run on, started as
    needed and stopped by :meth:`close`; callers waiting for one are served in turn) and
    ``sync_workers_per_caller``; *observers* are told when each execution starts and how
    it ended (metrics, spans).
    """

    def __init__(
        self, executor: Any, settings: Settings, observers: Sequence[ExecutionObserver] = ()
    ) -> None:
        self._executor = executor
        track_module_tasks(executor)
        self._timeout = settings.execution_timeout
        self._workers = settings.sync_workers
        self._share = settings.sync_workers_per_caller
        self._pool: FairPool | None = None
        self._runs: dict[str, Run] = {}
        self._observers = tuple(observers)
        #: the module calls not returned yet, including those a cancel could not stop
        self.module_calls = runs.ModuleCalls()
        #: cluster mode: a continued task's module waits for its ``working`` save; the
        #: server adds :meth:`StoredWorking.saved` to the store's save listeners
        self.stored_working = turns.StoredWorking() if settings.cluster else None

    def close(self) -> None:
        """Stop the sync modules' threads once their calls return (a new run starts new ones)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        call = call_of(context.call_context)
        if (
            not isinstance(context, ApCoreRequestContext)
            or context.skill is None
            or context.message is None
            or call is None
        ):
            # Only ApCoreRequestContextBuilder routes a message, and it records the call
            # (whose caller key the sync threads are shared by): any other context is the
            # application's wiring error, not the client's, and no key is made up for it.
            raise InternalError(
                message="ApCoreAgentExecutor needs the request context of "
                "apcore-a2a's request handler (ApCoreRequestContextBuilder)"
            )
        if call.turn == "dropped":
            return  # its request ended before this: it gave the task's wait back
        if call.turn == "claimed":
            call.turn = "run"  # from here on the request's end leaves the wait claimed
        spec, message = context.skill, context.message
        watched = (
            observe(self._observers, context, spec.module_id)
            if self._observers
            else contextlib.nullcontext()
        )
        if self._pool is None:
            self._pool = FairPool(self._workers, self._share)
        with watched as execution:
            task_id, context_id = context.task_id or "", context.context_id or ""
            run = Run(
                event_queue,
                task_id,
                context_id,
                # The key quotas count by: a caller's sync modules wait in its own line.
                pool=self._pool.lane(call.caller),
                execution=execution,
                calls=self.module_calls,
            )
            await self._execute(context, spec, message, run)

    async def _execute(
        self, context: ApCoreRequestContext, spec: SkillSpec, message: Message, run: Run
    ) -> None:
        task_id = run.task_id
        stored = context.current_task or context.stored_task
        inputs = turns.without_token(context.module_input)
        self._runs[task_id] = run
        try:
            # Asked as apcore's ACL gate will ask, before any event (see ``_refuse``).
            ours = functools.partial(run.apcore_context, context, spec.module_id, self._timeout)
            if why := await run_denial(self._executor, spec.module_id, ours):
                await self._refuse(run, context, spec, ACLDeniedError(None, spec.module_id), why)
                return
            if stored is None and spec.reply != "task":
                await self._answer_first(run, context, spec, message, inputs)
                return
            if stored is None:
                await turns.submit(run, message, spec)
                call = call_of(context.call_context)
                if call is None or not call.blocking:
                    await let_first_event_out()
                await run.status(TaskState.TASK_STATE_WORKING)
            else:
                waits = self.stored_working
                with waits.expected(run) if waits else contextlib.nullcontext() as working:
                    resumed = await turns.resume(self._executor, run, stored, context, spec)
                    if resumed is not None and working is not None:
                        # Cluster mode (turns.StoredWorking); bounded like the module's run.
                        async with asyncio.timeout(self._timeout):
                            if not await working:  # its claim taken over meanwhile
                                resumed = None
                                turns.taken_over(context)
                if resumed is None:
                    return
                inputs = resumed
            try:
                value, streamed = await self._invoke(run, context, spec, inputs)
                parts = (
                    value
                    if streamed
                    else output_to_parts(value, wrapped_result=spec.wrapped_result)
                )
            except Exception as exc:  # an output too deep for the wire fails here too
                await self._handle_failure(run, message, spec, exc, inputs, context)
                return
            await self._complete(run, parts, streamed)
        finally:
            if self._runs.get(task_id) is run:
                del self._runs[task_id]

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        run = self._runs.get(task_id)
        if run is not None and run.ended:
            return  # the result is already on its way; CANCELED must not overwrite it
        self.abandon(task_id)
        # The SDK cancels our execute() right after this returns (a sync module keeps its
        # thread; its late result is dropped by Run.emit). The canceled status is written
        # here so it carries a reason and every open stream receives it.
        call = call_of(context.call_context)
        reason = (call.cancel_reason if call is not None else None) or CANCEL_MESSAGE
        canceling = Run(event_queue, task_id, context_id)
        await canceling.status(TaskState.TASK_STATE_CANCELED, canceling.message(reason, {}))

    def abandon(self, task_id: str) -> bool:
        """Stop the run of *task_id* whose caller left before anything was answered or
        stored (a message-reply skill's module): the module is canceled as on a cancel, and
        nothing is recorded for it, as for a message reply. Whether such a run was here."""
        run = self._runs.get(task_id)
        if run is None or run.ended:
            return False
        run.canceled = True
        run.stop()
        return True

    def running_task_ids(self) -> list[str]:
        """Ids of the tasks whose module is executing in this process."""
        return list(self._runs)

    def stop_unsavable(self, task_id: str) -> None:
        """Stop the run of *task_id*, whose next events are never stored: another replica
        ended the task in the store, or a2a-sdk's run of it ended at a save failed here."""
        run = self._runs.get(task_id)
        if run is not None and not run.ended:
            run.stop()

    async def _complete(self, run: Run, parts: list[Part] | None, streamed: bool) -> None:
        """The result as an artifact (or, streamed, as the status message) + completed."""
        message: Message | None = None
        if streamed and parts:
            # The chunks already built the artifact; the status carries the merged data.
            message = new_message(parts, run.context_id, run.task_id)
        elif parts:
            await run.artifact(uuid.uuid4().hex, parts)
        await run.status(TaskState.TASK_STATE_COMPLETED, message)

    async def _invoke(
        self,
        run: Run,
        context: RequestContext,
        spec: SkillSpec,
        inputs: dict[str, Any],
        on_task: Callable[[], object] | None = None,
    ) -> tuple[Any, bool]:
        """Run the module under ``execution_timeout`` (a streaming one chunk by chunk, unless
        its reply may be a message); returns (result, streamed). *on_task* (a message-reply
        skill's) is called, from any thread, when the module chooses a task."""
        apcore_context = run.apcore_context(context, spec.module_id, self._timeout)
        if on_task is not None:
            apcore_context.data[TASK_HOOK_KEY] = on_task
        if run.answering is not None:
            apcore_context.data["a2a.follow_up"] = run.answering.as_context_data()
        marker = CURRENT_RUN.set(run)
        try:
            async with asyncio.timeout(self._timeout):
                if spec.streaming and on_task is None:
                    return await self._stream(run, spec, inputs, apcore_context)
                published = getattr(context, "published", ())
                seen = sight(self._executor, identity_of(context.call_context), published)
                call = self._executor.call_async
                return await call_seen(call, spec.module_id, inputs, apcore_context, seen), False
        except (TimeoutError, asyncio.CancelledError) as exc:
            if isinstance(exc, TimeoutError) and run.never_got_a_thread():
                raise NoThread(self._timeout) from None
            run.stop()
            current = asyncio.current_task()
            if isinstance(exc, asyncio.CancelledError) and current and not current.cancelling():
                # Only the module's own task was cancelled (Run.stop, for a cancel seen in the
                # store): the run ends as canceled, and its write meets the stored cancel.
                raise ExecutionCancelledError() from None
            raise
        except Exception as exc:
            if getattr(exc, "code", None) == "MODULE_TIMEOUT" and run.never_got_a_thread():
                raise NoThread(self._timeout) from None  # apcore's own per-module timeout
            # apcore's own per-module timeout leaves the module's task running (it only
            # consumes a late result): the module ends with its call, as on our timeout.
            run.stop()
            raise_module_fault(exc, spec.module_id)  # a chunk that is no object
            raise
        finally:
            CURRENT_RUN.reset(marker)

    async def _stream(
        self, run: Run, spec: SkillSpec, inputs: dict[str, Any], apcore_context: Any
    ) -> tuple[list[Part] | None, bool]:
        """Each chunk becomes an update of one artifact; returns the parts of the
        ``completed`` status message and whether any chunk came. That message carries the
        data chunks deep-merged into one data part; text and files are not repeated (the
        artifact holds every chunk, and a long output is stored and sent once)."""
        artifact_id = uuid.uuid4().hex
        count, merged = 0, dict[str, Any]()
        stream = self._executor.stream(spec.module_id, inputs, apcore_context)
        # aclosing: a cancel or timeout closes the module's generator now, not at GC.
        async with contextlib.aclosing(stream) as chunks:
            flagged = runs.with_last_flag(chunks)
            async with contextlib.aclosing(flagged):
                async for chunk, last in flagged:
                    parts = output_to_parts(chunk) or [Part(text="")]
                    await run.artifact(artifact_id, parts, append=count > 0, last=last)
                    count += 1
                    data = isinstance(chunk, dict) and not is_file(chunk)
                    if data and text_from_value(chunk) is None:
                        runs.deep_merge(merged, {k: v for k, v in chunk.items() if not is_file(v)})
        return (output_to_parts(merged) if merged else []) if count else None, count > 0

    async def _answer_first(
        self,
        run: Run,
        context: ApCoreRequestContext,
        spec: SkillSpec,
        message: Message,
        inputs: dict[str, Any],
    ) -> None:
        """Skills that answer with messages: run the module, then answer with a ``Message``
        unless the module chose a task (``reply_as``: it opens then, so the rest of the run can
        be canceled), the skill is ``"auto"`` and it chose nothing, or the caller must answer."""
        loop = asyncio.get_running_loop()
        chosen = asyncio.Event()

        async def open_task() -> None:
            await chosen.wait()
            await turns.submit(run, message, spec)
            await run.status(TaskState.TASK_STATE_WORKING)

        # Not started by the module, so stopping the module does not stop these events.
        opening = loop.create_task(open_task())
        error: Exception | None = None
        parts: list[Part] = []
        try:
            try:
                hook = functools.partial(loop.call_soon_threadsafe, chosen.set)
                value, _ = await self._invoke(run, context, spec, inputs, on_task=hook)
                parts = output_to_parts(value, wrapped_result=spec.wrapped_result)
            except Exception as exc:
                error = exc
            if run.canceled:
                return  # abandoned: its caller left before the answer (emits nothing now)
            kind = reply_of(run.data) or ("task" if spec.reply == "auto" else "message")
            if error is not None and (
                input_required_of(error) is not None
                or getattr(error, "code", None) == "APPROVAL_PENDING"
            ):
                kind = "task"  # the caller must answer on a task
            if kind == "message" and error is not None:
                await self._refuse(run, context, spec, error)
                return
            if kind == "message":
                reply = new_message(parts, run.context_id)
                reply.metadata.update({SKILL_METADATA_KEY: spec.module_id})
                await run.emit(reply)
                return
            chosen.set()  # if the module did not choose the task already
            await opening
            if error is not None:
                await self._handle_failure(run, message, spec, error, inputs, context)
            else:
                await self._complete(run, parts, False)
        finally:
            opening.cancel()

    async def _refuse(
        self,
        run: Run,
        context: ApCoreRequestContext,
        spec: SkillSpec,
        error: BaseException,
        why: str | None = None,
        *,
        task: bool = False,
    ) -> bool:
        """Answer *error* as the call's refusal (``CallRecord.refused``, raised by the request
        handler for the run's last event); whether it is one: a message reply's failure, a
        sync call that never got a thread, the ACL's refusal of the skill itself in the
        run's context (read by the ACL, or changed since the request context builder's check;
        for *why*: answered as that check is). With no *task* the run ends with a message
        that never leaves, or none, so no task is made or changed (raised, the SDK would
        fail it, logged twice at ERROR); a task ends ``rejected``, a blocking send answers."""
        answer: A2AError | None = (refused := refusal_of(error))
        code = refused.wire.reason if refused is not None else "ACL_DENIED"
        if answer is None and context.acl_refusal and own_denial(error, spec.module_id):
            answer = context.acl_refusal(why or one_line(error))
        if answer is None and task:
            return False
        if answer is None:
            mapped = self._mapped(spec, error)
            answer, code = as_a2a_error(mapped), mapped.code
        call = call_of(context.call_context)
        if call is not None and (call.blocking or not task):
            call.refused = answer  # before the event that ends the run
        if task:
            data = {"code": code, "message": answer.message, "type": "Refused"}
            await run.status(TaskState.TASK_STATE_REJECTED, run.message(answer.message, data))
            return True
        if (context.current_task or context.stored_task) is None:
            await run.emit(new_message([Part(text=answer.message)], run.context_id))
        elif call is not None and call.give_back is not None:  # a follow-up's task: unchanged
            await call.give_back()  # its wait given back here: its client may be gone
        if run.execution is not None:
            run.execution.refused(code)
        return True

    async def _handle_failure(
        self,
        run: Run,
        message: Message,
        spec: SkillSpec,
        exc: BaseException,
        inputs: dict[str, Any],
        context: ApCoreRequestContext,
    ) -> None:
        asked = input_required_of(exc)
        if asked is not None and too_deep({"data": asked.data}):
            asked, exc = None, OutputTooDeep()  # its question's data part could not be read
        code = "MODULE_TIMEOUT" if isinstance(exc, TimeoutError) else getattr(exc, "code", None)
        if await self._refuse(run, context, spec, exc, task=True):
            return
        if asked is not None:
            await turns.ask(run, asked, message.message_id, inputs)
        elif (
            run.answering is not None
            and code in _BAD_INPUT
            and not (output_invalid(exc) or nested_input(exc, spec.module_id))
        ):
            # The answer made the input invalid: ask again, saying why.
            await turns.reask(run, run.answering, map_error(exc, module_id=spec.module_id).message)
        elif code == "APPROVAL_PENDING":
            await turns.ask_approval(run, exc, spec.module_id, run.input_of or message.message_id)
        else:
            mapped = self._mapped(spec, exc)
            state = _END_STATES.get(mapped.outcome, TaskState.TASK_STATE_FAILED)
            await run.status(state, run.message(mapped.message, mapped.status_data()))

    @staticmethod
    def _mapped(spec: SkillSpec, exc: BaseException) -> MappedError:
        """*exc* mapped for the client (a timeout of ours as apcore's), and logged."""
        timeout = isinstance(exc, TimeoutError)
        mapped = map_error(
            ExecutionTimeout() if timeout else exc,
            module_id=spec.module_id,
            bad_output=output_invalid(exc),
        )
        level = getattr(logging, mapped.log_level.upper(), logging.ERROR)
        logger.log(
            level,
            "Skill %s failed: %s (%s)",
            spec.module_id,
            mapped.code,
            mapped.message if timeout else one_line(exc),
            exc_info=exc if level >= logging.ERROR and not timeout else None,
        )
        return mapped

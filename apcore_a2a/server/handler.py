"""The SDK request handler with the rules apcore-a2a adds to it.

* **One execution per task.** a2a-sdk queues a message for a running task behind the
  execution and then runs it too. Here a message may continue a task only while it waits
  for input, one message per wait; the others get
  :class:`~apcore_a2a.errors.TaskBusyError` at once (``storage/turns.py``). A message
  refused after it claimed the wait gives it back, and so does one whose request ended
  before the executor took it (it never runs). A message for a finished task gets
  the SDK's terminal-state answer here, before a replica's parked run sees it.
* **A context belongs to the owner of its tasks**: a new task naming a ``contextId``
  that holds another owner's task is refused as invalid params (``storage/contexts.py``).
* **Unfinished tasks per caller** are capped (``server/task_quota.py``).
* The not-cancelable error names the task's state; a message asking for push
  notifications of an agent without them is refused.
* **Fewer writes for blocking calls**: a blocking ``SendMessage``'s intermediate states
  wait in memory (``storage/deferred.py``); a new task's made-up id is known to have
  nothing stored yet (the call record's ``new_task``, noted by the request context builder).
* **Resumable streams**: subscriptions are served from the event log, and every stream's
  events carry their position in it (``streams/resume.py``).
* **Bounded per reader**: a stream of the SDK's running task keeps at most
  ``max_stream_backlog_bytes`` of events for a slow reader (``streams/backlog.py``).
* **One tap on the answer**: every method notes what it answers, or raises, on the call's
  answer (``streams/tap.py``), for the answer side, telemetry and cancel-on-drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES as _WAITING
from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _FINISHED
from a2a.server.cluster import VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.request_handler import validate_request_params
from a2a.server.tasks import TaskStore
from a2a.types import (
    CancelTaskRequest,
    GetTaskPushNotificationConfigRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from apcore_a2a.edge.call import CallRecord, CancelWrite, call_of, record_of
from apcore_a2a.errors import PushConfigUnreadableError, TaskBusyError
from apcore_a2a.execution.observer import state_name
from apcore_a2a.execution.routing import TaskLookup, check_follow_up
from apcore_a2a.push.sender import RetryingPushSender
from apcore_a2a.server.task_quota import TaskQuota
from apcore_a2a.settings import Settings
from apcore_a2a.storage.event_log import MemoryEventLog, RecordingTaskStore
from apcore_a2a.storage.fields import held_ids, unheld
from apcore_a2a.storage.outages import ConfigRows
from apcore_a2a.storage.stores import Stores
from apcore_a2a.storage.turns import giver
from apcore_a2a.streams.backlog import bounded
from apcore_a2a.streams.resume import EventLog, PositionTap, StreamPositions, subscribe_from_log
from apcore_a2a.streams.tap import answer_of, answering, answering_stream
from apcore_a2a.upstream.failed_saves import report_failed_saves
from apcore_a2a.upstream.forced_closes import quiet_forced_closes
from apcore_a2a.upstream.late_run_events import drop_late_run_events
from apcore_a2a.upstream.push_capability import refuse_push_config
from apcore_a2a.upstream.required_fields import SEND, SEND_STREAM, check, checked
from apcore_a2a.upstream.serial_cancels import CancelTurns, refuse_lost_cancels
from apcore_a2a.upstream.unstarted_runs import close_unstarted_runs
from apcore_a2a.upstream.untaken_follow_ups import FINISHED_RUN, finished_refusal, refuse_untaken

logger = logging.getLogger("apcore_a2a.server")

_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})


class ApCoreRequestHandler(DefaultRequestHandler):
    """``DefaultRequestHandler`` with the rules of the module docstring."""

    def __init__(
        self,
        *,
        stores: Stores,
        quota: TaskQuota,
        settings: Settings,
        push_url_check: Callable[[str, CallRecord], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> None:
        task_store: TaskStore | VersionedTaskStore = stores.task_store
        event_stream, event_log = stores.event_stream, stores.event_log
        self._event_log = event_log if isinstance(event_log, EventLog) else None
        if isinstance(event_log, MemoryEventLog) and not isinstance(task_store, VersionedTaskStore):
            # The SDK would wrap the store in LegacyTaskStoreAdapter, which drops each
            # save's event; ours records it (storage/event_log.py).
            task_store = RecordingTaskStore(task_store, event_log)
        self._tap: PositionTap | None = None
        if self._event_log is not None:
            # Running tasks publish each saved event with its version; the tap notes them
            # for the message streams that send them (streams/resume.py).
            self._tap = event_stream = PositionTap(event_stream)
        super().__init__(task_store=task_store, event_stream=event_stream, **kwargs)
        drop_late_run_events(self)  # a cancel stored elsewhere wins over the run's queue
        close_unstarted_runs(self)  # a run refused at its start leaves no queue running
        report_failed_saves(self)  # a run whose save failed: one line, nothing unretrieved
        refuse_lost_cancels(self)  # a cancel that meets the run's result
        quiet_forced_closes(self)  # runs still running at the close: no WARNING each
        self._capabilities = kwargs["agent_card"].capabilities
        self._task_lookup: TaskLookup = stores.get_task
        self._turns = stores.turns
        self._quota = quota
        self._contexts = stores.contexts
        #: refuses values the store cannot hold, before any task exists (storage/fields.py)
        self._check_values = stores.fields.check
        self._backlog = settings.max_stream_backlog_bytes
        self._history = (settings.max_task_history_messages, settings.max_task_history_bytes)
        #: the SSRF policy's ``validate_call(url, call)``: here, not the SDK's validator, which
        #: gets the URL alone and so could not count a lookup against its caller
        self._push_url_check = push_url_check
        self._stored_configs = stores.push_config_store  # a SQL one's rows: ConfigRows
        self._cancel_turns = CancelTurns()  # upstream/serial_cancels.py
        sender = kwargs.get("push_sender")
        self._push = sender if isinstance(sender, RetryingPushSender) else None
        on_save = getattr(task_store, "on_save", None)  # the store view (storage/observed.py)
        if self._push is not None and on_save is not None:
            on_save(_note_cancel)

    @answering
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Any:
        check(params)
        claimed, leave = await self._take_turn(params, context)
        try:
            if not params.configuration.return_immediately:
                call = record_of(context)
                call.blocking = True
                # A push config hands the task id to a webhook before the answer: no deferring.
                call.defer_writes = not params.configuration.HasField(
                    "task_push_notification_config"
                )
            async with self._released_if_refused(params, context):
                try:
                    answer = await SEND(self, params, context)
                finally:
                    unslotted = await self._quota.settle(context)
                if unslotted is not None:
                    await self._cancel_unslotted(unslotted, context)
                    raise self._quota.refused(unslotted)
                if claimed is not None:
                    await refuse_untaken(answer, params, self._task_lookup, context)
                refused = record_of(context).refused
                if refused is not None:
                    raise refused  # see CallRecord.refused (a follow-up's wait given back)
            return answer
        finally:
            leave()

    @answering_stream
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        check(params)
        claimed, leave = await self._take_turn(params, context)
        try:
            call = call_of(context)
            answer = answer_of(context)
            positions = None
            if (
                call is not None
                and call.binding in ("jsonrpc", "rest")  # gRPC streams carry no event ids
                and answer is not None
                and self._tap is not None
            ):
                positions = call.positions = StreamPositions(self._tap)
            positioned = self._positioned(params, context, positions, claimed)
            async for event, sse_id in bounded(
                positioned, self._backlog, lambda item: item[0].ByteSize()
            ):
                if answer is not None:
                    answer.sse_id = sse_id
                yield event
        finally:
            leave()

    async def _positioned(
        self,
        params: SendMessageRequest,
        context: ServerCallContext,
        positions: Any,
        claimed: Task | None,
    ) -> AsyncGenerator[tuple[Any, str | None], None]:
        """The SDK's message stream, each event with its SSE id (``None``: none)."""
        events = SEND_STREAM(self, params, context)
        log = self._event_log
        call = record_of(context)
        try:
            async with self._released_if_refused(params, context):
                async for event in events:
                    if call.refused is not None:
                        raise call.refused  # a message reply that failed (no task kept)
                    if claimed is not None:  # the first event tells
                        await refuse_untaken(event, params, self._task_lookup, context)
                        claimed = None
                    seq = None
                    if positions is not None and log is not None:
                        version = positions.take(event)
                        if version is not None and positions.task_id is not None:
                            seq = await log.seq_at(positions.task_id, version)
                    yield event, str(seq) if seq else None
                if call.refused is not None:
                    raise call.refused  # a follow-up refused before its run emitted anything
        finally:
            # First what needs no await: when the client hung up, its cancel scope makes
            # every await below raise again, and the tap kept a dropped stream's notes.
            if positions is not None:
                positions.tap.unwatch(positions)
            try:
                # What the SDK's decorator did: a bare async for leaves *events* unclosed.
                await events.aclose()
            finally:
                unslotted = await self._quota.settle(context)
                if unslotted is not None:  # the stream has ended: the task ends too
                    await self._cancel_unslotted(unslotted, context)

    async def _cancel_unslotted(self, task_id: str, context: ServerCallContext) -> None:
        """Cancel the task of this request that got no quota slot (``TaskQuota.settle``):
        kept, it would count for nothing, one over the caller's quota."""
        try:
            await self.on_cancel_task(CancelTaskRequest(id=task_id), context)
        except A2AError as exc:  # ended meanwhile (answered, canceled): counted no more
            logger.info("task %s without a quota slot not canceled: %s", task_id, exc)

    @answering_stream
    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any, None]:
        if unheld(params, "id"):
            raise TaskNotFoundError
        log = self._event_log
        if log is None:
            events = super().on_subscribe_to_task(params, context)
            async for event in bounded(events, self._backlog, lambda event: event.ByteSize()):
                yield event
            return
        if not self._capabilities.streaming:
            raise UnsupportedOperationError(message="Streaming is not supported by the agent")
        answer = answer_of(context)
        async for event, sse_id in subscribe_from_log(log, self.task_store, params.id, context):
            if answer is not None:
                answer.sse_id = sse_id
            yield event

    async def _take_turn(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[Task | None, Callable[[], None]]:
        """Check that *params* may start or continue a task now; returns the parked task
        whose wait it claimed, if it continues one, and what ends the request's hold on
        the context of a task it starts (call it when the request ends)."""
        self._check_values(params)
        refuse_push_config(params, self._capabilities)
        if params.configuration.HasField("task_push_notification_config"):
            await self._check_push_url(params.configuration.task_push_notification_config, context)
        task_id = params.message.task_id
        if not task_id:
            leave = await self._contexts.enter(params, context)
            try:
                await self._quota.reserve(context, self._task_lookup)
            except BaseException:
                leave()
                raise
            return None, leave
        return await self._continued(params, context, task_id), _stay

    async def _continued(
        self, params: SendMessageRequest, context: ServerCallContext, task_id: str
    ) -> Task | None:
        """The parked task whose wait a follow-up for *task_id* claimed (``None``: none)."""
        stored = await self._task_lookup(task_id, context)
        if stored is None:
            return None  # the SDK answers TaskNotFoundError
        state = stored.status.state
        if state in _FINISHED:
            # The SDK's answer, given here: in cluster mode the SDK would hand the message
            # to this replica's parked run of a task another replica finished, and a second
            # message racing the first would meet its closed queue (an internal error).
            raise UnsupportedOperationError(
                message=f"Task {task_id} is in terminal state: {TaskState.Name(state)}"
            )
        if state in _RUNNING:
            raise TaskBusyError(
                message=f"Task is busy: it is {state_name(state)}; send the next message "
                "when it asks for input"
            )
        if state in _WAITING:
            # Before the claim: a refused message leaves the wait.
            check_follow_up(params, stored, *self._history)
            if not await self._turns.claim(stored):
                busy = "Task is busy: another message is already continuing it"
                raise TaskBusyError(message=busy)
            call = record_of(context)
            call.turn, call.give_back = "claimed", giver(self._turns, stored, call)
            call.claimed = stored.status
            return stored
        return None

    @contextlib.asynccontextmanager
    async def _released_if_refused(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncIterator[None]:
        """A follow-up refused after it claimed its task's wait (the SDK's checks, the
        request-context builder's: skill, ACL, toggle; a push URL) gives the wait back, so
        the task stays open to the right answer. A refusal is an A2A error; once the run
        has saved anything the task is past the claimed turn, and giving it back is moot.
        So does a request that ends before the executor took its message (its client hung
        up, a gRPC deadline): that message never runs (``CallRecord.turn``); one its run
        refuses is given back by the run (``CallRecord.give_back``). A message
        that met its task's run finishing is refused as the SDK refuses a finished run
        (``upstream/untaken_follow_ups.py``)."""
        call = record_of(context)
        try:
            try:
                yield
            except FINISHED_RUN:
                raise finished_refusal(params.message.task_id) from None
        except BaseException as exc:
            undelivered = call.turn == "claimed"
            if undelivered:
                call.turn = "dropped"
            if call.give_back is not None and (undelivered or isinstance(exc, A2AError)):
                await call.give_back()
            raise

    @answering
    @held_ids("task_id")
    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        check(params)
        await self._check_push_url(params, context)
        created: TaskPushNotificationConfig = await super().on_create_task_push_notification_config(
            params, context
        )
        return created

    @answering
    @held_ids("task_id", "id")
    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        check(params)
        try:
            config: TaskPushNotificationConfig = await super().on_get_task_push_notification_config(
                params, context
            )
        except TaskNotFoundError:
            # The SDK's lists leave a config it cannot read out: it exists all the same.
            rows = self._stored_configs
            if isinstance(rows, ConfigRows) and await rows.unreadable(
                params.task_id, params.id, context
            ):
                raise PushConfigUnreadableError.of(params.task_id, params.id) from None
            raise
        return config

    async def _check_push_url(
        self, config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> None:
        """The SSRF policy on *config*'s webhook URL, for the call's caller while its client
        is there (``push/policy.py``)."""
        if self._push_url_check is not None:
            await self._push_url_check(config.url, record_of(context))

    @answering
    @held_ids("id")
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        # A task running on another replica (cluster mode) is canceled by writing the
        # stored state here; its run there ends at that state without pushing it, so the
        # cancel is pushed here, by the call whose write won (one push, not one per call).
        record = record_of(context)
        record.cancel_write = written = CancelWrite(params.id, asyncio.current_task())
        try:
            async with self._cancel_turns.turn(params.id):
                task: Task | None = await super().on_cancel_task(params, context)
        except TaskNotCancelableError:
            stored = await self._task_lookup(params.id, context)
            if stored is None:
                raise
            state = state_name(stored.status.state)
            raise TaskNotCancelableError(
                message=f"Task is not cancelable: current state is {state}"
            ) from None
        finally:
            record.cancel_write = None
        await self._quota.given_back(params.id)
        if written.status is not None and self._push is not None:
            event = TaskStatusUpdateEvent(
                task_id=params.id, context_id=written.context_id, status=written.status
            )
            await self._push.send_settled(params.id, event)
        return task


def _note_cancel(task: Task, context: ServerCallContext) -> None:
    """Save listener: a save of ``canceled`` by the cancel call that *context* belongs to,
    from that call's own asyncio task (a run here saves from its own tasks, and pushes)."""
    call = call_of(context)
    written = call.cancel_write if call is not None else None
    if (
        written is None
        or written.task_id != task.id
        or written.runner is not asyncio.current_task()
    ):
        return  # not this cancel's save, or the run's own (it pushes what it saves)
    if task.status.state == TaskState.TASK_STATE_CANCELED:
        written.status, written.context_id = TaskStatus(), task.context_id
        written.status.CopyFrom(task.status)


def _stay() -> None:
    """A follow-up holds no context (its task is the caller's own)."""


for _name, *_ids in (
    ("on_get_task", "id"),
    ("on_list_tasks", "context_id"),
    ("on_get_extended_agent_card",),
    ("on_delete_task_push_notification_config", "task_id", "id"),
    ("on_list_task_push_notification_configs", "task_id"),
):  # the methods not overridden above check enum values and ids, and note their answers too
    _base = getattr(DefaultRequestHandler, _name)
    setattr(ApCoreRequestHandler, _name, answering(checked(held_ids(*_ids)(_base))))

"""The call record: one typed record per A2A call, the same on JSON-RPC, REST and gRPC.

The edge builds it once, where the call is known: the HTTP context builder from the route
Starlette matched (``classify.RequestInfo``), the gRPC one from the method the interceptor
admitted.
It travels in the SDK's ``ServerCallContext`` (under one key, written and read only here),
so the request handler, quotas and push read what the edge decided instead of deriving it
again; what one layer hands the next during the call (the quota slot, the stream's event
positions) is a field of it, not a string key of its own. The caller's identity travels
where a2a-sdk and Starlette look for it (``scope["user"]`` / ``scope["auth"]``, see
``execution/identity.py``); :attr:`CallRecord.caller` is the key quotas count by.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from a2a.server.context import ServerCallContext
from a2a.types import TaskStatus

#: ``internal``: a call the edge did not see (an app calling the request handler itself)
Binding = Literal["jsonrpc", "rest", "grpc", "internal"]

#: The one ``ServerCallContext.state`` key of ours (tests/test_architecture.py allows it here).
_KEY = "apcore_a2a.call"


class Watcher(Protocol):
    """What follows a task's events once its id is known (a message stream's positions)."""

    def watch(self, task_id: str) -> None: ...


@dataclass(slots=True)
class CancelWrite:
    """What a cancel call's own save stored (``server/handler.py``): ``status`` stays
    ``None`` until a save of *task_id* in ``canceled``, made from *runner* (the asyncio
    task the call runs in), succeeds.

    The SDK's running task saves with the cancel call's context too (``ActiveTask.cancel``
    hands it over), but from the run's own asyncio task: that save is the run's, and the
    run pushes it itself."""

    task_id: str
    runner: asyncio.Task[Any] | None
    status: TaskStatus | None = None
    context_id: str = ""


@dataclass(slots=True)
class CallRecord:
    """What one A2A call is, whatever its binding.

    ``version`` is the protocol the method speaks (``"1.0"`` or ``"0.3"``; the version rule
    refused the call otherwise), ``method`` its A2A 1.0 name, ``caller`` the task owner or
    ``ip:<address>`` for anonymous callers (the quota key; the memory event log files a
    task's log under its first call's)."""

    binding: Binding
    version: str
    method: str | None
    caller: str
    #: the unfinished-task quota slot this request holds (``server/task_quota.py``), the
    #: task that took it, and the slot update a save in a final state started
    task_slot: str | None = None
    slot_task: str | None = None
    slot_freed: asyncio.Future[None] | None = None
    #: a message stream's event positions (``streams/resume.py``'s ``StreamPositions``),
    #: told the task id once the request context builder knows it
    positions: Watcher | None = None
    #: a blocking send: its caller is answered only at the end, so no stream waits for the
    #: submitted Task (set by the request handler, read by the executor)
    blocking: bool = False
    #: a blocking send without a push config: its passing states may wait in memory
    #: (set by the request handler, read by ``storage/deferred.py``)
    defer_writes: bool = False
    #: the id this call made up for a new task: nothing is stored under it until its first
    #: save (set by the request context builder, read and ended by ``storage/deferred.py``)
    new_task: str | None = None
    #: the task this call's run goes by, new or continued (set by the request context
    #: builder, never cleared): a message-reply run has it before anything is stored
    run_task: str | None = None
    #: a follow-up's claim of its task's wait (``server/handler.py``): ``"claimed"`` until
    #: the executor starts its run (``"run"``); a request that ends first (its client hung
    #: up) gives the wait back and leaves it ``"dropped"``, and its message never runs
    turn: Literal["claimed", "run", "dropped"] | None = None
    #: gives that claim back, once (later calls do nothing): called by the request handler
    #: for a refusal before the run changed the task, or by the run that refuses the
    #: message before changing it, whether its client is still there or gone
    give_back: Callable[[], Awaitable[None]] | None = None
    #: the status of the task as that claim found it (its turn; set with :attr:`give_back`)
    claimed: TaskStatus | None = None
    #: task id -> (what this call read from the store, when) (``storage/observed.py``)
    reads: dict[str, tuple[Any, float]] = field(default_factory=dict)
    #: a cancel call's own write of the canceled state, while the call runs
    cancel_write: CancelWrite | None = None
    #: why the server itself cancels the task (shutting down), shown in its final status
    cancel_reason: str | None = None
    #: what the call answers instead of its run's last event (set by the executor, raised
    #: by the request handler): a blocking send's refusal, its task already ended
    #: ``rejected`` (the module's call never got a sync thread), the ACL's refusal of the
    #: skill as its run starts (no task made or changed), or the error of a message reply
    #: that failed, whose run ended with a message that never leaves (no task kept)
    refused: Exception | None = None
    #: what the call answered (``streams/tap.py``'s ``Answer``; none for ``internal`` calls)
    answer: Any = None
    #: returns once the call's client has hung up: an HTTP call's, whose handler runs on
    #: after a hang-up (set by the HTTP context builder); ``None`` where nothing tells, or
    #: where the binding cancels the call itself (gRPC)
    client_gone: Callable[[], Awaitable[None]] | None = None


def attach(context: ServerCallContext, record: CallRecord) -> CallRecord:
    """Put *record* into *context* (the edge does, once per call)."""
    context.state[_KEY] = record
    return record


def call_of(context: ServerCallContext | None) -> CallRecord | None:
    """The record of the call *context* belongs to; ``None`` for a context the edge did not
    build (a store's own lookups, a test calling the handler directly)."""
    if context is None:
        return None
    found = context.state.get(_KEY)
    return found if isinstance(found, CallRecord) else None


def record_of(context: ServerCallContext) -> CallRecord:
    """The record of *context*'s call; a call the edge did not see (an app calling the
    request handler itself) gets an ``internal`` one, attached now."""
    return call_of(context) or attach(context, _internal(context))


def _internal(context: ServerCallContext) -> CallRecord:
    return CallRecord("internal", "1.0", None, context.user.user_name or "anonymous")


def with_record(context: ServerCallContext, **changes: Any) -> ServerCallContext:
    """A copy of *context* whose record is its own, with *changes* (the server acting on a
    call's behalf, e.g. cancelling it at shutdown, without touching the original)."""
    found = call_of(context) or _internal(context)
    copied = context.model_copy(update={"state": dict(context.state)})
    attach(copied, dataclasses.replace(found, **changes))
    return copied

"""Per-caller quota of unfinished tasks (``max_unfinished_tasks_per_caller``).

One caller must not fill the task store for everybody (parked ``input-required`` tasks
stay until answered). A request for a new task first takes one of its caller's slots
(``server/limits.py``) atomically, so concurrent requests never overshoot (in cluster mode
the slots are in the shared database). A task left unfinished keeps the slot (renamed to
its id) until a save in a final state, wherever that happens; otherwise the slot is given
back when the request ends. Over the quota a new task gets
:class:`~apcore_a2a.errors.QuotaExceededError`; messages continuing a task never do.

A task can end unseen (failed by a dead replica's recovery, evicted from the memory
store): a caller found at its quota has its tasks checked against the store first (at
most once per ``RECHECK_SECONDS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState

from apcore_a2a.edge.call import call_of, record_of
from apcore_a2a.errors import QuotaExceededError
from apcore_a2a.execution.routing import TaskLookup
from apcore_a2a.server.limits import LocalSlots, QuotaSlots
from apcore_a2a.storage.observed import last_read
from apcore_a2a.storage.quota_slots import TASK_SCOPE

logger = logging.getLogger("apcore_a2a.server")

#: Seconds a caller over its quota is told to wait (tasks finish or time out meanwhile).
RETRY_AFTER = 30
#: Seconds between two checks of one caller's counted tasks against the store.
RECHECK_SECONDS = 5.0

_UNFINISHED = frozenset(
    {TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING, *INTERRUPTED_TASK_STATES}
)


class TaskQuota:
    """Unfinished tasks per caller key; ``limit`` 0 turns the quota off. *clock*:
    monotonic seconds (injectable for tests)."""

    def __init__(
        self,
        limit: int,
        slots: QuotaSlots | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.slots = slots if slots is not None else LocalSlots()
        self._clock = clock
        #: caller -> when its tasks were last checked, oldest first: only the checks of
        #: the last RECHECK_SECONDS (older ones no longer hold a recheck back), so callers
        #: that once reached their quota and left leave nothing behind
        self.recent_checks: OrderedDict[str, float] = OrderedDict()
        #: cluster mode: the last slot update of each task, so they apply in order
        self._updates: dict[str, asyncio.Future[None]] = {}

    async def reserve(self, context: ServerCallContext, lookup: TaskLookup) -> None:
        """Take a slot for the new task of this request, or raise ``QuotaExceededError``."""
        if not self.limit:
            return
        # The key the edge named for this call (HTTP and gRPC alike), else the user's.
        call = record_of(context)
        caller = call.caller
        holder = f"r:{uuid.uuid4().hex}"
        taken = await self.slots.take(TASK_SCOPE, caller, holder, self.limit)
        if not taken and await self._recheck(caller, context, lookup):
            taken = await self.slots.take(TASK_SCOPE, caller, holder, self.limit)
        if not taken:
            raise self._exceeded()
        call.task_slot = holder

    async def settle(self, context: ServerCallContext) -> str | None:
        """At the end of a request: hand the slot it took to its unfinished task, or give
        it back. The task's id when its slot was freed meanwhile (a replica paused past
        the replica timeout) and the caller is at its quota now: the task counts for
        nothing, and the caller must end it (``refused``)."""
        call = call_of(context)
        if call is None:
            return None
        freed, call.slot_freed = call.slot_freed, None
        if freed is not None:
            # A task this request finished has its slot back before the answer leaves, so
            # the caller's next request (on any replica) can take it.
            await asyncio.shield(freed)
        holder, task_id = call.task_slot, call.slot_task
        call.task_slot = call.slot_task = None
        if holder is None:
            return None
        unslotted: list[str] = []
        # A task this request read finished was ended by another replica (a cancel) while
        # the request held its slot, which gave back a slot of the task's name, not this one.
        read = last_read(context, task_id) if task_id is not None else None
        if task_id is not None and (read is None or read.status.state in _UNFINISHED):
            # The request made a task that is still unfinished: the slot is the task's now.
            update = self._apply(task_id, self._rename(holder, task_id, unslotted))
        else:
            update = self._apply(holder, self.slots.give_back(TASK_SCOPE, holder))
        if update is not None:
            await asyncio.shield(update)
        return unslotted[0] if unslotted else None

    async def _rename(self, holder: str, task_id: str, unslotted: list[str]) -> None:
        if not await self.slots.rename(TASK_SCOPE, holder, task_id, self.limit):
            unslotted.append(task_id)

    def refused(self, task_id: str) -> QuotaExceededError:
        """The error for a request whose task got no slot (``settle``)."""
        logger.warning("task %s: its quota slot was freed meanwhile; canceled", task_id)
        return self._exceeded()

    def _exceeded(self) -> QuotaExceededError:
        return QuotaExceededError(
            f"Task quota exceeded: at most {self.limit} unfinished tasks per caller; "
            "finish or cancel some first",
            retry_after=RETRY_AFTER,
        )

    async def given_back(self, task_id: str) -> None:
        """Wait for the slot update of *task_id* under way, if any: a cancel answers after
        it, so the caller's next task finds the slot free on any replica."""
        update = self._updates.get(task_id)
        if update is not None:
            await asyncio.shield(update)

    def saved(self, task: Task, context: ServerCallContext) -> None:
        """Follow one save of *task* (a ``storage.observed`` listener, with a limit only)."""
        call = call_of(context)
        holder = call.task_slot if call is not None else None
        finished = task.status.state not in _UNFINISHED
        if call is not None and holder is not None:
            # The request that made the task is still running: the slot changes hands
            # when it ends (most blocking calls finish first and never rename it).
            if not finished:
                call.slot_task = task.id
                return
            call.task_slot = call.slot_task = None
            freed = self._apply(task.id, self.slots.give_back(TASK_SCOPE, holder))
        elif finished:  # wherever the task was counted: its slot is free
            freed = self._apply(task.id, self.slots.give_back(TASK_SCOPE, task.id))
        else:
            return
        if freed is not None and call is not None:
            call.slot_freed = freed

    def _apply(self, task_id: str, call: Coroutine[Any, Any, None]) -> asyncio.Future[None] | None:
        if isinstance(self.slots, LocalSlots):
            # Nothing awaits in local slots: the update runs to its end now, in the calling
            # coroutine (its first step is its last).
            with contextlib.suppress(StopIteration):
                call.send(None)
            return None
        # A save listener must not block: the database update runs beside the save,
        # after the task's previous update.
        before = self._updates.get(task_id)

        async def run() -> None:
            if before is not None:
                await asyncio.wait([before])
            try:
                await call
            except Exception as exc:  # a database outage: the recheck repairs the count
                logger.warning(
                    "could not update the task quota slot of %s: %s", task_id, type(exc).__name__
                )

        update = asyncio.ensure_future(run())
        self._updates[task_id] = update

        def done(future: asyncio.Future[None]) -> None:
            if self._updates.get(task_id) is future:
                del self._updates[task_id]

        update.add_done_callback(done)
        return update

    async def _recheck(self, caller: str, context: ServerCallContext, lookup: TaskLookup) -> bool:
        """Free the slots of *caller*'s tasks that ended unseen; whether any was."""
        now = self._clock()
        checks = self.recent_checks
        while checks and now - next(iter(checks.values())) >= RECHECK_SECONDS:
            checks.popitem(last=False)
        if caller in checks:
            return False
        checks[caller] = now  # the newest: the order stays by time
        freed = False
        for holder in await self.slots.holders(TASK_SCOPE, caller):
            if holder.startswith("r:"):
                continue  # a request in flight (an orphan of one: freed by the take)
            stored = await lookup(holder, context)
            if stored is None and not isinstance(self.slots, LocalSlots):
                continue  # maybe not written yet by the replica running it
            if stored is None or stored.status.state not in _UNFINISHED:
                await self.slots.give_back(TASK_SCOPE, holder)
                freed = True
        return freed

"""Tasks left running: those restart recovery looks at (``submitted`` or ``working``),
read through a partial index of those tasks alone (``docs/storage.md``, *Restarts*).

Every start (each worker, each replica) and each dead replica's recovery asks for them;
filtered on the stored state, which no index held, each read every task of the table
(40,001 rows at 40,000 tasks). ``ix_apcore_a2a_tasks_running`` holds the ids of the tasks
in a running state, so the read follows them, not the table. The queries spell the
index's predicate as literals (a parameter proves nothing about a partial index: neither
PostgreSQL's generic plans nor SQLite can use it then).

Saves whose commit landed but whose answer was lost: the task they stored is failed.

a2a-sdk's run of a task ends at a save that raises (its consumer writes the task
``failed``, once, and stops). When the database committed that save and only its answer
was lost (the connection cut after the COMMIT went out), the task is stored in the state
the run was saving, ``working`` say, and the SDK's write of ``failed`` meets the version
the lost commit made and is given up: the task stayed ``working`` with no run anywhere,
every later message refused busy, until a restart's recovery (its replica live, no other
replica's recovery takes it). :class:`LostSaves`, a listener of failed saves, reads such a
task once the database answers; stored exactly as the failed save wrote it (state and
status timestamp: nothing else moved it since), it is failed there, by a
compare-and-swap (``docs/reliability.md``, *A lost answer*).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from a2a.server.cluster import ConcurrentTaskModificationError, StoredTask
from a2a.server.context import ServerCallContext
from a2a.server.models import TaskModel
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from sqlalchemy import select, text

from .observed import copy_task

logger = logging.getLogger(__name__)

INDEX_NAME = "ix_apcore_a2a_tasks_running"
RUNNING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
#: stored state strings: 1.0 enum names, and the 0.3 ones of rows older SDKs wrote
_NAMES = [TaskState.Name(s) for s in RUNNING] + ["submitted", "working"]
_LIST = ", ".join(f"'{name}'" for name in _NAMES)
#: the predicate per dialect, as the database keeps it (PostgreSQL's an ``= ANY`` array)
PREDICATE = {
    "postgresql": f"(status ->> 'state') = ANY (ARRAY[{_LIST}])",
    "sqlite": f"json_extract(status, '$.state') IN ({_LIST})",
}


def running_tasks(dialect: str) -> Any:
    """``(task_id, owner)`` of the tasks in a running state, in *dialect*."""
    # text, not a boolean column: SQLite would compare that with 1, which no index implies
    return select(TaskModel.id, TaskModel.owner).where(text(PREDICATE[dialect]))


def mark_failed(task: Task, text: str) -> TaskStatus:
    """Fail *task* (a running one nothing runs any more) in place with *text* for its
    status message, the replaced status message moved into its history as the SDK's
    TaskManager does; returns the new status."""
    if task.status.HasField("message"):
        task.history.append(task.status.message)
    status = TaskStatus(
        state=TaskState.TASK_STATE_FAILED,
        message=Message(
            role=Role.ROLE_AGENT,
            message_id=str(uuid.uuid4()),
            task_id=task.id,
            context_id=task.context_id,
            parts=[Part(text=text)],
        ),
    )
    status.timestamp.FromDatetime(datetime.now(UTC))
    task.status.CopyFrom(status)
    return status


#: the status message of a task failed here
LOST_SAVE_MESSAGE = "Task state could not be saved (the database's answer was lost); its run ended"


class LostSaves:
    """Fails, through *store* (the chain's view: its save listeners are told), each task
    whose failed save is found stored once the database answers, retried every
    *interval* seconds until it does."""

    def __init__(self, store: Any, interval: float) -> None:
        self._store = store
        self._interval = interval
        #: task id -> the check of its latest failed save under way
        self._checks: dict[str, asyncio.Task[None]] = {}

    def unsaved(self, task: Task, context: ServerCallContext) -> None:
        """A listener of failed saves: check *task* (as the save tried to store it) once
        the database answers, if it was running. Another state is left alone: a parked
        task stored so is the wait it was (a follow-up's first save, its message added to
        the history, keeps the status it read), open to the next message once its claim is
        freed; a finished one is final."""
        if task.status.state not in RUNNING:
            return
        previous = self._checks.pop(task.id, None)
        if previous is not None:
            previous.cancel()  # the latest failed save is the one the task may hold
        check = asyncio.ensure_future(self._check(copy_task(task), context))
        self._checks[task.id] = check
        check.add_done_callback(lambda done: self._forget(task.id, done))

    def _forget(self, task_id: str, done: asyncio.Task[None]) -> None:
        if self._checks.get(task_id) is done:
            del self._checks[task_id]

    async def _check(self, tried: Task, context: ServerCallContext) -> None:
        while True:
            try:
                await self._fail_if_stored(tried, context)
                return
            except ConcurrentTaskModificationError:
                return  # moved on meanwhile (a cancel, the SDK's own write of failed)
            except Exception as exc:  # the database still unreachable: later
                logger.info("task %s: lost save not checked yet: %s", tried.id, type(exc).__name__)
            await asyncio.sleep(self._interval)

    async def _fail_if_stored(self, tried: Task, context: ServerCallContext) -> None:
        found = await self._store.get(tried.id, context)
        if not isinstance(found, StoredTask):
            return  # deleted, or a store without versions (no lost answer to tell)
        stored = found.task
        if stored.status.state != tried.status.state or (
            stored.status.timestamp != tried.status.timestamp
        ):
            return  # the save did not land, or the task moved on since
        task = copy_task(stored)
        status = mark_failed(task, LOST_SAVE_MESSAGE)
        event = TaskStatusUpdateEvent(task_id=task.id, context_id=task.context_id, status=status)
        await self._store.save(
            task, event=event, prev=stored, prev_version=found.version, context=context
        )
        logger.warning("task %s: its save's answer was lost and its run ended; failed", task.id)

    async def aclose(self) -> None:
        """Give up the checks under way (the task is then failed by the next start's, or a
        live replica's, recovery)."""
        checks = list(self._checks.values())
        for check in checks:
            check.cancel()
        await asyncio.gather(*checks, return_exceptions=True)

"""Lifecycle of a SQL-backed store set: tables, recovery, heartbeats, retention, health
(``docs/storage.md``: *Restarts*, *Retention for SQL stores*, *Health*)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from a2a.server.cluster import ConcurrentTaskModificationError, VersionedDatabaseTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.models import (
    PushNotificationConfigModel,
    TaskEventModel,
    TaskModel,
    TaskVersionModel,
)
from a2a.types import Task, TaskState, TaskStatusUpdateEvent
from sqlalchemy import and_, delete, or_, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.errors import TaskUnreadableError

from ._owner import OwnerLock, owner_lock
from ._replicas import (
    METADATA,
    ReplicaRegistry,
    claimants_table,
    claims_table,
    live_ids,
    turns_table,
)
from ._urls import (
    StoreInUseError,
    StoreUnavailableError,
    StoreURL,
    check_sqlite_folder,
    raced,
    read,
)
from .followers import FOLLOW_SCOPE
from .memory import OwnerUser
from .observed import copy_task
from .outages import DB_ERRORS, reason
from .quota_slots import PUSH_SCOPE, TASK_SCOPE, slots_table
from .retention import BATCH, STATE, finished_table, note, purge
from .running import RUNNING, mark_failed, running_tasks

CancelWatch = tuple[Callable[[], list[str]], Callable[[str], None]]
#: told of each task this process failed as interrupted, with the status event it saved
Interrupted = Callable[[Task, TaskStatusUpdateEvent], Awaitable[None]]

logger = logging.getLogger(__name__)

PING_TIMEOUT = 3.0
#: how long a stop waits for connections in use to come back before closing the pool
RETURN_TIMEOUT = 2.0
# Connections this agent may still open, per limit: (what limits it, its value, open now);
# a limit of -1 is none. Superusers pass role and database limits (and the reserved ones).
_LIMITS = """
WITH me AS (SELECT rolsuper AS su FROM pg_roles WHERE rolname = current_user),
open AS (SELECT usename, datname FROM pg_stat_activity WHERE backend_type = 'client backend')
SELECT 'the server''s max_connections', current_setting('max_connections')::int
       - CASE WHEN (SELECT su FROM me) THEN 0 ELSE
         current_setting('superuser_reserved_connections')::int
         + coalesce(current_setting('reserved_connections', true)::int, 0) END,
       (SELECT count(*) FROM open)
UNION ALL
SELECT 'the CONNECTION LIMIT of role ' || quote_ident(current_user),
       CASE WHEN (SELECT su FROM me) THEN -1 ELSE rolconnlimit END,
       (SELECT count(*) FROM open WHERE usename = current_user)
FROM pg_roles WHERE rolname = current_user
UNION ALL
SELECT 'the CONNECTION LIMIT of database ' || quote_ident(current_database()),
       CASE WHEN (SELECT su FROM me) THEN -1 ELSE datconnlimit END,
       (SELECT count(*) FROM open WHERE datname = current_database())
FROM pg_database WHERE datname = current_database()
"""


@dataclass(eq=False)
class SqlBackend:
    """Owns the engine and the background loops of one SQL store set: *task_store* is
    the SDK store recovery writes through, *initializers* create the tables, *closers*
    stop the store chain, *registry* is the cluster's (``None``: one process)."""

    store_url: StoreURL
    engine: AsyncEngine
    task_store: VersionedDatabaseTaskStore
    initializers: list[Callable[[], Awaitable[None]]]
    closers: list[Callable[[], Awaitable[None]]]
    retention_seconds: float | None
    poll_interval: float = 0.5
    #: (connections one process holds at most, processes (workers), what they are)
    connections: tuple[int, int, str] = (0, 1, "")
    registry: ReplicaRegistry | None = None
    _loops: list[asyncio.Task[None]] = field(default_factory=list)
    #: cluster mode: (the task ids running here, stop one of them)
    cancel_watch: CancelWatch | None = None
    _started: bool = False
    _join_workers: Callable[[], Awaitable[None]] | None = None
    #: one process alone, or cluster processes together (``_owner.py``)
    owner: OwnerLock = field(default_factory=OwnerLock)
    #: listeners of :meth:`_fail` (push: no run reports these failures)
    interrupted: list[Interrupted] = field(default_factory=list)
    #: tables of the rooms above (push's status) whose rows go with their task at retention
    purged_with: list[Any] = field(default_factory=list)
    #: retention passes per sweep of every task (``retention.py``), and left to the next
    _sweep_every: int = 1
    _sweep_in: int = 0

    def __post_init__(self) -> None:
        self.owner = owner_lock(self.store_url, shared=self.registry is not None)
        if self.store_url.kind == "sqlite":
            # aiosqlite is imported only for a SQLite store (start-up cost)
            from apcore_a2a.upstream.aiosqlite_workers import track_workers

            self._join_workers = track_workers(self.engine)

    async def start(self) -> None:
        if self._started:
            return
        path = self.store_url.sqlite_path
        if path is not None:
            await asyncio.to_thread(check_sqlite_folder, self.store_url)
            # A new database file is private (0600); SQLite gives its -wal and -shm files
            # its mode. An existing file keeps its mode (the operator's choice).
            with contextlib.suppress(FileExistsError, FileNotFoundError, IsADirectoryError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            await self.check_connections()
            await raced(self._refuse_a_newer_schema)
            # Before anything is written: the recovery below fails every running task
            # it may (docs/storage.md, *Restarts*).
            await self._own()
            await raced(self._create_tables)
            running = running_tasks(self.engine.dialect.name)
            if self.registry is not None:
                await self.registry.register()
                # Not yet live_cutoff(): just after an outage every heartbeat is old, the
                # live replicas' too. Others' tasks are judged by the recovery loop once
                # this replica has beaten for a replica timeout (docs/storage.md).
                running = _orphaned(running, self.registry.dead_cutoff())
            await self._fail(running)
        except DB_ERRORS as exc:
            # Wrong password, missing database, no permission: the store is unusable
            # either way, and the operator needs the reason, not a traceback.
            await self.owner.release()
            raise self._unavailable(exc) from None
        except BaseException:
            await self.owner.release()
            raise
        if self.registry is not None:
            beat = self.registry.heartbeat_interval
            self._spawn("heartbeat", "replica heartbeat", beat, self.registry.heartbeat)
            # A loop of its own: failing an orphan can wait for a row lock as long as a
            # paused replica holds it, and this replica must go on beating meanwhile (else
            # every replica waiting there would be declared dead too).
            self._spawn("orphans", "orphan recovery", beat, self._recover)
            if self.cancel_watch is not None:
                self._spawn("cancels", "cancel check", self.poll_interval, self._check_cancels)
        if self.retention_seconds is not None and self.retention_seconds > 0:
            # Often enough to stay near the target, at most every 5 minutes.
            every = min(max(self.retention_seconds / 4, 0.5), 300.0)
            # A sweep reads every task: once per retention, at the first pass.
            self._sweep_every = math.ceil(self.retention_seconds / every)
            self._spawn("retention", "task retention purge", every, self._purge)
        self._started = True

    async def aclose(self) -> None:
        loops, self._loops = self._loops, []
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        for close in self.closers:
            await close()
        if self.registry is not None and self._started:
            try:
                async with asyncio.timeout(PING_TIMEOUT):
                    await self.registry.deregister()
            except DB_ERRORS:
                logger.warning("could not deregister replica %s", self.registry.replica_id)
        self._started = False
        # A connection may still be on its way back (the pool rolls it back in a task of its
        # own, even for a canceled caller); if the loop ended under that rollback, the pool
        # would log the cancellation as an error, traceback and all.
        checkedout = getattr(self.engine.pool, "checkedout", lambda: 0)
        for _ in range(int(RETURN_TIMEOUT / 0.01)):
            if not checkedout():
                break
            await asyncio.sleep(0.01)
        await self.engine.dispose()
        if self._join_workers is not None:
            await self._join_workers()
        await self.owner.release()  # the last write is done

    async def ping(self) -> None:
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                await read(self.engine, text("SELECT 1"))
        except DB_ERRORS as exc:
            raise self._unavailable(exc) from None

    async def check_connections(self) -> None:
        # The pool opens its connections under load, when running out of them is an
        # outage; a start that cannot have them all says so at once instead
        # (docs/deployment.md, *Database connections*). Behind PgBouncer they are its
        # clients, bounded by its max_client_conn, which only its admin console shows;
        # PostgreSQL's limits bound PgBouncer's server pool, not them.
        if self.store_url.kind != "postgresql" or self.store_url.pgbouncer:
            return
        per_process, workers, held = self.connections
        need = workers * per_process
        try:
            limits = await read(self.engine, text(_LIMITS))
        except DB_ERRORS as exc:
            raise self._unavailable(exc) from None
        for what, limit, open_now in limits:
            free = limit - open_now + 1  # +1: the connection asking is one of the pool's
            if limit < 0 or need <= free:
                continue
            others = per_process - self.store_url.pool_size
            fits = free // workers - others
            advice = f"?pool_size={fits} would fit" if fits >= 1 else "fewer workers would"
            raise StoreUnavailableError(
                f"task store {self.store_url.display} cannot take this agent's connections: "
                f"{workers} worker(s) x {per_process} ({held}) = {need}, but {what} leaves "
                f"{free} ({limit} allowed, {open_now - 1} open by others now); {advice}, "
                "or raise the limit"
            )

    async def _refuse_a_newer_schema(self) -> None:
        """A database a newer version migrated may hold what this one cannot read, and
        this one's writes could break it for that version: refuse it, as ``db upgrade``
        does, instead of serving on it."""
        from .migrations import unknown_revision

        async with self.engine.connect() as conn:
            newer = await conn.run_sync(unknown_revision)
        if newer is not None:
            raise StoreUnavailableError(
                f"task store {self.store_url.display}: unknown a2a-sdk schema revision {newer!r}"
            )

    async def _own(self) -> None:
        """Take the database for this process alone, or for cluster processes together;
        :class:`StoreInUseError` when another process holds it the other way."""
        try:
            await self.owner.acquire()
        except StoreInUseError:
            raise
        except Exception as exc:  # asyncpg's errors share no base class with OSError
            raise self._unavailable(exc) from None

    async def _create_tables(self) -> None:
        for initialize in self.initializers:
            await initialize()
        async with self.engine.begin() as conn:
            if self.registry is not None:
                await conn.run_sync(METADATA.create_all)
            else:  # retention's notes (retention.py), in single mode too
                await conn.run_sync(finished_table.create, checkfirst=True)

    def _spawn(
        self, name: str, what: str, interval: float, work: Callable[[], Awaitable[None]]
    ) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval)
                try:
                    await work()
                except DB_ERRORS as exc:
                    logger.warning("%s failed: %s", what, type(exc).__name__)

        self._loops.append(asyncio.create_task(loop(), name=f"apcore-a2a-store-{name}"))

    async def _recover(self) -> None:
        assert self.registry is not None
        for dead in await self.registry.dead():
            await self.registry.end_sessions(dead)
            claims = claims_table.c
            mine = and_(claims.task_id == TaskModel.id, claims.replica_id == dead)
            running = running_tasks(self.engine.dialect.name)
            await self._fail(running.join(claims_table, mine))
            await self.registry.retire(dead)

    async def _check_cancels(self) -> None:
        # The SDK's own signal (a version conflict) comes only at the run's next write,
        # which a silent module never makes (docs/reliability.md, issue 22).
        assert self.cancel_watch is not None
        running, stop = self.cancel_watch
        ids = running()
        for start in range(0, len(ids), BATCH):
            chunk = ids[start : start + BATCH]
            # Failed too: another replica found this one dead (paused past the replica
            # timeout) and failed its task; the result can never be stored.
            ended = select(TaskModel.id).where(TaskModel.id.in_(chunk), STATE.in_(_ENDED_NAMES))
            for (task_id,) in await read(self.engine, ended):
                stop(task_id)

    async def _fail(self, stmt: Any) -> None:
        """Move each task *stmt* finds that is still running to ``failed``: a compare-and-swap
        with a status event (subscribers see it), so a task another replica advanced
        meanwhile is left alone."""
        versioned = self.task_store
        changed = 0
        for task_id, owner in await read(self.engine, stmt):
            context = ServerCallContext(user=OwnerUser(owner or ""))
            try:
                stored = await versioned.get(task_id, context)
                if stored is None or stored.task.status.state not in RUNNING:
                    continue
                task = copy_task(stored.task)
                mark_failed(task, INTERRUPTED_MESSAGE)
                event = TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status
                )
                await versioned.save(
                    task,
                    event=event,
                    prev=stored.task,
                    prev_version=stored.version,
                    context=context,
                )
                changed += 1
            except ConcurrentTaskModificationError:
                logger.debug("task %s changed while being marked interrupted; left as is", task_id)
                continue
            except TaskUnreadableError:  # logged by the store's reader; never rewritten
                continue
            # Only the replica whose write won tells its listeners: once per task.
            for listener in self.interrupted:
                try:
                    await listener(task, event)
                except Exception:
                    logger.exception("interrupted task %s: listener failed", task_id)
        if changed:
            logger.warning(
                "marked %d interrupted task(s) as failed: %s", changed, INTERRUPTED_MESSAGE
            )

    async def _purge(self) -> None:
        """Delete finished tasks past retention (``retention.py``) with their dependent
        rows: push configs, versions, events (cluster mode: also claims, turns,
        push-config quota slots, the notes of open streams and a slot of the caller's
        quota its end left behind)."""
        assert self.retention_seconds is not None
        cluster = self.registry is not None
        dependents: list[Any] = [PushNotificationConfigModel.__table__, *self.purged_with]
        dependents += [TaskVersionModel.__table__, TaskEventModel.__table__]
        if cluster:
            dependents += [claims_table, turns_table, claimants_table]
        if self._sweep_in <= 0:
            await note(self.engine)
            self._sweep_in = self._sweep_every
        self._sweep_in -= 1
        deleted = await purge(
            self.engine, self.retention_seconds, dependents, _free_slots if cluster else None
        )
        if deleted:
            logger.info("deleted %d finished task(s) past retention", deleted)

    def _unavailable(self, exc: BaseException) -> StoreUnavailableError:
        why = reason(exc)
        password = self.store_url.url.password if self.store_url.url is not None else None
        if password:
            why = why.replace(str(password), "***")
        if "unsupported startup parameter" in why:  # PgBouncer's word
            why += "; behind PgBouncer in transaction mode add ?pgbouncer=true to the URL"
        return StoreUnavailableError(f"task store {self.store_url.display} is unreachable ({why})")


# -- recovery ------------------------------------------------------------------
INTERRUPTED_MESSAGE = "Interrupted by server restart"

# Stored state strings: 1.0 enum names, plus the v0.3 spellings of rows written by
# older SDKs, which the SDK still reads.
_ENDED_NAMES = [
    *(TaskState.Name(s) for s in (TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED)),
    *("canceled", "failed"),
]
#: quota-slot scopes whose rows name a task: deleted with it
_TASK_SCOPES = (PUSH_SCOPE, FOLLOW_SCOPE)


async def _free_slots(conn: Any, ids: list[str]) -> None:
    # A finished task's unfinished-task slot is its own row when its end could not free
    # it (an outage), and no recheck frees it once the task is gone.
    slots = slots_table.c
    of_task = slots.scope.in_(_TASK_SCOPES) & slots.subject.in_(ids)
    counted = (slots.scope == TASK_SCOPE) & slots.holder.in_(ids)
    await conn.execute(delete(slots_table).where(of_task | counted))


def _orphaned(running: Any, dead_cutoff: Any) -> Any:
    """The *running* tasks (``running_tasks``) whose claim is missing or names a replica
    without a row (retired) or whose heartbeat is at or before *dead_cutoff*
    (``ReplicaRegistry.dead_cutoff``)."""
    claim = claims_table.c.replica_id
    return running.outerjoin(claims_table, claims_table.c.task_id == TaskModel.id).where(
        or_(claim.is_(None), claim.not_in(live_ids(dead_cutoff).scalar_subquery()))
    )

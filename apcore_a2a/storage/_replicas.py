"""Cluster bookkeeping: which replicas are alive and which replica runs which task.

How "owned by no live replica" is decided:

* Every replica has a row in ``apcore_a2a_replicas`` and refreshes ``heartbeat_at`` every
  ``heartbeat_interval`` seconds. A replica whose heartbeat is older than
  ``replica_timeout`` seconds is dead. A replica that shuts down cleanly zeroes its
  heartbeat, so it counts as dead at once.
* Before a replica writes a task in ``submitted``/``working`` state it records a claim
  ``(task_id -> replica_id)`` in ``apcore_a2a_task_claims``. The claim is written *before*
  the task row, so a running task row always has a claim from the replica that runs it.
* A running task is orphaned when its claim is missing or names a dead replica.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections import OrderedDict
from typing import Any

from a2a.server.cluster import (
    StoredTask,
    TaskVersion,
    VersionedDatabaseTaskStore,
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from ._engine import READ_ONLY
from ._tables import claims_table, replicas_table, turns_table
from .deferred import forget_new, made_up_here

__all__ = ["ClaimingTaskStore", "ReplicaRegistry", "SqlTurnClaims"]

_RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})
_CLAIM_CACHE_SIZE = 10_000


class ReplicaRegistry:
    """Heartbeat rows and task claims of this replica in the shared database."""

    def __init__(
        self, engine: AsyncEngine, *, heartbeat_interval: float, replica_timeout: float
    ) -> None:
        if heartbeat_interval <= 0 or replica_timeout <= heartbeat_interval:
            raise ValueError("replica_timeout must be greater than heartbeat_interval > 0")
        self.engine = engine
        self.heartbeat_interval = heartbeat_interval
        self.replica_timeout = replica_timeout
        self.replica_id = uuid.uuid4().hex
        # Task ids this replica has a claim row for, so a task's many "working" saves
        # write the claim once. Bounded: a miss only costs one idempotent upsert.
        self._claimed: OrderedDict[str, None] = OrderedDict()

    def live_cutoff(self) -> float:
        """Heartbeats at or after this wall-clock time count as alive."""
        return time.time() - self.replica_timeout

    async def register(self) -> None:
        """Insert this replica's row (called once at startup)."""
        now = time.time()
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(replicas_table).values(
                    replica_id=self.replica_id,
                    hostname=socket.gethostname()[:255],
                    pid=os.getpid(),
                    started_at=now,
                    heartbeat_at=now,
                )
            )

    async def heartbeat(self) -> None:
        """Refresh this replica's heartbeat, re-registering if another replica retired it."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(replicas_table)
                .where(replicas_table.c.replica_id == self.replica_id)
                .values(heartbeat_at=time.time())
            )
        if result.rowcount == 0:
            await self.register()

    async def deregister(self) -> None:
        """Mark this replica dead now so other replicas take over its orphans immediately."""
        async with self.engine.begin() as conn:
            await conn.execute(
                update(replicas_table)
                .where(replicas_table.c.replica_id == self.replica_id)
                .values(heartbeat_at=0.0)
            )

    async def dead_replicas(self) -> list[str]:
        """Ids of other replicas whose heartbeat is too old."""
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(**{READ_ONLY: True})
            rows = await conn.execute(
                select(replicas_table.c.replica_id).where(
                    replicas_table.c.heartbeat_at < self.live_cutoff(),
                    replicas_table.c.replica_id != self.replica_id,
                )
            )
            return [row[0] for row in rows]

    async def retire(self, replica_id: str) -> None:
        """Drop a dead replica's row and claims (after its orphans were failed)."""
        async with self.engine.begin() as conn:
            await conn.execute(delete(claims_table).where(claims_table.c.replica_id == replica_id))
            await conn.execute(
                delete(replicas_table).where(replicas_table.c.replica_id == replica_id)
            )

    async def claim(self, task_id: str, owner: str) -> None:
        """Record that this replica runs *task_id* (idempotent, cached)."""
        if task_id in self._claimed:
            self._claimed.move_to_end(task_id)
            return
        values: dict[str, Any] = {
            "task_id": task_id,
            "owner": owner,
            "replica_id": self.replica_id,
        }
        dialect = self.engine.dialect.name
        stmt: Any
        if dialect == "postgresql":
            stmt = pg_insert(claims_table).values(**values)
        elif dialect == "sqlite":
            stmt = sqlite_insert(claims_table).values(**values)
        else:  # pragma: no cover - only SQLite and PostgreSQL URLs are accepted
            raise RuntimeError(f"unsupported dialect {dialect}")
        stmt = stmt.on_conflict_do_update(
            index_elements=[claims_table.c.task_id],
            set_={"owner": owner, "replica_id": self.replica_id},
        )
        async with self.engine.begin() as conn:
            await conn.execute(stmt)
        self._claimed[task_id] = None
        if len(self._claimed) > _CLAIM_CACHE_SIZE:
            self._claimed.popitem(last=False)

    def release(self, task_id: str) -> None:
        """Forget the cached claim once the task leaves the running states.

        The row stays (it is harmless for a task that is not running); a later resume
        writes a fresh claim for whichever replica runs it then.
        """
        self._claimed.pop(task_id, None)


class ClaimingTaskStore(VersionedTaskStore):
    """The SDK's versioned SQL store, plus a claim before every write of a running task."""

    def __init__(
        self,
        inner: VersionedDatabaseTaskStore,
        registry: ReplicaRegistry,
        *,
        owner_resolver: OwnerResolver = resolve_user_scope,
    ) -> None:
        self.inner = inner
        self.registry = registry
        self._owner_resolver = owner_resolver

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def initialize(self) -> None:
        """Create the SDK's task, version and event tables if missing."""
        await self.inner.initialize()

    def owner(self, context: ServerCallContext) -> str:
        """The owner scope the rows of *context*'s caller are stored under."""
        return self._owner_resolver(context)

    async def save(
        self,
        task: Task,
        *,
        event: Event | None = None,
        prev: Task | None = None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        """Claim the task if it is running, then save it through the SDK store."""
        if task.status.state in _RUNNING:
            await self.registry.claim(task.id, self._owner_resolver(context))
        else:
            self.registry.release(task.id)
        version = await self.inner.save(
            task, event=event, prev=prev, prev_version=prev_version, context=context
        )
        forget_new(task.id, context)
        return version

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task with its version, or ``None`` (at once for an id made up here)."""
        if made_up_here(task_id, context):
            return None
        return await self.inner.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The caller's tasks (SDK semantics)."""
        return await self.inner.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the task and its version row."""
        self.registry.release(task_id)
        await self.inner.delete(task_id, context)


class SqlTurnClaims:
    """Claims shared by every replica on one database (cluster mode)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def claim(self, task_id: str, turn: str) -> bool:
        try:
            async with self._engine.begin() as conn:
                await conn.execute(insert(turns_table).values(task_id=task_id, turn=turn[:64]))
        except IntegrityError:
            return False
        return True

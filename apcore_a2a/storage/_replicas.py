"""Cluster bookkeeping: which replicas are alive and which replica runs which task.

The rules (heartbeats, claims written before the task row, orphans) are in
``docs/storage.md`` (*Which replica owns a task*).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from cachetools import LRUCache
from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    and_,
    cast,
    delete,
    extract,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from ._urls import read
from .outages import sqlstate

#: Our own tables, beside the SDK's; turn claims (``turns.py``) and quota slots too.
METADATA = MetaData()

replicas_table = Table(
    "apcore_a2a_replicas",
    METADATA,
    Column("replica_id", String(64), primary_key=True),
    Column("hostname", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    # Seconds since the epoch by the database's clock (:func:`db_seconds`), never a
    # replica's: a replica whose clock is off judges the others by the same clock.
    Column("heartbeat_at", Float, nullable=False),
)

claims_table = Table(
    "apcore_a2a_task_claims",
    METADATA,
    Column("task_id", String(36), primary_key=True),
    Column("owner", String(255), nullable=True),
    Column("replica_id", String(64), nullable=False),
    Index("ix_apcore_a2a_task_claims_replica", "replica_id"),
)

turns_table = Table(
    "apcore_a2a_task_turns",
    METADATA,
    Column("task_id", String(255), primary_key=True),
    Column("turn", String(64), primary_key=True),
)

#: Who made each turn claim and since when (``turns.py``): a row written with the claim,
#: or, for a claim of an earlier release (which wrote none), when a replica first met it
#: (``replica_id`` NULL); times by the database's clock.
claimants_table = Table(
    "apcore_a2a_task_turn_claimants",
    METADATA,
    Column("task_id", String(255), primary_key=True),
    Column("turn", String(64), primary_key=True),
    Column("replica_id", String(64), nullable=True),
    Column("since", Float, nullable=False),
)

logger = logging.getLogger(__name__)

_R = replicas_table.c
_CLAIM_CACHE_SIZE = 10_000
#: the heartbeat of a replica that shut down cleanly
_DEREGISTERED = 0.0
#: ``application_name`` of a replica's PostgreSQL connections, before its id
REPLICA_APPLICATION = "apcore-a2a replica "
# A dead replica's sessions of this database: ended so that the locks they hold (a
# replica paused in the middle of a statement, which no server timeout ends) go with them.
#: SQLSTATE insufficient_privilege: this role may not end that replica's sessions
_NOT_ALLOWED = "42501"
_END_SESSIONS = text(
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE application_name = :name AND datname = current_database() "
    "AND pid <> pg_backend_pid()"
)


def db_seconds(engine: AsyncEngine) -> Any:
    """Now, in seconds since the epoch, by the database's clock (an SQL expression): one
    clock for every replica, whatever their own clocks say."""
    if engine.dialect.name == "postgresql":
        return cast(extract("epoch", func.clock_timestamp()), Float)
    return (func.julianday("now") - 2440587.5) * 86400.0


def live_ids(cutoff: Any) -> Any:
    """The ids of the replicas whose heartbeat is after *cutoff* (a select)."""
    return select(_R.replica_id).where(_R.heartbeat_at > cutoff)


def upsert_of(engine: AsyncEngine) -> Any:
    """The ``insert`` of *engine*'s dialect, which has ``on_conflict_do_*`` (PostgreSQL's or
    SQLite's)."""
    # the dialect's module is imported here, once a SQL store writes: the memory store's
    # agent never loads either (start-up cost, ``docs/operations.md``)
    if engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


def new_replica_id() -> str:
    """A replica's id: its heartbeat row's key, and (PostgreSQL) its connections' name."""
    return uuid.uuid4().hex


class ReplicaRegistry:
    """Heartbeat rows and task claims of this replica in the shared database."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        heartbeat_interval: float,
        replica_timeout: float,
        replica_id: str | None = None,
    ) -> None:
        if heartbeat_interval <= 0 or replica_timeout <= heartbeat_interval:
            raise ValueError("replica_timeout must be greater than heartbeat_interval > 0")
        self.engine = engine
        self.heartbeat_interval = heartbeat_interval
        self.replica_timeout = replica_timeout
        self.replica_id = replica_id or new_replica_id()
        # Task ids this replica has a claim row for, so a task's many "working" saves
        # write the claim once. Bounded: a miss only costs one idempotent upsert.
        self._claimed: LRUCache[str, bool] = LRUCache(maxsize=_CLAIM_CACHE_SIZE)
        #: successful heartbeats so far
        self.beats = 0
        # Monotonic times: the last successful beat, and the first of the unbroken run of
        # beats it ends (None: the last one failed). A gap longer than this between two
        # beats means this replica could not beat either (paused, or the database stalled
        # or unreachable), so it cannot tell a dead replica from one that shared its stall.
        self._max_gap = (heartbeat_interval + replica_timeout) / 2
        self._last_beat: float | None = None
        self._steady_since: float | None = None
        self._cannot_end = False
        #: called when a run of beats that started after a break (a beat failed or came
        #: late, or another replica retired this one) has beaten twice, the second a fresh
        #: heartbeat: others may have counted this replica dead until then
        self.resumed: list[Callable[[], None]] = []
        self._resuming = False

    @property
    def registered(self) -> bool:
        """Whether this replica's row was ever inserted: before, it holds nothing to free."""
        return self._last_beat is not None

    def live_cutoff(self) -> Any:
        """Heartbeats after this time (an SQL expression, the database's clock) count as
        alive."""
        return db_seconds(self.engine) - self.replica_timeout

    async def register(self) -> None:
        """Insert this replica's row (called once at startup)."""
        # The row's heartbeat is the database's now when the insert runs: the beat is as
        # old as its statement, however late the answer (a pause, a wait for a lock).
        sent = time.monotonic()
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(replicas_table).values(
                    replica_id=self.replica_id,
                    hostname=socket.gethostname()[:255],
                    pid=os.getpid(),
                    started_at=time.time(),
                    heartbeat_at=db_seconds(self.engine),
                )
            )
        # The row's heartbeat is a beat: the quota slots leased from now on are this
        # replica's until a beat fails or grows old (steady()). Without it, every lease of
        # a replica's first heartbeat interval was taken for a paused one's and never
        # handed out again: a caller's streams at once past its quota were refused.
        self._last_beat = self._steady_since = sent

    async def heartbeat(self) -> None:
        """Refresh this replica's heartbeat (re-registering if another replica retired it)."""
        try:
            async with self.engine.begin() as conn:
                result = await conn.execute(self._beat(db_seconds(self.engine)))
            retired = result.rowcount == 0
            if retired:
                await self.register()
        except BaseException:
            self._steady_since = None
            raise
        now = time.monotonic()
        last, self._last_beat = self._last_beat, now
        if retired or self._steady_since is None or last is None or now - last > self._max_gap:
            self._steady_since = now
            # This beat's heartbeat dates from when it was sent, maybe long ago (it waited):
            # the others may count this replica dead until the next one.
            self._resuming = True
        elif self._resuming:
            self._resuming = False
            for listener in self.resumed:
                listener()
        self.beats += 1

    def steady(self) -> float | None:
        """Since when (monotonic seconds) this replica has beaten without a break, up to
        now; ``None`` when it has not (its last beat failed or is too old: another replica
        may count it dead). The run of beats must reach now: a beat still waiting (the
        table locked, the database hung, the process paused) fails only when it gives up,
        and meanwhile every heartbeat, this replica's too, grows old."""
        steady, last = self._steady_since, self._last_beat
        if steady is None or last is None or time.monotonic() - last > self._max_gap:
            return None
        return steady

    def dead_cutoff(self) -> Any:
        """Heartbeats at or before this time (an SQL expression) are dead ones: too old
        (:meth:`live_cutoff`) only while this replica has itself beaten without a break,
        up to now, for a whole ``replica_timeout`` (after a stall it shared, a live
        replica needs that long to beat again; a replica just started has not beaten
        yet), else only a clean shutdown's (:meth:`deregister`). Orphan recovery, at
        startup and in its loop, and the quota slots judge other replicas by it."""
        steady = self.steady()
        judge = steady is not None and time.monotonic() - steady >= self.replica_timeout
        # A heartbeat of 0 is a clean shutdown's, never a stall's.
        return self.live_cutoff() if judge else literal(_DEREGISTERED)

    async def dead(self) -> list[str]:
        """The ids of other replicas with a dead heartbeat (:meth:`dead_cutoff`)."""
        others = _R.replica_id != self.replica_id
        dead = select(_R.replica_id).where(_R.heartbeat_at <= self.dead_cutoff(), others)
        return [row[0] for row in await read(self.engine, dead)]

    async def end_sessions(self, replica_id: str) -> None:
        """End the PostgreSQL sessions of dead *replica_id* (its connections carry its id as
        their ``application_name``). A replica frozen in the middle of a statement (asyncpg
        prepares with Parse/Describe/Flush, then the server waits for the Bind, ``active``)
        holds the locks of its open transaction with no timeout of the server's to end it,
        and failing its tasks would wait for it to wake. Needs the same role as that
        replica (or ``pg_signal_backend``); without it, logged once and skipped."""
        if self.engine.dialect.name != "postgresql" or self._cannot_end:
            return
        try:
            async with self.engine.begin() as conn:
                ended = (
                    await conn.execute(_END_SESSIONS, {"name": REPLICA_APPLICATION + replica_id})
                ).scalar()
        except DBAPIError as exc:
            # Only a refusal is for good; anything else (this session ended by another
            # replica judging this one dead, a restart) is tried again at the next death.
            self._cannot_end = sqlstate(exc) == _NOT_ALLOWED
            logger.warning(
                "cannot end the sessions of dead replicas%s (%s): failing their tasks waits "
                "for the locks they hold",
                "" if self._cannot_end else " now",
                type(getattr(exc, "orig", exc)).__name__,
            )
            return
        if ended:
            logger.warning("ended %d session(s) of dead replica %s", ended, replica_id)

    async def deregister(self) -> None:
        """Mark this replica dead now so other replicas take over its orphans immediately."""
        async with self.engine.begin() as conn:
            await conn.execute(self._beat(_DEREGISTERED))

    def _beat(self, at: Any) -> Any:
        mine = _R.replica_id == self.replica_id
        return update(replicas_table).where(mine).values(heartbeat_at=at)

    async def retire(self, replica_id: str) -> None:
        """Drop a dead replica's row and claims (after its orphans were failed), unless it
        has beaten meanwhile: failing its orphans may have waited for one of its locks
        (paused mid-write), and once awake it claims new tasks."""
        async with self.engine.begin() as conn:
            still_dead = and_(_R.replica_id == replica_id, _R.heartbeat_at < self.live_cutoff())
            gone = await conn.execute(delete(replicas_table).where(still_dead))
            if gone.rowcount:
                claims = claims_table.c
                await conn.execute(delete(claims_table).where(claims.replica_id == replica_id))

    async def claim(self, task_id: str, owner: str) -> None:
        """Record that this replica runs *task_id* (idempotent, cached)."""
        if self._claimed.get(task_id):
            return
        stmt = upsert_of(self.engine)(claims_table).values(
            task_id=task_id, owner=owner, replica_id=self.replica_id
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[claims_table.c.task_id],
            set_={"owner": owner, "replica_id": self.replica_id},
        )
        async with self.engine.begin() as conn:
            await conn.execute(stmt)
        self._claimed[task_id] = True

    def release(self, task_id: str) -> None:
        """Forget the cached claim once the task leaves the running states (the row
        stays, harmless; a later resume writes a fresh claim)."""
        self._claimed.pop(task_id, None)

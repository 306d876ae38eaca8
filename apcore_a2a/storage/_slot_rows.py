"""The rows of the quota slots (``apcore_a2a_quota_slots``) and the statements taking one.

A limit of N is N slots numbered below N, and the primary key makes each take atomic. Rows
can also sit at N or above: a quota lowered while its caller held more (a replica started
or restarted with a lower setting; the tasks' rows outlive the old one), or a task counted
past its quota (a background rename finding all N taken, :class:`SlotRenames`). Those count
as much as the others: a take at N is served only while fewer than N rows are held,
whatever their numbers. The numbers alone no longer prove that, so while any such row is
there a take does not insert its random slot blindly (:data:`TAKE_SLOT`), and the takes
counting the rows take turns (an advisory lock per subject in the schema, :func:`turn_above`),
each counting after the last one's commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from a2a.server.models import TaskModel
from sqlalchemy import Column, Index, Integer, String, Table, delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ._replicas import METADATA
from ._urls import schema_key
from .outages import guarded
from .retention import FINISHED_NAMES, STATE

logger = logging.getLogger("apcore_a2a.storage")

#: the longest subject (a caller key, a task id) stored as it is
SUBJECT_CHARS = 255
#: Scope of the push-config slots: the subject is the task id (retention frees them).
PUSH_SCOPE = "push"
#: Scope of the unfinished-task quota (``server/task_quota.py``): a slot renamed to its
#: task's id is held until the task ends.
TASK_SCOPE = "task"

slots_table = Table(
    "apcore_a2a_quota_slots",
    METADATA,
    Column("scope", String(16), primary_key=True),
    Column("subject", String(SUBJECT_CHARS), primary_key=True),
    Column("slot", Integer, primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("replica_id", String(64), nullable=True),
    Index("ix_apcore_a2a_quota_slots_holder", "scope", "holder"),
)
_S = slots_table.c

# Whether a take inserted its row is read from RETURNING, not the row count: SQLite's
# driver reports -1 for a statement starting with WITH (issue 40), read as success.
# One given slot: most takes find a random slot free (a caller far below its quota), and
# no row at or above :limit (else the count decides: TAKE_FREE after turn_above).
TAKE_SLOT = text(
    """
    INSERT INTO apcore_a2a_quota_slots (scope, subject, slot, holder, replica_id)
    SELECT CAST(:scope AS VARCHAR), CAST(:subject AS VARCHAR), CAST(:slot AS INTEGER),
           CAST(:holder AS VARCHAR), CAST(:replica AS VARCHAR)
    WHERE NOT EXISTS (
        SELECT 1 FROM apcore_a2a_quota_slots s
        WHERE s.scope = :scope AND s.subject = :subject AND s.slot >= :limit
    )
    ON CONFLICT DO NOTHING
    RETURNING slot
    """
)
# Any free slot below :limit (a random one, so that racing takers rarely pick the same).
TAKE_FREE = text(
    """
    WITH RECURSIVE n(slot) AS (SELECT 0 UNION ALL SELECT slot + 1 FROM n WHERE slot + 1 < :limit)
    INSERT INTO apcore_a2a_quota_slots (scope, subject, slot, holder, replica_id)
    SELECT CAST(:scope AS VARCHAR), CAST(:subject AS VARCHAR), n.slot,
           CAST(:holder AS VARCHAR), CAST(:replica AS VARCHAR)
    FROM n
    WHERE NOT EXISTS (
        SELECT 1 FROM apcore_a2a_quota_slots s
        WHERE s.scope = :scope AND s.subject = :subject AND s.slot = n.slot
    )
    ORDER BY random() LIMIT 1
    ON CONFLICT DO NOTHING
    RETURNING slot
    """
)
# A given slot, whatever the rows above it (take_past's, past the quota).
_TAKE_GIVEN = text(
    "INSERT INTO apcore_a2a_quota_slots (scope, subject, slot, holder, replica_id) "
    "VALUES (:scope, :subject, :slot, :holder, :replica) ON CONFLICT DO NOTHING "
    "RETURNING slot"
)
# Settles of one holder take turns: the row this upsert writes is locked until its
# transaction ends (PostgreSQL's row lock, SQLite's write lock), which deletes it again.
TURN = text(
    "INSERT INTO apcore_a2a_quota_slots (scope, subject, slot, holder) "
    "VALUES (:scope, :subject, 0, '') "
    "ON CONFLICT (scope, subject, slot) DO UPDATE SET holder = excluded.holder"
)


def rows_past(scope: str, subject: str, limit: int) -> Any:
    """The query of one of *subject*'s rows at or above *limit*, if any."""
    above = (_S.scope == scope) & (_S.subject == subject) & (_S.slot >= limit)
    return select(_S.slot).where(above).limit(1)


# A subject's turn: its schema's own (agents of other schemas of the database count their
# own rows), scope and subject bound, never written into the SQL (a subject is a caller's).
_TURN_KEY = schema_key(
    "quota", "CAST(:turn_scope AS VARCHAR) || ' ' || CAST(:turn_subject AS VARCHAR)"
)
# For this release also the key the earlier ones counted under, one for the whole database:
# their replicas and this release's, side by side in a rolling upgrade, take turns
# (docs/deployment.md, *Upgrading replicas one by one*). The next release drops it. Taken
# second by every count here, so two of them never wait for each other's first.
_EARLIER_KEY = (
    "hashtext('apcore-a2a quota ' || CAST(:turn_scope AS VARCHAR) || ' ' "
    "|| CAST(:turn_subject AS VARCHAR))"
)
_WAIT_TURN = text(
    f"CAST(pg_advisory_xact_lock({_TURN_KEY}) AS VARCHAR) "
    f"|| CAST(pg_advisory_xact_lock({_EARLIER_KEY}) AS VARCHAR)"
)
_TRY_TURN = text(
    f"CAST(pg_try_advisory_xact_lock({_TURN_KEY}) "
    f"AND pg_try_advisory_xact_lock({_EARLIER_KEY}) AS VARCHAR)"
)


class SlotsBusy(Exception):
    """Another take is counting the rows of a subject that has rows past its quota (from
    :func:`take_below`: and fewer than the quota are held, so whether this take has room
    is known once that count ends)."""


async def turn_above(
    conn: AsyncConnection, scope: str, subject: str, limit: int, *, wait: bool = True
) -> None:
    """While any of *subject*'s rows is at or above *limit*, take the subject's turn to
    count them (a PostgreSQL advisory lock, until this transaction ends), waiting for the
    other takes counting them. Two takes counting at once would each see room for one
    more (a read sees only what is committed), and both insert. Without *wait*,
    :class:`SlotsBusy` at once instead: a caller's burst of requests would each hold a
    pooled connection while they wait, starving every other statement of the replica
    (its heartbeat too). One statement; SQLite, one writer at a time, takes no turn."""
    if conn.dialect.name != "postgresql":
        return
    lock = (_WAIT_TURN if wait else _TRY_TURN).bindparams(turn_scope=scope, turn_subject=subject)
    # Not a CASE: PostgreSQL may fold its branches; the lock runs only for a row found.
    turn = select(lock).select_from(rows_past(scope, subject, limit).subquery())
    taken = (await conn.execute(turn)).scalar_one_or_none()
    if taken == "false":
        raise SlotsBusy


async def take_below(
    conn: AsyncConnection, params: dict[str, Any], limit: int, *, wait: bool = True
) -> bool:
    """Take any free slot below *limit* for *params*' holder; ``False`` when *limit* rows
    (whatever their numbers) are held. *wait*: :func:`turn_above`'s; without it, a take
    meeting another's count is refused only if the caller is at its quota without this
    take's (what the other adds only adds to it), else :class:`SlotsBusy`."""
    of_subject = (_S.scope == params["scope"]) & (_S.subject == params["subject"])
    taken = select(func.count()).where(of_subject)
    take = TAKE_FREE.bindparams(limit=limit)
    try:
        await turn_above(conn, params["scope"], params["subject"], limit, wait=wait)
    except SlotsBusy:
        if (await conn.execute(taken)).scalar_one() >= limit:
            return False
        raise
    # A lost race for a free slot means another holder took one: within limit.
    while (await conn.execute(taken)).scalar_one() < limit:
        if (await conn.execute(take, params)).first() is not None:
            return True
    return False


async def take_past(
    conn: AsyncConnection, params: dict[str, Any], limit: int, what: str, why: str
) -> None:
    """Give *params*' holder a slot at or above *limit*: counted, past the quota (*what*:
    whose slot, for the WARNING; *why*: how its own was lost)."""
    of_subject = (_S.scope == params["scope"]) & (_S.subject == params["subject"])
    highest = select(func.max(_S.slot)).where(of_subject)
    while True:  # a slot another took meanwhile: the next one
        top = (await conn.execute(highest)).scalar_one()
        slot = max(limit, -1 if top is None else top + 1)
        if (await conn.execute(_TAKE_GIVEN, {**params, "slot": slot})).first() is not None:
            break
    logger.warning(
        "%s: its quota slot was freed while %s and all %d are taken now: it is counted "
        "past the quota until it ends",
        *(what, why, limit),
    )


async def task_finished(conn: AsyncConnection, task_id: str) -> bool:
    """Whether *task_id* is stored in a final state. Read under a share lock: its last
    save waits for this transaction, then gives back whatever slot this one left it."""
    stmt = select(STATE).where(TaskModel.id == task_id).with_for_update(read=True)
    state = (await conn.execute(stmt)).scalar_one_or_none()
    return state is not None and state in FINISHED_NAMES


async def still_mine(conn: AsyncConnection, scope: str, row: str, replica: str) -> bool:
    """Whether *row* is still there, leased to *replica*. An update, not a read: a free of
    the row under way (its delete) is waited for."""
    stmt = update(slots_table).where(_S.scope == scope, _S.holder == row, _S.replica_id == replica)
    return bool((await conn.execute(stmt.values(replica_id=replica))).rowcount)


async def retake(conn: AsyncConnection, params: dict[str, Any], limit: int) -> None:
    """See that *params*' row, leased to its replica, is still there, or take it again:
    below *limit* if a slot is free, else past it."""
    if await still_mine(conn, params["scope"], params["holder"], params["replica"]):
        return
    if not await take_below(conn, params, limit):
        what = f"a {params['scope']} slot"  # the caller's key stays out of the log
        await take_past(conn, params, limit, what, "this replica could not beat")


# A quota slot handed to its task, and the retries of the hand-overs the database did not take.
#
# A slot taken for a request whose task is left unfinished is renamed to the task's id: the
# task keeps it until it gives it back, or recovery fails the task. A rename the database did
# not take (an outage, a lost connection) is retried every :data:`RETRY_SECONDS` until it
# does, and a give-back under the new name frees the row meanwhile (``quota_slots.py``,
# ``give_back`` and ``settle``): the slot is never freed while its owner runs, nor held for
# ever. Once the replica stopped, nothing is retried: such a slot is freed as a dead
# replica's. A rename whose row is gone (freed as a dead replica's while this one was paused)
# takes a fresh slot, or reports that none is free (the request then cancels its task,
# ``server/handler.py``). A retry, whose request has ended, keeps the task counted past the
# quota instead, and frees the slot of a task that ended before it ran.
#: Seconds between two tries of the renames the database did not take.
RETRY_SECONDS = 1.0


def rename_row(scope: str, row: str, new: str) -> Any:
    """The update handing the slot of *row* to *new* (no longer leased to a replica)."""
    stmt = update(slots_table).where(_S.scope == scope, _S.holder == row)
    return stmt.values(holder=new, replica_id=None)


class SlotRenames:
    """The renames of one process's slots, and the retries of those the database did not
    take. *held*: the process's rows leased to its replica (``SqlQuotaSlots._held``), one
    forgotten once renamed; *start*: runs the retries in the background (none once stopped)."""

    def __init__(
        self,
        engine: AsyncEngine,
        held: set[str],
        start: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.engine = engine
        self._held = held
        self._start = start
        #: (scope, new holder) -> (row holder, subject if known, limit) of the renames the
        #: database has not taken
        self.pending: dict[tuple[str, str], tuple[str, str | None, int]] = {}

    def row_of(self, scope: str, new: str) -> str | None:
        """The row of *new*'s rename the database has not taken, if any."""
        pending = self.pending.get((scope, new))
        return pending[0] if pending else None

    async def rename(self, scope: str, row: str, new: str, subject: str | None, limit: int) -> bool:
        """Hand the slot of *row* (of *subject*, if known) to *new*; ``False`` when the slot
        was freed meanwhile and all *limit* slots are taken now."""
        try:
            renamed = await guarded(self._rename_or_take(scope, row, new, subject, limit))
            self._held.discard(row)
            return renamed
        except BaseException:
            # The row may still name the request, which gives back nothing now: it is
            # *new*'s, renamed once the database is back (or freed by *new*'s give-back).
            self.pending[(scope, new)] = (row, subject, limit)
            if len(self.pending) == 1:
                self._start(self._retry_renames())
            raise

    async def _rename_or_take(
        self, scope: str, row: str, new: str, subject: str | None, limit: int
    ) -> bool:
        async with self.engine.begin() as conn:
            return await self._renamed_in(conn, scope, row, new, subject, limit)

    async def _renamed_in(
        self, conn: AsyncConnection, scope: str, row: str, new: str, subject: str | None, limit: int
    ) -> bool:
        if (await conn.execute(rename_row(scope, row, new))).rowcount or not subject:
            return True
        # The row is gone: freed as a dead replica's while this one was paused (its
        # heartbeats stopped), and maybe taken by another request since; or renamed
        # already, by a try whose answer was lost (a retry's). Without a slot of its
        # own the task would count for nothing.
        named = select(func.count()).where(_S.scope == scope, _S.holder == new)
        if (await conn.execute(named)).scalar_one():
            return True
        params = dict(scope=scope, subject=subject, holder=new, replica=None)
        return await take_below(conn, params, limit)

    async def _retry_renames(self) -> None:
        while self.pending:
            await asyncio.sleep(RETRY_SECONDS)
            await self.renamed()

    async def renamed(self) -> None:
        """Try the renames the database has not taken, up to the first it refuses."""
        for (scope, new), (row, subject, limit) in list(self.pending.items()):
            try:
                async with self.engine.begin() as conn:
                    await self._retried(conn, scope, row, new, subject, limit)
            except Exception as exc:  # still an outage: tried again later
                logger.debug("could not rename a quota slot: %s", type(exc).__name__)
                return
            self.forget(scope, new, row)

    async def _retried(
        self, conn: AsyncConnection, scope: str, row: str, new: str, subject: str | None, limit: int
    ) -> None:
        """One retry of a rename, whose request has ended: nobody is left to answer."""
        if scope == TASK_SCOPE and await task_finished(conn, new):
            # It ended meanwhile, maybe on another replica, whose give-back found no row
            # of its name yet: renamed now, or given a fresh slot, it would hold it for ever.
            await conn.execute(
                delete(slots_table).where(_S.scope == scope, _S.holder.in_([row, new]))
            )
            return
        if await self._renamed_in(conn, scope, row, new, subject, limit) or not limit:
            return
        # All taken (the row freed as a dead replica's while the database was out of
        # reach, and the slot taken since). Canceling the task would end a run its caller
        # was told had started, for the agent's own outage; it is kept and counted past the
        # quota instead, so the caller's next new task waits until it is back under.
        assert subject is not None  # a rename without one updated its row or took nothing
        params = dict(scope=scope, subject=subject, holder=new, replica=None)
        await take_past(conn, params, limit, f"{scope} {new}", "the database was out of reach")

    def forget(self, scope: str, new: str, row: str) -> None:
        """*new*'s rename of *row* is done (taken, or the slot freed): not retried."""
        if self.pending.get((scope, new), (None,))[0] == row:
            del self.pending[(scope, new)]
            self._held.discard(row)

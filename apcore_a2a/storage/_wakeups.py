"""Wake-ups for event subscribers: read the event table when it has news, not on a timer.

The event table stays the source of truth; a wake-up only tells a subscriber to read it.
Subscribers never poll themselves: one safety poll per process (:class:`SafetyPoll`)
asks for the newest event of every followed task in one query, and wakes the
subscribers that are behind. While wake-ups flow it runs every :data:`SAFETY_POLL`
seconds; without them (off, not installable, the connection lost) every
``cluster_poll_interval``, switching at once when the listening connection drops.

* :class:`WakeHub` — the subscribers of one process, by task id, each with its cursor.
* :class:`PgListener` — PostgreSQL: an ``AFTER INSERT`` trigger on ``task_events`` calls
  ``pg_notify`` on the schema's own channel with ``"<task id> <seq>"``; one ``LISTEN``
  connection per process (asyncpg, outside the pool) wakes that task's subscribers that
  have not read that far. A notification naming no followed task costs nothing. A
  trigger rather than a ``NOTIFY`` issued by our writes: it fires for every writer (a
  plain a2a-sdk replica too), inside the writing transaction, so the notification is
  delivered only at commit, when the row is readable.
* :class:`FileWatcher` — SQLite: while anyone subscribes, ``stat()`` the database file and
  its ``-wal`` every few milliseconds (no query, no lock) and wake everyone on a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "SAFETY_POLL",
    "FileWatcher",
    "PgListener",
    "SafetyPoll",
    "WakeHub",
    "channel_sql",
    "install_notify_trigger",
]

logger = logging.getLogger(__name__)

#: Seconds between safety polls while wake-ups flow (one query per process, any number
#: of subscribers).
SAFETY_POLL = 5.0
#: Seconds between ``stat()`` calls of the SQLite watcher.
FILE_WATCH_INTERVAL = 0.005
_TRIGGER = "apcore_a2a_task_events_notify"
_LOCK_KEY = 0x0A2A_5EED


def channel_sql(schema: str) -> str:
    """SQL for the ``NOTIFY`` channel of the store in *schema* (an SQL expression).

    ``apcore_a2a_`` + md5 of the schema name: one channel per store, whatever the length
    of the schema's name (channel names stop at 63 bytes).
    """
    return f"'apcore_a2a_' || md5({schema})"


class Waiter(asyncio.Event):
    """One subscriber: set when its task has events after ``cursor`` (its last read)."""

    cursor = 0


class WakeHub:
    """The waiting subscribers of one process; ``wake`` sets those that are behind."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[Waiter]] = {}
        self.count = 0
        #: called when the first subscriber registers (start watchers and polls)
        self.on_first: list[Callable[[], None]] = []

    def register(self, task_id: str) -> Waiter:
        waiter = Waiter()
        self._waiters.setdefault(task_id, set()).add(waiter)
        self.count += 1
        if self.count == 1:
            for start in self.on_first:
                start()
        return waiter

    def unregister(self, task_id: str, waiter: asyncio.Event) -> None:
        waiters = self._waiters.get(task_id)
        if waiters is None or not isinstance(waiter, Waiter) or waiter not in waiters:
            return
        waiters.discard(waiter)
        self.count -= 1
        if not waiters:
            del self._waiters[task_id]

    def followed(self) -> list[str]:
        """The task ids someone here waits on."""
        return list(self._waiters)

    def wake(self, task_id: str, seq: int | None = None) -> None:
        """Wake *task_id*'s subscribers (those whose cursor is before *seq*, if given)."""
        for waiter in self._waiters.get(task_id, ()):
            if seq is None or waiter.cursor < seq:
                waiter.set()

    def wake_all(self) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.set()


async def install_notify_trigger(engine: AsyncEngine, table: str = "task_events") -> None:
    """Create or update (once; replicas may race) the trigger that NOTIFYs on inserts."""
    function = f"{_TRIGGER}_fn"
    channel = channel_sql("TG_TABLE_SCHEMA")
    async with engine.begin() as conn:
        await conn.execute(text(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})"))
        await conn.execute(
            text(
                f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN "
                f"PERFORM pg_notify({channel}, NEW.task_id || ' ' || NEW.seq); "
                "RETURN NULL; END $$"
            )
        )
        exists = await conn.execute(
            text(
                "SELECT 1 FROM pg_trigger WHERE tgname = :name "
                "AND tgrelid = CAST(:table AS regclass)"
            ),
            {"name": _TRIGGER, "table": table},
        )
        if exists.first() is None:
            await conn.execute(
                text(
                    f"CREATE TRIGGER {_TRIGGER} AFTER INSERT ON {table} "
                    f"FOR EACH ROW EXECUTE FUNCTION {function}()"
                )
            )


class _Loop(ABC):
    """One named background task: started on demand (again once it has ended), stopped
    by :meth:`aclose`."""

    _name = ""
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
            self._task.set_name(self._name)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @abstractmethod
    async def _run(self) -> None:
        """The loop itself."""


class PgListener(_Loop):
    """One ``LISTEN`` connection that wakes the hub; reconnects until stopped."""

    _name = "apcore-a2a-store-listen"

    def __init__(
        self,
        hub: WakeHub,
        connect: Callable[[], Awaitable[Any]],
        *,
        table: str = "task_events",
        retry_delay: float = 5.0,
    ) -> None:
        self.hub = hub
        self._connect = connect
        self._table = table
        self._retry_delay = retry_delay
        #: set while notifications flow; cleared the moment the connection is lost
        self.live = asyncio.Event()
        #: set when the connection is lost (the safety poll speeds up at once)
        self.lost = asyncio.Event()

    async def _run(self) -> None:
        failures = 0
        while True:
            conn: Any = None
            try:
                conn = await self._connect()
                await self._listen(conn)
                failures = 0
                logger.info("event LISTEN connection lost; reconnecting")
            except Exception as exc:  # asyncpg's errors share no base class with OSError
                failures += 1
                logger.warning("event LISTEN connection failed: %s", type(exc).__name__)
            finally:
                self._gone()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.terminate()
            # Reconnect at once after a loss, then back off while the database is away.
            await asyncio.sleep(min(self._retry_delay, 0.05 * (2**failures) - 0.05))

    def _gone(self) -> None:
        if self.live.is_set():
            self.live.clear()
            self.lost.set()

    async def _listen(self, conn: Any) -> None:
        closed = asyncio.Event()

        def terminated(_conn: Any) -> None:
            self._gone()
            closed.set()

        conn.add_termination_listener(terminated)
        channel = await conn.fetchval(
            f"SELECT {channel_sql('n.nspname')} FROM pg_class c JOIN pg_namespace n "  # noqa: S608
            "ON n.oid = c.relnamespace WHERE c.oid = CAST($1 AS regclass)",
            self._table,
        )
        await conn.add_listener(channel, self._notified)
        self.live.set()
        # Events written while nobody listened: read them now, not at the next poll.
        self.hub.wake_all()
        await closed.wait()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        task_id, _, seq = payload.rpartition(" ")
        if task_id and seq.isdigit():
            self.hub.wake(task_id, int(seq))


class SafetyPoll(_Loop):
    """While anyone subscribes: one query for the newest event of every followed task
    (*heads*), waking the subscribers behind it; slow while *live* is set."""

    _name = "apcore-a2a-store-poll"

    def __init__(
        self,
        hub: WakeHub,
        heads: Callable[[list[str]], Awaitable[dict[str, int]]],
        *,
        interval: float,
        listener: PgListener | None,
    ) -> None:
        self.hub = hub
        self._heads = heads
        self._interval = interval
        self._listener = listener
        hub.on_first.append(self.start)

    async def _run(self) -> None:
        listener = self._listener
        while self.hub.count > 0:
            live = listener is not None and listener.live.is_set()
            if listener is not None and live:
                listener.lost.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(listener.lost.wait(), max(SAFETY_POLL, self._interval))
            else:
                await asyncio.sleep(self._interval)
            followed = self.hub.followed()
            if not followed:
                continue
            try:
                heads = await self._heads(followed)
            except Exception as exc:  # an outage: the subscribers' own reads report it
                logger.debug("safety poll failed: %s", type(exc).__name__)
                continue
            for task_id, seq in heads.items():
                self.hub.wake(task_id, seq)


class FileWatcher(_Loop):
    """Wakes the hub when the SQLite file or its WAL changes, while anyone subscribes."""

    _name = "apcore-a2a-store-watch"

    def __init__(self, hub: WakeHub, path: str, *, interval: float = FILE_WATCH_INTERVAL) -> None:
        self.hub = hub
        self._paths = (path, f"{path}-wal")
        self._interval = interval
        hub.on_first.append(self.start)

    def _signature(self) -> tuple[tuple[int, int, int], ...]:
        marks = []
        for path in self._paths:
            try:
                st = os.stat(path)
            except OSError:
                marks.append((0, 0, 0))
            else:
                marks.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(marks)

    async def _run(self) -> None:
        # stat() of a local file takes microseconds: cheaper than a thread hop.
        seen = self._signature()
        while self.hub.count > 0:
            await asyncio.sleep(self._interval)
            now = self._signature()
            if now != seen:
                seen = now
                self.hub.wake_all()

"""Wake-ups for cluster event subscribers: read the event table now, not at the next poll.

The event table stays the source of truth; a wake-up only tells subscribers to read it
earlier. A wake-up that is lost costs at most one ``cluster_poll_interval``, never an
event, because every subscriber still polls at that interval.

* :class:`WakeHub` — the subscribers of one process, by task id.
* :class:`PgListener` — PostgreSQL: an ``AFTER INSERT`` trigger on ``task_events`` calls
  ``pg_notify`` with the task id; one ``LISTEN`` connection per process (asyncpg, outside
  the pool) wakes that task's subscribers. A trigger rather than a ``NOTIFY`` issued by our
  writes: it fires for every writer (a plain a2a-sdk replica too), inside the writing
  transaction, so the notification is delivered only at commit, when the row is readable.
  The connection reconnects by itself and wakes everyone after each (re)connect.
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

__all__ = ["CHANNEL", "FileWatcher", "PgListener", "WakeHub", "install_notify_trigger"]

logger = logging.getLogger(__name__)

#: The PostgreSQL ``NOTIFY`` channel; the payload is a task id ('' wakes every task).
CHANNEL = "apcore_a2a_task_events"
#: pg_notify refuses payloads of 8000 bytes or more (and would fail the event's insert).
_MAX_PAYLOAD = 7000
#: Seconds between ``stat()`` calls of the SQLite watcher.
FILE_WATCH_INTERVAL = 0.005
_TRIGGER = "apcore_a2a_task_events_notify"
_LOCK_KEY = 0x0A2A_5EED


class WakeHub:
    """The waiting subscribers of one process; ``wake`` sets their events."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self.count = 0
        #: called when the first subscriber registers (starts a watcher)
        self.on_first: Callable[[], None] | None = None

    def register(self, task_id: str) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters.setdefault(task_id, set()).add(event)
        self.count += 1
        if self.count == 1 and self.on_first is not None:
            self.on_first()
        return event

    def unregister(self, task_id: str, event: asyncio.Event) -> None:
        waiters = self._waiters.get(task_id)
        if waiters is None or event not in waiters:
            return
        waiters.discard(event)
        self.count -= 1
        if not waiters:
            del self._waiters[task_id]

    def wake(self, task_id: str) -> None:
        if not task_id:
            self.wake_all()
            return
        for event in self._waiters.get(task_id, ()):
            event.set()

    def wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()


async def install_notify_trigger(engine: AsyncEngine, table: str = "task_events") -> None:
    """Create (once; replicas may race) the trigger that NOTIFYs on *table* inserts."""
    function = f"{_TRIGGER}_fn"
    async with engine.begin() as conn:
        await conn.execute(text(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})"))
        await conn.execute(
            text(
                f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN "
                f"PERFORM pg_notify('{CHANNEL}', CASE WHEN octet_length(NEW.task_id) "
                f"<= {_MAX_PAYLOAD} THEN NEW.task_id ELSE '' END); "
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
        retry_delay: float = 5.0,
    ) -> None:
        self.hub = hub
        self._connect = connect
        self._retry_delay = retry_delay
        #: the backend pid of the listening connection while connected
        self.backend_pid: int | None = None
        #: how many times it has connected (1 after the first connect)
        self.connects = 0

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
                self.backend_pid = None
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.terminate()
            # Reconnect at once after a loss, then back off while the database is away.
            await asyncio.sleep(min(self._retry_delay, 0.05 * (2**failures) - 0.05))

    async def _listen(self, conn: Any) -> None:
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        await conn.add_listener(CHANNEL, self._notified)
        self.backend_pid = conn.get_server_pid()
        self.connects += 1
        # Events written while nobody listened: read them now, not at the next poll.
        self.hub.wake_all()
        await lost.wait()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.hub.wake(payload)


class FileWatcher(_Loop):
    """Wakes the hub when the SQLite file or its WAL changes, while anyone subscribes."""

    _name = "apcore-a2a-store-watch"

    def __init__(self, hub: WakeHub, path: str, *, interval: float = FILE_WATCH_INTERVAL) -> None:
        self.hub = hub
        self._paths = (path, f"{path}-wal")
        self._interval = interval
        hub.on_first = self.start

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

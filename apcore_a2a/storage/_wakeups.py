"""Wake-ups for event subscribers: read the event table when it has news, not on a timer.

The SDK's ``DatabaseTaskEventStream.subscribe`` sleeps ``poll_interval_s`` after every
empty read, with no hook to wake it; :class:`WakingTaskEventStream` keeps its table and
version semantics and sleeps "until woken" instead (the mechanisms, and why a trigger:
``docs/storage.md``, *Wake-ups and latency*).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, MutableMapping
from functools import partial
from typing import Any

from a2a.server.cluster import DatabaseTaskEventStream, TaskVersion, VersionedEvent
from a2a.server.cluster.database_event_stream import stream_response_to_event
from a2a.server.events.event_queue import Event
from a2a.server.models import TaskEventModel as _E
from a2a.types.a2a_pb2 import StreamResponse
from sqlalchemy import Column, String, Table, select, text
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.upstream.sql_task_rows import version_number

from ._pg_writer import pg_connect
from ._replicas import METADATA
from ._urls import StoreURL, read, schema_key
from .event_index import in_order, latest, of_task

logger = logging.getLogger(__name__)

#: Seconds between safety polls while wake-ups flow (one query per process).
SAFETY_POLL = 5.0
#: Seconds between ``stat()`` calls of the SQLite watcher.
FILE_WATCH_INTERVAL = 0.005
#: events read per query: a replay of a long task holds one page at a time
PAGE_SIZE = 100
#: ``application_name`` of the LISTEN connection, followed by the schema (or database).
LISTEN_APPLICATION = "apcore-a2a listen"
_TRIGGER = "apcore_a2a_task_events_notify"
#: the schema's own: one key for the database held every schema's starts behind one stuck
_LOCK_KEY = schema_key("notify trigger")


#: The store's channel secret (its own table, beside the replicas'): the channel is
#: ``apcore_a2a_`` + this, so only a role that can read this table can LISTEN to the
#: store's wake-ups (``docs/storage.md``, *Wake-ups and latency*).
secrets_table = Table(
    "apcore_a2a_secrets",
    METADATA,
    Column("name", String(32), primary_key=True),
    Column("value", String(64), nullable=False),
)
_CHANNEL = "SELECT 'apcore_a2a_' || value FROM apcore_a2a_secrets WHERE name = 'channel'"


class Waiter(asyncio.Event):
    """One subscriber: set when its task has events after ``cursor`` (its last read), or
    when they are all gone (``gone``: retention purged the task)."""

    cursor = 0
    gone = False


class WakeHub:
    """The waiting subscribers of one process; ``wake`` sets those that are behind."""

    def __init__(self) -> None:
        #: task id -> its waiting subscribers
        self.waiters: dict[str, set[Waiter]] = {}
        #: called when the first subscriber registers (start watchers and polls)
        self.on_first: list[Callable[[], None]] = []

    def register(self, task_id: str) -> Waiter:
        """A new subscriber of *task_id* (the first of all starts the watchers and polls)."""
        first = not self.waiters
        waiter = Waiter()
        self.waiters.setdefault(task_id, set()).add(waiter)
        if first:
            for start in self.on_first:
                start()
        return waiter

    def unregister(self, task_id: str, waiter: Waiter) -> None:
        waiters = self.waiters.get(task_id, set())
        waiters.discard(waiter)
        if not waiters:
            self.waiters.pop(task_id, None)

    def wake(self, task_id: str, seq: int | None = None) -> None:
        """Wake *task_id*'s subscribers (those whose cursor is before *seq*, if given)."""
        for waiter in self.waiters.get(task_id, ()):
            if seq is None or waiter.cursor < seq:
                waiter.set()

    def wake_all(self) -> None:
        for task_id in self.waiters:
            self.wake(task_id)


async def _install_notify_trigger(engine: AsyncEngine) -> None:
    """Create the channel secret (once) and create or update the trigger that NOTIFYs on
    inserts; replicas may race, hence the lock."""
    function = f"{_TRIGGER}_fn"
    async with engine.begin() as conn:
        await conn.execute(text(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})"))
        await conn.run_sync(secrets_table.create, checkfirst=True)
        await conn.execute(text("REVOKE ALL ON apcore_a2a_secrets FROM PUBLIC"))
        await conn.execute(
            text(
                "INSERT INTO apcore_a2a_secrets (name, value) VALUES ('channel', :value) "
                "ON CONFLICT DO NOTHING"
            ),
            {"value": secrets.token_hex(16)},
        )
        quoted = await conn.execute(text("SELECT quote_ident(current_schema())"))
        schema: str = quoted.scalar_one()
        # The body names the secret's table, not the secret (anyone can read function
        # bodies); it runs as its owner, so any writer of task_events (a plain SDK replica
        # under another role) still notifies. The schema name was quoted by the server.
        secret = f"(SELECT 'apcore_a2a_' || value FROM {schema}.apcore_a2a_secrets"  # noqa: S608
        body = f"PERFORM pg_notify({secret} WHERE name = 'channel'), NEW.task_id || ' ' || NEW.seq)"
        await conn.execute(
            text(
                f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql "
                f"SECURITY DEFINER SET search_path = pg_catalog AS $$ BEGIN {body}; "
                "RETURN NULL; END $$"
            )
        )
        exists = await conn.execute(
            text(
                "SELECT 1 FROM pg_trigger WHERE tgname = :name "
                "AND tgrelid = CAST('task_events' AS regclass)"
            ),
            {"name": _TRIGGER},
        )
        if exists.first() is None:
            await conn.execute(
                text(
                    f"CREATE TRIGGER {_TRIGGER} AFTER INSERT ON task_events "
                    f"FOR EACH ROW EXECUTE FUNCTION {function}()"
                )
            )


class BackgroundLoop:
    """One named background task (``_run``): started on demand (again once it has ended),
    canceled and awaited by :meth:`aclose`."""

    _name = ""
    _task: asyncio.Task[None] | None = None
    _run: Callable[[], Coroutine[Any, Any, None]]

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=self._name)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class PgListener(BackgroundLoop):
    """One ``LISTEN`` connection that wakes the hub; reconnects until stopped."""

    _name = "apcore-a2a-store-listen"

    def __init__(self, hub: WakeHub, connect: Callable[[], Awaitable[Any]]) -> None:
        self.hub = hub
        self._connect = connect
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
            await asyncio.sleep(min(5.0, 0.05 * (2**failures) - 0.05))

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
        await conn.add_listener(await conn.fetchval(_CHANNEL), self._notified)
        self.live.set()
        # Events written while nobody listened: read them now, not at the next poll.
        self.hub.wake_all()
        await closed.wait()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        task_id, _, seq = payload.rpartition(" ")
        if task_id and seq.isdigit():
            self.hub.wake(task_id, int(seq))


class SafetyPoll(BackgroundLoop):
    """While anyone subscribes: one query for the newest event of every followed task
    (*heads*), waking the subscribers behind it; slow while the listener is live."""

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
        self.listener = listener
        hub.on_first.append(self.start)

    async def _run(self) -> None:
        while self.hub.waiters:
            listener = self.listener
            if listener is not None and listener.live.is_set():
                listener.lost.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(listener.lost.wait(), max(SAFETY_POLL, self._interval))
            else:
                await asyncio.sleep(self._interval)
            followed = list(self.hub.waiters)
            if not followed:
                continue
            try:
                heads = await self._heads(followed)
            except Exception as exc:  # an outage: the subscribers' own reads report it
                logger.debug("safety poll failed: %s", type(exc).__name__)
                continue
            for task_id, seq in heads.items():
                self.hub.wake(task_id, seq)
            # A task whose subscriber read some of its events has none left: retention
            # purged it (on any replica) before the subscriber read its end, which no
            # event will ever bring now; its subscription ends instead of waiting.
            for task_id in set(followed) - heads.keys():
                for waiter in self.hub.waiters.get(task_id, ()):
                    if waiter.cursor > 0:
                        waiter.gone = True
                        waiter.set()


class FileWatcher(BackgroundLoop):
    """Wakes the hub when the SQLite file or its WAL changes, while anyone subscribes."""

    _name = "apcore-a2a-store-watch"

    def __init__(self, hub: WakeHub, path: str) -> None:
        self.hub = hub
        self._paths = (path, f"{path}-wal")
        hub.on_first.append(self.start)

    def _signature(self) -> list[tuple[int, int, int]]:
        marks = []
        for path in self._paths:
            try:
                st = os.stat(path)
            except OSError:
                marks.append((0, 0, 0))
            else:
                marks.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return marks

    async def _run(self) -> None:
        # stat() of a local file takes microseconds: cheaper than a thread hop.
        seen = self._signature()
        while self.hub.waiters:
            await asyncio.sleep(FILE_WATCH_INTERVAL)
            now = self._signature()
            if now != seen:
                seen = now
                self.hub.wake_all()


class WakingTaskEventStream(DatabaseTaskEventStream):
    """A ``DatabaseTaskEventStream`` (default table) whose subscribers are woken by new
    events."""

    def __init__(
        self,
        engine: AsyncEngine,
        store_url: StoreURL,
        *,
        poll_interval_s: float,
        wakeups: bool,
        noted: MutableMapping[tuple[str, int], int],
    ) -> None:
        super().__init__(engine, poll_interval_s=poll_interval_s)
        self.engine = engine
        #: (task id, version) -> event id, noted by the save that inserted it
        #: (``streamed.py``); :meth:`seq_at` takes an entry instead of reading it
        self.noted = noted
        self.poll_interval = poll_interval_s
        self.hub = WakeHub()
        self.listener: PgListener | None = None
        self.watcher: FileWatcher | None = None
        self._ready = False
        if wakeups and store_url.kind == "postgresql":
            self.listener = PgListener(self.hub, partial(pg_connect, store_url, LISTEN_APPLICATION))
        elif wakeups and store_url.sqlite_path is not None:
            self.watcher = FileWatcher(self.hub, store_url.sqlite_path)
        self.poll = SafetyPoll(
            self.hub, self._heads, interval=poll_interval_s, listener=self.listener
        )

    async def initialize(self) -> None:
        await super().initialize()
        if self._ready or self.listener is None:
            return
        self._ready = True
        try:
            await _install_notify_trigger(self.engine)
        except ProgrammingError as exc:  # e.g. no right to create a function or trigger
            logger.warning(
                "cannot install the task_events NOTIFY trigger (%s); cluster streams poll "
                "every %s s",
                str(getattr(exc, "orig", exc)).splitlines()[0][:200],
                self.poll_interval,
            )
            self.listener = self.poll.listener = None
            return
        self.listener.start()

    async def aclose(self) -> None:
        """Stop the listening connection, the file watcher and the safety poll."""
        for loop in (self.listener, self.watcher, self.poll):
            if loop is not None:
                await loop.aclose()

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """The SDK hands each event here once its save committed: wake this process's
        subscribers of the task now (the row is in the table; other processes hear of it
        through the listener, the file watch or the safety poll)."""
        del event
        self.hub.wake(task_id)

    async def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        """Events of *task_id* newer than *after*, in table order, each once."""
        cursor = await self.seq_at(task_id, after)
        async for _seq, version, event in self.tail(task_id, cursor):
            if version.is_after(after):
                yield VersionedEvent(event=event, version=version)

    async def head(self, task_id: str) -> int:
        """The event id (table ``seq``) of *task_id*'s latest event (0: none)."""
        await self.initialize()
        rows = await read(self.engine, latest(task_id))
        return int(rows[0][0]) if rows else 0

    async def seq_at(self, task_id: str, version: TaskVersion) -> int:
        """The event id (table ``seq``) of *task_id* at *version* (0: before the first)."""
        if version.is_missing:
            return 0
        noted = self.noted.pop((task_id, version_number(version)), None)
        if noted is not None:  # the save that made *version* inserted this event
            return noted
        stmt = latest(task_id).where(_E.task_version <= version_number(version))
        rows = await read(self.engine, stmt)
        return int(rows[0][0]) if rows else 0

    async def tail(
        self, task_id: str, after_seq: int, *, until_idle: bool = False
    ) -> AsyncGenerator[tuple[int, TaskVersion, Event], None]:
        """``(seq, version, event)`` of *task_id* after *after_seq*, then as they come;
        with *until_idle*, stop at the first read that finds nothing new."""
        await self.initialize()
        woken = self.hub.register(task_id)
        woken.cursor = after_seq
        try:
            while True:
                woken.clear()
                stmt = (
                    select(_E.seq, _E.task_version, _E.event_data)
                    .where(of_task(task_id), _E.seq > woken.cursor)
                    .order_by(*in_order())
                    .limit(PAGE_SIZE)
                )
                try:
                    rows = await read(self.engine, stmt)
                except OperationalError:
                    logger.debug("Transient DB error reading events of %s", task_id, exc_info=True)
                    await asyncio.sleep(self.poll_interval)
                    continue
                for seq, task_version, event_data in rows:
                    woken.cursor = seq
                    response = StreamResponse()
                    response.ParseFromString(event_data)
                    yield seq, TaskVersion(task_version), stream_response_to_event(response)
                if not rows:
                    if until_idle or woken.gone:
                        return
                    await woken.wait()
        finally:
            self.hub.unregister(task_id, woken)

    async def _heads(self, task_ids: list[str]) -> dict[str, int]:
        # The latest event of each task, one index entry each: a maximum over each task's
        # rows read all of them at every poll (event_index.py).
        heads: dict[str, int] = {}
        for start in range(0, len(task_ids), 500):
            chunk = task_ids[start : start + 500]
            heads_of = [latest(task_id).scalar_subquery() for task_id in chunk]
            [row] = await read(self.engine, select(*heads_of))
            heads.update(
                (task_id, int(seq))
                for task_id, seq in zip(chunk, row, strict=True)
                if seq is not None
            )
        return heads

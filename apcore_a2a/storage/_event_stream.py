"""The SDK's ``DatabaseTaskEventStream`` with wake-ups (see :mod:`._wakeups`).

The SDK's ``subscribe`` reads the event table, then sleeps ``poll_interval_s`` whenever it
found nothing; it has no hook for an earlier wake-up. :class:`WakingTaskEventStream` keeps
its table (the SDK's ``TaskEventModel``), cursor and version semantics, and replaces that
sleep by "until woken": by a notification, the SQLite file watch, or the process's one
safety poll. The subscriber's event is cleared *before* each read, so a wake-up that
arrives during the read is not lost. Replicas without wake-ups (or plain a2a-sdk
replicas) on the same database interoperate: they still poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.cluster import DatabaseTaskEventStream, TaskVersion, VersionedEvent
from a2a.server.cluster.database_event_stream import stream_response_to_event
from a2a.server.events.event_queue import Event
from a2a.server.models import TaskEventModel
from a2a.types.a2a_pb2 import StreamResponse
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from apcore_a2a.upstream.task_version import version_number

from ._engine import READ_ONLY
from ._pg_writer import pg_connect
from ._urls import StoreURL
from ._wakeups import FileWatcher, PgListener, SafetyPoll, WakeHub, install_notify_trigger

__all__ = ["LISTEN_APPLICATION", "PAGE_SIZE", "WakingTaskEventStream"]

#: events read per query: a replay of a long task holds one page at a time
PAGE_SIZE = 100
#: ``application_name`` of the LISTEN connection, followed by the schema (or database).
LISTEN_APPLICATION = "apcore-a2a listen"

logger = logging.getLogger(__name__)

_E = TaskEventModel


class WakingTaskEventStream(DatabaseTaskEventStream):
    """A ``DatabaseTaskEventStream`` whose subscribers are woken by new events."""

    def __init__(
        self, engine: AsyncEngine, store_url: StoreURL, *, poll_interval_s: float, wakeups: bool
    ) -> None:
        super().__init__(engine, poll_interval_s=poll_interval_s)
        self.engine = engine
        self.poll_interval = poll_interval_s
        self.hub = WakeHub()
        self.listener: PgListener | None = None
        self.watcher: FileWatcher | None = None
        self._store_url = store_url
        self._ready = False
        if wakeups and store_url.kind == "postgresql":
            self.listener = PgListener(self.hub, self._pg_connect)
        elif wakeups and store_url.sqlite_path is not None:
            self.watcher = FileWatcher(self.hub, store_url.sqlite_path)
        self.poll = SafetyPoll(
            self.hub, self._heads, interval=poll_interval_s, listener=self.listener
        )

    async def initialize(self) -> None:
        await super().initialize()
        if self._ready:
            return
        self._ready = True
        if self.listener is None:
            return
        try:
            await install_notify_trigger(self.engine)
        except ProgrammingError as exc:  # e.g. no right to create a function or trigger
            logger.warning(
                "cannot install the task_events NOTIFY trigger (%s); cluster streams poll "
                "every %s s",
                str(getattr(exc, "orig", exc)).splitlines()[0][:200],
                self.poll_interval,
            )
            self.listener = self.poll._listener = None
            return
        self.listener.start()

    async def aclose(self) -> None:
        """Stop the listening connection, the file watcher and the safety poll."""
        for loop in (self.listener, self.watcher, self.poll):
            if loop is not None:
                await loop.aclose()

    async def _pg_connect(self) -> Any:
        return await pg_connect(self._store_url, LISTEN_APPLICATION)

    async def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        """Events of *task_id* newer than *after*, in table order, each once."""
        cursor = await self.seq_at(task_id, after)
        async for _seq, version, event in self.tail(task_id, cursor):
            if version.is_after(after):
                yield VersionedEvent(event=event, version=version)

    async def seq_at(self, task_id: str, version: TaskVersion) -> int:
        """The event id (table ``seq``) of *task_id* at *version* (0: before the first)."""
        if version.is_missing:
            return 0
        stmt = select(func.max(_E.seq)).where(
            _E.task_id == task_id, _E.task_version <= version_number(version)
        )
        rows = await self._read(stmt)
        return int(rows[0][0] or 0)

    async def tail(
        self, task_id: str, after_seq: int, *, until_idle: bool = False
    ) -> AsyncGenerator[tuple[int, TaskVersion, Event], None]:
        """``(seq, version, event)`` of *task_id* after *after_seq*, then as they come.

        With *until_idle*, stop at the first read that finds nothing new.
        """
        await self.initialize()
        woken = self.hub.register(task_id)
        woken.cursor = after_seq
        try:
            while True:
                woken.clear()
                stmt = (
                    select(_E.seq, _E.task_version, _E.event_data)
                    .where(_E.task_id == task_id, _E.seq > woken.cursor)
                    .order_by(_E.seq.asc())
                    .limit(PAGE_SIZE)
                )
                try:
                    rows = await self._read(stmt)
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
                    if until_idle:
                        return
                    await woken.wait()
        finally:
            self.hub.unregister(task_id, woken)

    async def _heads(self, task_ids: list[str]) -> dict[str, int]:
        """The newest event id of each of *task_ids* that has events (the safety poll)."""
        heads: dict[str, int] = {}
        for start in range(0, len(task_ids), 500):
            stmt = (
                select(_E.task_id, func.max(_E.seq))
                .where(_E.task_id.in_(task_ids[start : start + 500]))
                .group_by(_E.task_id)
            )
            heads.update((task_id, int(seq)) for task_id, seq in await self._read(stmt))
        return heads

    async def _read(self, stmt: Any) -> list[Any]:
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(**{READ_ONLY: True})
            return list((await conn.execute(stmt)).all())

"""The SDK's ``DatabaseTaskEventStream`` with wake-ups (see :mod:`._wakeups`).

The SDK's ``subscribe`` reads the event table, then sleeps ``poll_interval_s`` whenever it
found nothing; it has no hook for an earlier wake-up. :class:`WakingTaskEventStream` keeps
its table, cursor and version semantics (helpers included) and replaces only that sleep by
"until woken, at most ``poll_interval_s``". The subscriber's event is cleared *before*
each read, so a wake-up that arrives during the read is not lost. Replicas without
wake-ups (or plain a2a-sdk replicas) on the same database interoperate: they still poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.cluster import DatabaseTaskEventStream, TaskVersion, VersionedEvent
from a2a.server.cluster.database_event_stream import stream_response_to_event
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import StreamResponse
from sqlalchemy import and_, select
from sqlalchemy.exc import OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from ._pg_writer import pg_connect
from ._urls import StoreURL
from ._wakeups import FileWatcher, PgListener, WakeHub, install_notify_trigger

__all__ = ["LISTEN_APPLICATION", "PAGE_SIZE", "WakingTaskEventStream"]

#: events read per query: a replay of a long task holds one page at a time
PAGE_SIZE = 100
#: ``application_name`` of the LISTEN connection, followed by the schema (or database).
LISTEN_APPLICATION = "apcore-a2a listen"

logger = logging.getLogger(__name__)


class WakingTaskEventStream(DatabaseTaskEventStream):
    """A ``DatabaseTaskEventStream`` whose subscribers are woken by new events."""

    def __init__(
        self, engine: AsyncEngine, store_url: StoreURL, *, poll_interval_s: float, wakeups: bool
    ) -> None:
        super().__init__(engine, poll_interval_s=poll_interval_s)
        self.hub = WakeHub()
        self.listener: PgListener | None = None
        self.watcher: FileWatcher | None = None
        self._store_url = store_url
        self._listening = False
        if wakeups and store_url.kind == "postgresql":
            self.listener = PgListener(self.hub, self._pg_connect)
        elif wakeups and store_url.sqlite_path is not None:
            self.watcher = FileWatcher(self.hub, store_url.sqlite_path)

    async def initialize(self) -> None:
        await super().initialize()
        if self.listener is None or self._listening:
            return
        try:
            await install_notify_trigger(self._engine, str(self._event_model.__tablename__))
        except ProgrammingError as exc:  # e.g. no right to create a function or trigger
            logger.warning(
                "cannot install the task_events NOTIFY trigger (%s); cluster streams poll "
                "every %s s",
                str(getattr(exc, "orig", exc)).splitlines()[0][:200],
                self._poll_interval_s,
            )
            self.listener = None
            return
        self.listener.start()
        self._listening = True

    async def aclose(self) -> None:
        """Stop the listening connection or the file watcher."""
        if self.listener is not None:
            await self.listener.aclose()
        if self.watcher is not None:
            await self.watcher.aclose()

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
        await self._ensure_initialized()
        async with self._session_maker() as session:
            return await self._seq_at_or_before_version(session, task_id, version)

    async def tail(
        self, task_id: str, after_seq: int, *, until_idle: bool = False
    ) -> AsyncGenerator[tuple[int, TaskVersion, Event], None]:
        """``(seq, version, event)`` of *task_id* after *after_seq*, then as they come.

        With *until_idle*, stop at the first read that finds nothing new.
        """
        await self._ensure_initialized()
        cursor = after_seq
        woken = self.hub.register(task_id)
        try:
            while True:
                woken.clear()
                try:
                    rows = await self._rows_after(task_id, cursor)
                except OperationalError:
                    logger.debug("Transient DB error reading events of %s", task_id, exc_info=True)
                    rows = None
                for seq, task_version, event_data in rows or ():
                    cursor = seq
                    response = StreamResponse()
                    response.ParseFromString(event_data)
                    yield seq, TaskVersion(task_version), stream_response_to_event(response)
                if rows == [] and until_idle:
                    return
                if not rows:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), self._poll_interval_s)
        finally:
            self.hub.unregister(task_id, woken)

    async def _rows_after(self, task_id: str, cursor: int) -> list[tuple[int, int, bytes]]:
        model = self._event_model
        stmt = (
            select(model.seq, model.task_version, model.event_data)
            .where(and_(model.task_id == task_id, model.seq > cursor))
            .order_by(model.seq.asc())
            .limit(PAGE_SIZE)
        )
        async with self._session_maker() as session:
            return [(r[0], r[1], r[2]) for r in (await session.execute(stmt)).all()]

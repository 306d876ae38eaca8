"""Lifecycle of a SQL-backed store set: tables, recovery, heartbeats, retention, health."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable

from a2a.server.cluster import VersionedDatabaseTaskStore
from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

from . import _recovery
from ._engine import READ_ONLY
from ._errors import StoreUnavailableError
from ._replicas import ReplicaRegistry
from ._retention import purge_finished_tasks, retention_interval
from ._tables import METADATA
from ._urls import StoreURL
from .outages import UNAVAILABLE as _UNAVAILABLE

__all__ = ["CancelWatch", "SqlBackend"]

#: (the task ids running here, stop one of them)
CancelWatch = tuple[Callable[[], list[str]], Callable[[str], None]]

logger = logging.getLogger(__name__)

PING_TIMEOUT = 3.0
_FREE_CONNECTIONS = (
    "SELECT current_setting('max_connections')::int"
    " - current_setting('superuser_reserved_connections')::int"
    " - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
)
_DB_ERRORS: tuple[type[BaseException], ...] = (*_UNAVAILABLE, DBAPIError)


class SqlBackend:
    """Owns the engine and the background loops of one SQL store set."""

    def __init__(
        self,
        *,
        store_url: StoreURL,
        engine: AsyncEngine,
        retention_seconds: float | None,
        poll_interval: float = 0.5,
        connections: tuple[int, int, str] = (0, 1, ""),
    ) -> None:
        self.store_url = store_url
        self.engine = engine
        self.retention_seconds = retention_seconds
        self.poll_interval = poll_interval
        #: (connections one process holds at most, processes (workers), what they are)
        self.connections = connections
        self.task_store: DatabaseTaskStore | VersionedDatabaseTaskStore | None = None
        self.registry: ReplicaRegistry | None = None
        self.closers: list[Callable[[], Awaitable[None]]] = []
        self._initializers: list[Callable[[], Awaitable[None]]] = []
        self._loops: list[asyncio.Task[None]] = []
        self._cancel_watch: CancelWatch | None = None
        self._started = False

    def attach(
        self,
        task_store: DatabaseTaskStore | VersionedDatabaseTaskStore,
        initializers: list[Callable[[], Awaitable[None]]],
        registry: ReplicaRegistry | None = None,
    ) -> None:
        """The SDK store recovery writes through, what creates the tables, the cluster's
        replica registry (``None``: one process)."""
        self.task_store, self._initializers, self.registry = task_store, initializers, registry

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        path = self.store_url.sqlite_path
        if path is not None:
            parent = os.path.dirname(os.path.abspath(path))  # noqa: ASYNC240 - no I/O
            if not await asyncio.to_thread(os.path.isdir, parent):
                raise StoreUnavailableError(
                    f"task store {self.store_url.display}: directory {parent} does not exist"
                )
        assert self.task_store is not None, "attach() the SDK store first"
        try:
            if self.store_url.kind == "postgresql":
                await self._check_connections()
            await self._create_tables()
            if self.registry is None:
                await _recovery.fail_tasks(
                    await _recovery.running_tasks(self.engine), self.task_store
                )
            else:
                await self.registry.register()
                await _recovery.fail_tasks(
                    await _recovery.orphaned_running_tasks(
                        self.engine, self.registry.live_cutoff()
                    ),
                    self.task_store,
                )
        except _DB_ERRORS as exc:
            # Wrong password, missing database, no permission: the store is unusable
            # either way, and the operator needs the reason, not a traceback.
            raise self._unavailable(exc) from None
        if self.registry is not None:
            self._spawn(self._heartbeat_loop(self.registry), "heartbeat")
            if self._cancel_watch is not None:
                self._spawn(self._cancel_loop(*self._cancel_watch), "cancels")
        if self.retention_seconds is not None and self.retention_seconds > 0:
            self._spawn(self._retention_loop(self.retention_seconds), "retention")
        self._started = True

    async def aclose(self) -> None:
        loops, self._loops = self._loops, []
        for loop in loops:
            loop.cancel()
        for loop in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        for close in self.closers:
            await close()
        if self.registry is not None and self._started:
            try:
                async with asyncio.timeout(PING_TIMEOUT):
                    await self.registry.deregister()
            except _DB_ERRORS:
                logger.warning("could not deregister replica %s", self.registry.replica_id)
        self._started = False
        await self.engine.dispose()

    async def ping(self) -> None:
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                async with self.engine.connect() as conn:
                    conn = await conn.execution_options(**{READ_ONLY: True})
                    await conn.execute(text("SELECT 1"))
        except _DB_ERRORS as exc:
            raise self._unavailable(exc) from None

    def watch_cancels(self, running: Callable[[], list[str]], stop: Callable[[str], None]) -> None:
        """Cluster mode: call ``stop(task_id)`` for a local run another replica canceled."""
        self._cancel_watch = (running, stop)

    # -- internals -----------------------------------------------------------------
    async def _check_connections(self) -> None:
        # The pool opens its connections under load, when running out of them is an
        # outage; a start that cannot have them all says so at once instead.
        per_process, workers, held = self.connections
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(**{READ_ONLY: True})
            free: int = (await conn.execute(text(_FREE_CONNECTIONS))).scalar_one()
        # +1: the connection asking is one of the pool's own
        if workers * per_process > free + 1:
            raise StoreUnavailableError(
                f"task store {self.store_url.display} cannot take this agent's connections: "
                f"{workers} worker(s) x {per_process} ({held}) = {workers * per_process}, "
                f"but the server has {free + 1} "
                "left (max_connections - superuser_reserved_connections - connections open "
                "now); lower ?pool_size= in the task store URL or the workers, or raise "
                "max_connections"
            )

    async def _create_tables(self) -> None:
        # Two replicas starting together can both see a table missing and race to
        # create it; the loser sees a duplicate error, and a second pass finds it done.
        for attempt in range(5):
            try:
                for initialize in self._initializers:
                    await initialize()
                if self.registry is not None:
                    async with self.engine.begin() as conn:
                        await conn.run_sync(METADATA.create_all)
                return
            except (ProgrammingError, DBAPIError) as exc:
                text = str(exc).lower()
                # SQLite reports the lost race ("already exists", "locked") as an
                # OperationalError, the same class as an unreachable database.
                raced = "already exists" in text or "database is locked" in text
                if (isinstance(exc, _UNAVAILABLE) and not raced) or attempt == 4:
                    raise
                logger.debug("table creation raced with another process; retrying")
                await asyncio.sleep(0.1 * (attempt + 1))

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(f"apcore-a2a-store-{name}")
        self._loops.append(task)

    async def _heartbeat_loop(self, registry: ReplicaRegistry) -> None:
        assert self.task_store is not None
        while True:
            await asyncio.sleep(registry.heartbeat_interval)
            try:
                for dead in await registry.heartbeat():
                    await _recovery.fail_tasks(
                        await _recovery.running_tasks_of(self.engine, dead), self.task_store
                    )
                    await registry.retire(dead)
            except _DB_ERRORS as exc:
                logger.warning("replica heartbeat failed: %s", type(exc).__name__)

    async def _cancel_loop(
        self, running: Callable[[], list[str]], stop: Callable[[str], None]
    ) -> None:
        # A CancelTask answered by another replica only writes CANCELED to the store; the
        # SDK's own signal (a version conflict) reaches this replica at the run's next
        # write, which a long module without output never makes. One query per poll
        # interval, and none while nothing runs here.
        while True:
            await asyncio.sleep(self.poll_interval)
            ids = running()
            if not ids:
                continue
            try:
                canceled = await _recovery.canceled_among(self.engine, ids)
            except _DB_ERRORS as exc:
                logger.warning("cancel check failed: %s", type(exc).__name__)
                continue
            for task_id in canceled:
                stop(task_id)

    async def _retention_loop(self, retention_seconds: float) -> None:
        cluster = self.registry is not None
        while True:
            await asyncio.sleep(retention_interval(retention_seconds))
            try:
                deleted = await purge_finished_tasks(
                    self.engine, retention_seconds, cluster=cluster
                )
            except _DB_ERRORS as exc:
                logger.warning("task retention purge failed: %s", type(exc).__name__)
                continue
            if deleted:
                logger.info("deleted %d finished task(s) past retention", deleted)

    def _unavailable(self, exc: BaseException) -> StoreUnavailableError:
        cause = getattr(exc, "orig", None) or exc
        detail = str(cause).splitlines()[0][:200] if str(cause) else ""
        password = self.store_url.url.password if self.store_url.url is not None else None
        if password:
            detail = detail.replace(str(password), "***")
        reason = f"{type(cause).__name__}: {detail}" if detail else type(cause).__name__
        return StoreUnavailableError(
            f"task store {self.store_url.display} is unreachable ({reason})"
        )

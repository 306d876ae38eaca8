"""Who may serve a database: one process without ``--cluster`` (exclusively), or any number
with it (shared); why, and the locks that hold it (a SQLite ``flock``, a PostgreSQL
session advisory lock taken again after its connection is lost): ``docs/storage.md``,
*Restarts*. A ``flock`` belongs to an open file: each process (each worker) opens its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from typing import Any

from ._urls import StoreInUseError, StoreURL, schema_key
from ._wakeups import BackgroundLoop

logger = logging.getLogger(__name__)

#: ``application_name`` of the connection holding a PostgreSQL lock (plus the schema).
LOCK_APPLICATION = "apcore-a2a lock"
#: Suffix of the SQLite lock file, next to the database.
LOCK_SUFFIX = ".lock"
#: Seconds between attempts to take a lost PostgreSQL lock again, at most.
RETAKE_INTERVAL = 5.0


_KEY = schema_key("task store")


def _what_to_do(cluster_holds: bool) -> str:
    if cluster_holds:
        return (
            "apcore-a2a processes serve this database with --cluster: use --cluster here "
            "too, stop them, or give this process its own database"
        )
    return (
        "another apcore-a2a process serves this database without --cluster: stop it, "
        "use --cluster on every process, or give each its own database"
    )


def refusal(display: str, *, cluster_holds: bool) -> StoreInUseError:
    """The one line a process that may not serve *display* fails with."""
    return StoreInUseError(f"task store {display} is in use: {_what_to_do(cluster_holds)}")


class OwnerLock:
    """Nothing to hold (an in-memory SQLite database)."""

    async def acquire(self) -> None:
        """Take the lock, or raise :class:`StoreInUseError` (touching nothing)."""

    async def release(self) -> None:
        """Let the lock go (safe to call twice, or without :meth:`acquire`)."""


def owner_lock(store_url: StoreURL, *, shared: bool) -> OwnerLock:
    """The lock of *store_url*'s database; *shared* for cluster mode."""
    if store_url.kind == "postgresql" and store_url.pgbouncer:
        return PooledOwnerCheck(store_url)
    if store_url.kind == "postgresql":
        return PgOwnerLock(store_url, shared=shared)
    path = store_url.sqlite_path
    if path is None:
        return OwnerLock()
    return FileOwnerLock(store_url.display, path, shared=shared)


class FileOwnerLock(OwnerLock):
    """``flock`` on a file next to a SQLite database (see the module doc)."""

    def __init__(self, display: str, path: str, *, shared: bool) -> None:
        self.display = display
        self.path = os.path.realpath(path) + LOCK_SUFFIX
        self.shared = shared
        self._fd: int | None = None

    async def acquire(self) -> None:
        if self._fd is not None:
            return
        if sys.platform == "win32":  # no flock: nothing keeps a second process out
            logger.warning(
                "cannot lock %s on Windows: do not start two processes on it unless all "
                "run with --cluster",
                self.display,
            )
            return
        import fcntl

        # Never deleted: a process could lock a file another one is about to unlink.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            cluster_holds = False
            if not self.shared:  # held shared (a cluster) or exclusively (one process)?
                with contextlib.suppress(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    cluster_holds = True
            os.close(fd)
            raise refusal(self.display, cluster_holds=cluster_holds) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # the last descriptor of the open file: the lock goes with it


class PgOwnerLock(BackgroundLoop, OwnerLock):
    """A session advisory lock on a connection of its own (see the module doc), taken
    again by the loop each time that connection is lost."""

    _name = "apcore-a2a-store-lock"

    def __init__(self, store_url: StoreURL, *, shared: bool) -> None:
        self.store_url = store_url
        self._take = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        self._conn: Any = None
        self._lost = asyncio.Event()

    async def acquire(self) -> None:
        if self._conn is not None:
            return
        conn, cluster_holds = await _try_lock(self.store_url, self._take)
        if conn is None:
            raise refusal(self.store_url.display, cluster_holds=cluster_holds)
        self._hold(conn)
        self.start()

    async def release(self) -> None:
        await self.aclose()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:  # the session ends: the server drops its locks
                await conn.close(timeout=2)
            except Exception:
                conn.terminate()

    def _hold(self, conn: Any) -> None:
        self._conn = conn
        self._lost.clear()
        conn.add_termination_listener(lambda _conn: self._lost.set())

    async def _run(self) -> None:
        while True:
            await self._lost.wait()
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.terminate()
            logger.warning("lost the connection holding the lock on %s", self.store_url.display)
            delay, attempts = 0.05, 0
            while self._conn is None:
                await asyncio.sleep(delay)
                delay = min(RETAKE_INTERVAL, delay * 2)
                try:
                    taken, cluster_holds = await _try_lock(self.store_url, self._take)
                except Exception as exc:  # asyncpg's errors share no base class with OSError
                    logger.debug("lock connection failed: %s", type(exc).__name__)
                    continue
                if taken is not None:
                    self._hold(taken)
                    logger.info("took the lock on %s again", self.store_url.display)
                elif attempts % 12 == 0:  # at once, then about once a minute
                    logger.error(
                        "another apcore-a2a process took the lock on %s while this one was "
                        "disconnected (two processes may now fail each other's tasks): %s",
                        self.store_url.display,
                        _what_to_do(cluster_holds),
                    )
                attempts += taken is None


class PooledOwnerCheck(OwnerLock):
    """Behind PgBouncer (cluster mode only, ``stores.py``): a session lock would stay on a
    server connection that other clients then use, so a replica holds none; it only
    checks at start that no process connected directly holds the database exclusively."""

    def __init__(self, store_url: StoreURL) -> None:
        self.store_url = store_url

    async def acquire(self) -> None:
        # A transaction-level lock, released as its statement ends: held by nobody after.
        conn, _ = await _try_lock(self.store_url, "pg_try_advisory_xact_lock_shared")
        if conn is None:
            raise refusal(self.store_url.display, cluster_holds=False)
        await conn.close(timeout=2)


async def _try_lock(store_url: StoreURL, take: str) -> tuple[Any, bool]:
    """``(a connection of its own that took the lock with the function *take*, False)``,
    or ``(None, whether a cluster holds it)``; connection errors propagate."""
    from ._pg_writer import pg_connect

    conn = await pg_connect(store_url, LOCK_APPLICATION)
    try:
        if await conn.fetchval(f"SELECT {take}({_KEY})"):
            return conn, False
        # held shared (a cluster) or exclusively (one process)?
        cluster_holds = take == "pg_try_advisory_lock" and bool(
            await conn.fetchval(f"SELECT pg_try_advisory_lock_shared({_KEY})")
        )
    except BaseException:
        conn.terminate()
        raise
    await conn.close(timeout=2)
    return None, cluster_holds

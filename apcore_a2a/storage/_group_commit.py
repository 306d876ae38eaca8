"""Group commit: writes that arrive while a transaction is under way share the next one.

One writer coroutine per :class:`GroupCommit`. Alone, an item is written at once; under
concurrency the items that gathered during a transaction go together in the next one, so
N concurrent callers pay for a few commits (one WAL flush, one SQLite write lock each)
instead of N. A batch that fails on a row conflict (``IntegrityError``) is written again
item by item, so one bad row fails only its own caller; any other error (an outage)
fails the whole batch at once. The writers are in :mod:`.deferred`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from sqlalchemy.exc import IntegrityError

__all__ = ["MAX_BATCH", "GroupCommit"]

#: Most items in one transaction (keeps statements well under SQLite's parameter limit).
MAX_BATCH = 500

_T = TypeVar("_T")


class GroupCommit(Generic[_T]):
    """Items for *write* (one transaction per call), grouped as the module docstring says."""

    def __init__(
        self, write: Callable[[list[_T]], Awaitable[None]], *, max_batch: int = MAX_BATCH
    ) -> None:
        self._write = write
        self._max_batch = max_batch
        self._queue: list[tuple[_T, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: _T) -> None:
        """Write *item*; returns once its transaction has committed (or raises its error)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((item, done))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_all())
        await done

    async def aclose(self) -> None:
        """Wait for the batch under way (its callers get its outcome)."""
        writer = self._writer
        if writer is not None:
            await asyncio.wait({writer})

    async def _write_all(self) -> None:
        try:
            while self._queue:
                n = self._max_batch
                batch, self._queue = self._queue[:n], self._queue[n:]
                try:
                    await self._write([item for item, _ in batch])
                except IntegrityError as exc:
                    if len(batch) == 1:
                        _settle(batch, exc)
                    else:
                        for item, done in batch:
                            await self._write_one(item, done)
                except BaseException as exc:
                    _settle(batch, exc)
                    if not isinstance(exc, Exception):
                        raise
                else:
                    _settle(batch, None)
        finally:
            self._writer = None
            for _, done in self._queue:  # only if the writer itself was canceled
                if not done.done():
                    done.cancel()
            self._queue = []

    async def _write_one(self, item: _T, done: asyncio.Future[None]) -> None:
        try:
            await self._write([item])
        except Exception as exc:
            _settle([(item, done)], exc)
        else:
            _settle([(item, done)], None)


def _settle(batch: list[tuple[_T, asyncio.Future[None]]], exc: BaseException | None) -> None:
    for _, done in batch:
        if done.done():
            continue
        if exc is None:
            done.set_result(None)
        else:
            done.set_exception(exc)

"""Group commit: the saves that gather while one transaction runs share the next one.

N concurrent callers pay for a few commits (one WAL flush, one SQLite write lock each)
instead of N. A batch that fails for any reason but an outage is written again item by
item, so only the bad item's caller gets the error (issue 40). *write* may also answer
each item on its own: a list of outcomes (a value, or an exception its caller raises).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from .outages import is_outage

#: Most items in one transaction (keeps statements well under SQLite's parameter limit).
MAX_BATCH = 500

_T = TypeVar("_T")


class GroupCommit(Generic[_T]):
    """Items handed to :meth:`submit` are written by *write*, in batches (module doc)."""

    def __init__(self, write: Callable[[list[_T]], Awaitable[list[Any] | None]]) -> None:
        self._write = write
        self._queue: list[tuple[_T, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: _T) -> Any:
        """Write *item*; returns its outcome once its transaction has committed (or raises
        its error)."""
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((item, done))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write_all())
        return await done

    async def aclose(self) -> None:
        """Wait for the batch under way (its callers get its outcome)."""
        if self._writer is not None:
            await asyncio.wait({self._writer})

    async def _write_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._commit(batch)
        finally:
            self._writer = None
            for _, done in self._queue:  # only if the writer itself was canceled
                if not done.done():
                    done.cancel()
            self._queue = []

    async def _commit(self, batch: list[tuple[_T, asyncio.Future[Any]]]) -> None:
        outcome: BaseException | None = None
        answers: list[Any] | None = None
        try:
            answers = await self._write([item for item, _ in batch])
        except Exception as exc:
            if len(batch) > 1 and not is_outage(exc):
                for one in batch:
                    await self._commit([one])
                return
            outcome = exc
        except BaseException as exc:  # canceled: every caller learns it, then it goes on
            outcome = exc
        for index, (_, done) in enumerate(batch):
            if done.done():
                continue
            answer = outcome if answers is None else answers[index]
            if isinstance(answer, BaseException):
                done.set_exception(answer)
            else:
                done.set_result(answer)
        if outcome is not None and not isinstance(outcome, Exception):
            raise outcome

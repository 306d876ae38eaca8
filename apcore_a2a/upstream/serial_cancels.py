"""Cancels of one task take turns.

a2a-sdk 1.3's ``DefaultRequestHandler.on_cancel_task`` reads the task, finds it running and
cancels its run. Cancels that arrive together all read it running before any of them wrote
``CANCELED``: each cancels it again, each answers success, and the task's stream gets a second
``CANCELED`` or none that ends it. In turn, the second reads the first's ``CANCELED`` and gets
the SDK's own ``TaskNotCancelableError``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class CancelTurns:
    """One lock per task a cancel is in flight for: cancels of other tasks never wait on it,
    and it is gone once no cancel of its task holds or waits for it."""

    def __init__(self) -> None:
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @asynccontextmanager
    async def turn(self, task_id: str) -> AsyncIterator[None]:
        """Hold *task_id*'s turn: the cancels before it have answered."""
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = asyncio.Lock()
        async with lock:
            yield

"""An admission waiting for its caller's count, holding no pooled connection meanwhile.

While a caller holds rows past its quota, the takes counting its rows take turns
(``_slot_rows.turn_above``). A request's or stream's take (an admission) never waits for
the turn on a pooled connection: a burst of one caller's requests would hold them all, and
every other statement of the replica (its heartbeat too) would wait behind them. It only
tries the turn. Another take holding it, the caller at its quota all the same is refused
at once (``take_below``); a caller that may have room is not (it would be told "quota
exceeded, retry in 30 s" while under its quota): its connection goes back to the pool and
the take tries again shortly, queued in memory behind this process's other takes of the
caller, for at most :data:`WAIT_SECONDS` from its first try. Still not knowing then (the
turn held all along, by another replica's take, or a statement stuck on a lock), it is
answered :func:`busy`: a short, honest retry answer, never "quota exceeded".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from apcore_a2a.errors import StoreUnavailableError

from ._slot_rows import SlotsBusy

#: Seconds an admission waits for another take's count of its caller's rows to end.
WAIT_SECONDS = 1.0
#: Seconds a caller whose count could not be made in that time is told to wait.
BUSY_RETRY_AFTER = 1.0
#: Pauses between two tries of the turn: the first, and the longest (doubled meanwhile).
_PAUSES = (0.005, 0.05)


def busy() -> StoreUnavailableError:
    """The answer to a take whose count another take held past :data:`WAIT_SECONDS`."""
    return StoreUnavailableError(
        "Another request of this caller is being counted against its quota; retry shortly",
        retry_after=BUSY_RETRY_AFTER,
    )


class TurnWaits:
    """The admissions of one process waiting for their caller's count, one queue per
    (scope, subject)."""

    def __init__(self) -> None:
        #: (scope, subject) -> (its queue, the admissions in it or waiting to be)
        self._queues: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def admit(self, key: tuple[str, str], attempt: Callable[[], Awaitable[bool]]) -> bool:
        """*attempt* (a take, in a transaction of its own, raising :class:`SlotsBusy`
        while another take counts and the caller may have room), tried until it knows."""
        try:
            return await attempt()
        except SlotsBusy:
            pass
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_SECONDS
        queue, waiting = self._queues.get(key, (asyncio.Lock(), 0))
        self._queues[key] = (queue, waiting + 1)
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    await queue.acquire()
            except TimeoutError:
                raise busy() from None
            try:
                return await self._tries(attempt, deadline)
            finally:
                queue.release()
        finally:
            queue, waiting = self._queues[key]
            if waiting > 1:
                self._queues[key] = (queue, waiting - 1)
            else:
                del self._queues[key]

    @staticmethod
    async def _tries(attempt: Callable[[], Awaitable[bool]], deadline: float) -> bool:
        # Never cut off in a try (a take committed, its answer lost, would be an orphan):
        # the deadline is read between them.
        loop = asyncio.get_running_loop()
        pause, longest = _PAUSES
        while True:
            try:
                return await attempt()
            except SlotsBusy:
                left = deadline - loop.time()
                if left <= 0:
                    raise busy() from None
            await asyncio.sleep(min(pause, left))
            pause = min(2 * pause, longest)

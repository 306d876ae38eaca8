"""Per-caller quotas and the stream cap shared by every binding.

SSE streams (request guard) and gRPC streams (interceptor) take their slot from the same
:class:`StreamLimiter`: a caller's quota counts both, and a process never serves more than
``max_streams`` (it protects its sockets and memory). Per-caller limits (here, and
unfinished tasks in ``task_quota.py``) are *slots*: N per caller key, each taken in one
atomic step, never a count then a create (which lets every concurrent request through).
:class:`LocalSlots` in one process; in cluster mode (also ``workers`` > 1) the shared
database (``storage/quota_slots.py``).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Protocol

from a2a.utils.errors import A2AError, InternalError

from apcore_a2a.errors import (
    RETRY_AFTER_KEY,
    OwnError,
    QuotaExceededError,
    StoreUnavailableError,
)

#: Seconds a client is told to wait when the agent as a whole is at its stream cap.
GLOBAL_RETRY_AFTER = 5
#: event-loop turns a full agent or caller waits for a slot given back by a hang-up
#: the server read together with the stream asking for it (see ``StreamLimiter.acquire``)
HANG_UP_TURNS = 10


class QuotaSlots(Protocol):
    """Where quota slots are kept (see the module docstring)."""

    async def take(self, scope: str, subject: str, holder: str, limit: int) -> bool: ...
    async def rename(self, scope: str, old: str, new: str, limit: int = 0) -> bool: ...
    async def give_back(self, scope: str, holder: str) -> None: ...
    async def holders(self, scope: str, subject: str) -> list[str]: ...


class LocalSlots:
    """Quota slots of one process (atomic: nothing here awaits)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], set[str]] = {}
        self._subject: dict[tuple[str, str], str] = {}

    async def take(self, scope: str, subject: str, holder: str, limit: int) -> bool:
        held = self._held.setdefault((scope, subject), set())
        if len(held) >= limit:
            return False
        held.add(holder)
        self._subject[(scope, holder)] = subject
        return True

    async def rename(self, scope: str, old: str, new: str, limit: int = 0) -> bool:
        subject = self._subject.pop((scope, old), None)
        if subject is not None:
            held = self._held[(scope, subject)]
            held.discard(old)
            held.add(new)
            self._subject[(scope, new)] = subject
        return True

    async def give_back(self, scope: str, holder: str) -> None:
        subject = self._subject.pop((scope, holder), None)
        if subject is not None:
            held = self._held[(scope, subject)]
            held.discard(holder)
            if not held:
                del self._held[(scope, subject)]

    async def holders(self, scope: str, subject: str) -> list[str]:
        return list(self._held.get((scope, subject), ()))


@dataclass(frozen=True, slots=True)
class StreamRefusal:
    """Why a stream was refused, the same on every binding: *error* (the agent is full,
    the caller used its quota, or cluster mode cannot reach the slots), the HTTP status
    and the seconds to wait (``Retry-After``; gRPC: ``google.rpc.RetryInfo``)."""

    error: A2AError
    status: int
    retry_after: int


def _refused(error: OwnError) -> StreamRefusal:
    seconds = (error.data or {}).get(RETRY_AFTER_KEY, GLOBAL_RETRY_AFTER)
    return StreamRefusal(error, error.wire.http, int(seconds))


class StreamLimiter:
    """Counts open streams (read by ``/metrics``) and takes per-caller stream slots
    (caller key: the task owner, or ``ip:<address>``; ``per_caller`` 0: no quota)."""

    def __init__(self, max_streams: int, per_caller: int = 0, slots: QuotaSlots | None = None):
        self.max_streams = max_streams
        self.per_caller = per_caller
        self.slots = slots if slots is not None else LocalSlots()
        self.active = 0
        self.rejected = 0
        self._mine: dict[str, list[str]] = {}  # caller -> holders of its slots taken here

    async def acquire(self, caller: str) -> StreamRefusal | None:
        """Take a slot for *caller*, or say why not (then nothing was taken).

        A full agent or caller is asked twice, a few event-loop turns apart: a stream's
        slot comes back a turn or two after the server reads its client's hang-up (the
        request guard, ``server/guards.py``; gRPC cancels the call), and the caller's next
        stream, sent right after the hang-up on a connection already open, may reach the
        server in the same read and be admitted in between."""
        refused = await self._take(caller)
        if refused is None or isinstance(refused.error, StoreUnavailableError):
            return refused
        for _ in range(HANG_UP_TURNS):
            await asyncio.sleep(0)
        refused = await self._take(caller)
        if refused is not None and not isinstance(refused.error, StoreUnavailableError):
            self.rejected += 1
        return refused

    async def _take(self, caller: str) -> StreamRefusal | None:
        if self.active >= self.max_streams:
            busy = InternalError(message="Too many concurrent streams; retry later")
            return StreamRefusal(busy, 503, GLOBAL_RETRY_AFTER)
        self.active += 1  # before any await: the agent's cap is never overshot
        if self.per_caller:
            holder = uuid.uuid4().hex
            try:
                taken = await self.slots.take("stream", caller, holder, self.per_caller)
            except BaseException as exc:
                self.active -= 1
                if isinstance(exc, StoreUnavailableError):  # cluster mode: slots are stored
                    return _refused(exc)
                raise
            if not taken:
                self.active -= 1
                quota = f"at most {self.per_caller} concurrent streams per caller"
                return _refused(QuotaExceededError(f"Stream quota exceeded: {quota}"))
            self._mine.setdefault(caller, []).append(holder)
        return None

    async def release(self, caller: str) -> None:
        """Give back the slot *caller* took."""
        self.active -= 1
        mine = self._mine.get(caller)
        if mine:
            holder = mine.pop()
            if not mine:
                del self._mine[caller]
            giving = self.slots.give_back("stream", holder)
            if isinstance(self.slots, LocalSlots):
                await giving  # never suspends (LocalSlots): no cancel can stop it half-way
            else:
                # Shielded: a stream torn down by a disconnect must still free its slot.
                await asyncio.shield(giving)

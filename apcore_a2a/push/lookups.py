"""Webhook host-name lookups shared fairly between callers.

Each caller waits for at most :data:`LOOKUPS_PER_CALLER` lookups at once; its further ones
wait for its own slot (within ``push_timeout``). Lookups of the same name at the same time
share one, whoever asked. A lookup is charged to the callers waiting for it, one slot
each however many of their requests wait, whoever started it: a caller that stops waiting
(its ``push_timeout`` ran out, its request ended or its client hung up) gets its slot back
at once, while the others still wait; the lookup is cancelled when the last of them
stops waiting, so a name whose DNS never answers is asked no longer than someone waits.

A lookup costs a pending query and its UDP socket (``push/dns.py``), not a thread, so many
can be out at once; but one caller with many quota keys (API keys, or anonymous IPv6
networks: a /48 holds 65,536 /64s) can start one per key, and each stays out for
``push_timeout`` while its request stays open. At most :data:`MAX_LOOKUPS` are out at once:
their sockets stay well inside a process's file limit, and past it a lookup waits its
turn (first come, first served, within its caller's ``push_timeout``) instead of taking a
descriptor the agent's connections need.

The caller is the call's quota key (``record_of(context).caller``), passed by whoever
asks: the request handler checks a webhook URL itself (the SDK's validator gets the URL
alone), the sender with each delivery's caller.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from apcore_a2a._egress import Resolver

#: Lookups one caller may have in flight: the names it makes the agent ask at once.
LOOKUPS_PER_CALLER = 1
#: Lookups in flight at once, all callers together (one UDP socket each).
MAX_LOOKUPS = 256


@dataclass(eq=False)
class _Share:
    """One caller's slots, while any of its requests uses them."""

    slots: asyncio.Semaphore
    users: int = 0


class CallerShares:
    """*size* slots per caller, kept only while one of its requests uses them (the
    webhook lookups' here, the sender's deliveries)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._shares: dict[str, _Share] = {}

    @contextlib.contextmanager
    def of(self, caller: str) -> Iterator[asyncio.Semaphore]:
        """*caller*'s slots, in use while the block runs (no entry for a caller with
        nothing in flight)."""
        share = self._shares.get(caller)
        if share is None:
            share = self._shares[caller] = _Share(asyncio.Semaphore(self.size))
        share.users += 1
        try:
            yield share.slots
        finally:
            share.users -= 1
            if not share.users and self._shares.get(caller) is share:
                del self._shares[caller]


@dataclass(eq=False)
class _Running:
    """One lookup in flight and, per caller, how many of its requests wait for it: each
    such caller pays one of its slots for it."""

    task: asyncio.Task[Sequence[str]]
    callers: dict[str, int] = field(default_factory=dict)


@dataclass(eq=False)
class FairLookups:
    """Runs *resolve* with at most :data:`LOOKUPS_PER_CALLER` lookups in flight per caller
    and *limit* in all, one lookup per name at a time, cancelled when nobody waits for it
    any more."""

    resolve: Resolver
    limit: int = MAX_LOOKUPS
    _slots: asyncio.Semaphore = field(init=False)
    _shares: CallerShares = field(default_factory=lambda: CallerShares(LOOKUPS_PER_CALLER))
    _running: dict[tuple[str, int], _Running] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.limit)

    async def lookup(self, host: str, port: int, caller: str) -> Sequence[str]:
        """The addresses of *host*; raises what the resolver raises."""
        key = (host.lower(), port)
        with self._shares.of(caller) as share:
            running = await self._join(key, host, port, caller, share)
            try:
                # Shielded: a caller that stops waiting leaves the lookup to the others.
                return await asyncio.shield(running.task)
            finally:
                await self._leave(key, running, caller, share)

    async def _join(
        self, key: tuple[str, int], host: str, port: int, caller: str, share: asyncio.Semaphore
    ) -> _Running:
        """The lookup of *key*, started if none runs, with *caller* counted as waiting."""
        running = self._running.get(key)
        if running is None or caller not in running.callers:
            await share.acquire()  # the caller pays for a lookup it was not waiting for
            running = self._running.get(key)
            if running is None:
                try:
                    running = await self._start(key, host, port)
                except BaseException:
                    share.release()
                    raise
            if caller in running.callers:  # another of its requests joined meanwhile
                share.release()
        running.callers[caller] = running.callers.get(caller, 0) + 1
        return running

    async def _start(self, key: tuple[str, int], host: str, port: int) -> _Running:
        await self._slots.acquire()
        running = self._running.get(key)
        if running is not None:  # started by another caller while this one waited
            self._slots.release()
            return running
        running = self._running[key] = _Running(
            asyncio.create_task(_addresses(self.resolve, host, port))
        )

        def ended(task: asyncio.Task[Sequence[str]]) -> None:
            if self._running.get(key) is running:
                del self._running[key]
            if not task.cancelled():
                task.exception()  # retrieved: nobody may be waiting any more
            self._slots.release()

        running.task.add_done_callback(ended)
        return running

    async def _leave(
        self, key: tuple[str, int], running: _Running, caller: str, share: asyncio.Semaphore
    ) -> None:
        """*caller* stops waiting for *running*: its slot comes back once none of its
        requests waits for it; the lookup ends once nobody waits for it."""
        running.callers[caller] -= 1
        if not running.callers[caller]:
            del running.callers[caller]
            share.release()
        if not running.callers and not running.task.done():
            # The last one gone: end its queries (and free its socket) before answering.
            # A caller asking for the name meanwhile starts a lookup of its own, not one
            # that is ending.
            if self._running.get(key) is running:
                del self._running[key]
            running.task.cancel()
            await asyncio.wait([running.task])

    def cancel(self) -> None:
        """Cancel every lookup in flight."""
        for running in list(self._running.values()):
            running.task.cancel()


async def _addresses(resolve: Resolver, host: str, port: int) -> Sequence[str]:
    return await resolve(host, port)

"""Webhook host-name lookups shared fairly between callers.

Each caller has at most :data:`LOOKUPS_PER_CALLER` lookups in flight; its further ones
wait for its own slot (within ``push_timeout``). Lookups of the same name at the same time
share one, whoever asked, and the lookup is cancelled when the last of them stops waiting
(its ``push_timeout`` ran out, its request ended): a name whose DNS never answers is asked
no longer than someone waits for it, and its caller's slot comes back then.

A lookup costs a pending query and its UDP socket (``push/dns.py``), not a thread, so many
can be out at once; but one caller with many quota keys (API keys, or anonymous IPv6
networks: a /48 holds 65,536 /64s) can start one per key, and each stays out for
``push_timeout`` after its request hangs up. At most :data:`MAX_LOOKUPS` are out at once:
their sockets stay well inside a process's file limit, and past it a lookup waits its
turn (first come, first served, within its caller's ``push_timeout``) instead of taking a
descriptor the agent's connections need.

The caller is the call's quota key (``record_of(context).caller``), passed by whoever
asks: the request handler checks a webhook URL itself (the SDK's validator gets the URL
alone), the sender with each delivery's caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

#: ``resolve(host, port) -> addresses``.
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
#: Lookups one caller may have in flight: the names it makes the agent ask at once.
LOOKUPS_PER_CALLER = 1
#: Lookups in flight at once, all callers together (one UDP socket each).
MAX_LOOKUPS = 256


@dataclass(eq=False)
class _Share:
    """One caller's lookup slots, while any of its lookups waits or runs."""

    slots: asyncio.Semaphore
    users: int = 0


@dataclass(eq=False)
class _Running:
    """One lookup in flight and how many callers wait for it."""

    task: asyncio.Task[Sequence[str]]
    waiters: int = 0


@dataclass(eq=False)
class FairLookups:
    """Runs *resolve* with at most :data:`LOOKUPS_PER_CALLER` lookups in flight per caller
    and *limit* in all, one lookup per name at a time, cancelled when nobody waits for it
    any more."""

    resolve: Resolver
    limit: int = MAX_LOOKUPS
    _slots: asyncio.Semaphore = field(init=False)
    _shares: dict[str, _Share] = field(default_factory=dict)
    _running: dict[tuple[str, int], _Running] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.limit)

    async def lookup(self, host: str, port: int, caller: str) -> Sequence[str]:
        """The addresses of *host*; raises what the resolver raises."""
        key = (host.lower(), port)
        running = self._running.get(key) or await self._start(key, host, port, caller)
        running.waiters += 1
        try:
            # Shielded: a caller that stops waiting leaves the lookup to the others.
            return await asyncio.shield(running.task)
        finally:
            running.waiters -= 1
            if not running.waiters and not running.task.done():
                # The last one gone: end its queries and free the slot before answering,
                # so the caller's next lookup finds its slot free. A caller asking for the
                # name meanwhile starts a lookup of its own, not one that is ending.
                if self._running.get(key) is running:
                    del self._running[key]
                running.task.cancel()
                await asyncio.wait([running.task])

    async def _start(self, key: tuple[str, int], host: str, port: int, caller: str) -> _Running:
        share = self._shares.get(caller)
        if share is None:
            share = self._shares[caller] = _Share(asyncio.Semaphore(LOOKUPS_PER_CALLER))
        share.users += 1
        try:
            await share.slots.acquire()
            try:
                await self._slots.acquire()
            except BaseException:
                share.slots.release()
                raise
        except BaseException:
            self._leave(caller, share)
            raise
        running = self._running.get(key)
        if running is not None:  # started by another caller while this one waited
            self._slots.release()
            share.slots.release()
            self._leave(caller, share)
            return running
        running = _Running(asyncio.create_task(_addresses(self.resolve, host, port)))
        self._running[key] = running

        def ended(task: asyncio.Task[Sequence[str]]) -> None:
            if self._running.get(key) is running:
                del self._running[key]
            if not task.cancelled():
                task.exception()  # retrieved: nobody may be waiting any more
            self._slots.release()
            share.slots.release()
            self._leave(caller, share)

        running.task.add_done_callback(ended)
        return running

    def _leave(self, caller: str, share: _Share) -> None:
        share.users -= 1
        if not share.users and self._shares.get(caller) is share:
            del self._shares[caller]  # no entry for a caller with nothing in flight

    def cancel(self) -> None:
        """Cancel every lookup in flight."""
        for running in list(self._running.values()):
            running.task.cancel()


async def _addresses(resolve: Resolver, host: str, port: int) -> Sequence[str]:
    return await resolve(host, port)

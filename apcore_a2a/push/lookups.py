"""Webhook host-name lookups shared fairly between callers.

A name whose DNS never answers holds its lookup until the resolver gives up (10 s and
more), whatever the caller who asked stops waiting. Each caller therefore has at most
:data:`LOOKUPS_PER_CALLER` lookups in flight; its further ones wait for its own slot (within
``push_timeout``) instead of taking the lookup threads the other callers need. A slot is
given back when the lookup itself ends, not when its caller stops waiting: a caller cannot
start a new stuck lookup every ``push_timeout``. Lookups of the same name at the same time
share one, whoever asked.

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
#: Lookups one caller may have in flight. With ``MAX_LOOKUPS`` lookup threads
#: (``push/policy.py``), every caller finds one free at once unless that many other
#: callers each hold a name that never answers.
LOOKUPS_PER_CALLER = 1


@dataclass(eq=False)
class _Share:
    """One caller's lookup slots, while any of its lookups waits or runs."""

    slots: asyncio.Semaphore
    users: int = 0


@dataclass(eq=False)
class FairLookups:
    """Runs *resolve* with at most :data:`LOOKUPS_PER_CALLER` lookups in flight per caller,
    one lookup per name at a time. Cancelling a waiter leaves the lookup running."""

    resolve: Resolver
    _shares: dict[str, _Share] = field(default_factory=dict)
    _running: dict[tuple[str, int], asyncio.Task[Sequence[str]]] = field(default_factory=dict)

    async def lookup(self, host: str, port: int, caller: str) -> Sequence[str]:
        """The addresses of *host*; raises what the resolver raises."""
        key = (host.lower(), port)
        running = self._running.get(key) or await self._start(key, host, port, caller)
        # Shielded: a caller that stops waiting leaves the lookup to the others (and to
        # the end of its thread, which gives the slot back).
        return await asyncio.shield(running)

    async def _start(
        self, key: tuple[str, int], host: str, port: int, caller: str
    ) -> asyncio.Task[Sequence[str]]:
        share = self._shares.get(caller)
        if share is None:
            share = self._shares[caller] = _Share(asyncio.Semaphore(LOOKUPS_PER_CALLER))
        share.users += 1
        try:
            await share.slots.acquire()
        except BaseException:
            self._leave(caller, share)
            raise
        running = self._running.get(key)
        if running is not None:  # started by another caller while this one waited
            share.slots.release()
            self._leave(caller, share)
            return running
        running = asyncio.create_task(_addresses(self.resolve, host, port))
        self._running[key] = running

        def ended(task: asyncio.Task[Sequence[str]]) -> None:
            if self._running.get(key) is task:
                del self._running[key]
            if not task.cancelled():
                task.exception()  # retrieved: nobody may be waiting any more
            share.slots.release()
            self._leave(caller, share)

        running.add_done_callback(ended)
        return running

    def _leave(self, caller: str, share: _Share) -> None:
        share.users -= 1
        if not share.users and self._shares.get(caller) is share:
            del self._shares[caller]  # no entry for a caller with nothing in flight

    def cancel(self) -> None:
        """Stop waiting for every running lookup (a lookup thread ends on its own)."""
        for running in list(self._running.values()):
            running.cancel()


async def _addresses(resolve: Resolver, host: str, port: int) -> Sequence[str]:
    return await resolve(host, port)

"""A take meeting another's count of its caller's rows (cluster mode on PostgreSQL).

While a caller holds rows past its quota (a lowered quota; a task a rename's retry kept
counted past it), the takes for it count its rows one at a time under an advisory lock,
which a request's take only tries (waiting for it on a pooled connection, a burst of one
caller's requests would hold them all). Before, a take that met another's count was
refused at once, "quota exceeded, retry in 30 s", even when the caller had room once the
other take ended. Now a caller at its quota is still refused at once, but one that may
have room waits for the turn holding no connection: it is served once the other count
ends, or, the turn held past ``_slot_waits.WAIT_SECONDS``, told to retry in a second
(``StoreUnavailableError``), never "quota exceeded". The other take's turn is held here by the
test's own transaction through ``turn_above``, as a take of another replica holds it.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.storage import _slot_waits
from apcore_a2a.storage._slot_waits import BUSY_RETRY_AFTER
from apcore_a2a.storage.quota_slots import TASK_SCOPE

from .._postgres import POOL_SIZE
from .test_lowered_quota import NEW, _one_past, counting, tries
from .test_quota_slots_freed import CALLER, _replica

pytestmark = pytest.mark.postgres


async def test_a_take_with_room_is_served_once_the_other_count_ends(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller holds one task past the quota of 2: room for one. A take meeting another
    count of its rows waits for it, and is served once it ends (was: refused, -32091).
    The take waits for as long as a hang guard here: the test's own loop ends the count,
    and a loaded machine ran it past the second a take waits ("store unavailable"); the
    wait's end is the burst test's."""
    monkeypatch.setattr(_slot_waits, "WAIT_SECONDS", 30.0)
    a, slots = await _replica(pg_url)
    try:
        await _one_past(slots)
        with tries(slots) as tried:
            async with counting(pg_url):
                take = asyncio.ensure_future(slots.take(TASK_SCOPE, CALLER, "room", NEW))
                async with asyncio.timeout(10):  # a hang guard
                    await tried.wait()  # it met the count
            async with asyncio.timeout(60):  # a hang guard
                assert await take  # was: False ("quota exceeded")
        assert not await slots.take(TASK_SCOPE, CALLER, "full", NEW)  # 2 held now
    finally:
        await a.aclose()


async def test_a_caller_at_its_quota_is_refused_at_once_during_another_count(
    pg_url: str,
) -> None:
    """At its quota (one task past it, and one below), a take meeting another count of
    its rows is refused: "quota exceeded" is the answer whatever that count adds."""
    a, slots = await _replica(pg_url)
    try:
        await _one_past(slots)
        assert await slots.take(TASK_SCOPE, CALLER, "held", NEW)
        async with counting(pg_url):
            async with asyncio.timeout(10):  # a hang guard
                assert not await slots.take(TASK_SCOPE, CALLER, "full", NEW)
    finally:
        await a.aclose()


async def test_a_burst_meeting_a_count_held_long_holds_no_pooled_connection(
    pg_url: str,
) -> None:
    """The other count is held past the wait: a burst of the caller's takes, three times
    the pool, each waits holding no pooled connection (another statement of the replica
    gets one meanwhile, as its heartbeat must) and is told to retry in a second, not that
    its quota is exceeded (was: every one refused "quota exceeded", told 30 s)."""
    a, slots = await _replica(pg_url)
    try:
        await _one_past(slots)
        burst = 3 * POOL_SIZE
        with tries(slots) as tried:
            async with counting(pg_url):
                takes = [
                    asyncio.ensure_future(slots.take(TASK_SCOPE, CALLER, f"burst-{n}", NEW))
                    for n in range(burst)
                ]
                async with asyncio.timeout(10):  # a hang guard: no connection left was 30 s
                    await tried.wait()
                    async with slots.engine.connect() as other:
                        assert (await other.execute(select(1))).scalar_one() == 1
                    answers = await asyncio.gather(*takes, return_exceptions=True)
        for answer in answers:
            assert isinstance(answer, StoreUnavailableError), answer
            assert answer.retry_after == BUSY_RETRY_AFTER
            assert "retry" in answer.message and "quota exceeded" not in answer.message.lower()
        assert await slots.take(TASK_SCOPE, CALLER, "after", NEW)  # the turn free: room
    finally:
        await a.aclose()

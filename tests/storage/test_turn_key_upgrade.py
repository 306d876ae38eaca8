"""A rolling upgrade across the change of the quota count's key (cluster mode, PostgreSQL).

Releases before the schema's key (``_urls.schema_key``) counted a caller's rows past its
quota under one key for the whole database, ``hashtext('apcore-a2a quota <scope>
<subject>')``. An earlier replica and a later one, side by side on one schema while the
replicas are upgraded one by one, each counting under its own key, counted at once and both
inserted: a caller past a lowered quota was served past it. For one release the count also
takes the earlier key, so the two take turns (``docs/deployment.md``, *Upgrading replicas
one by one*). The earlier replica is played by the statements it ran, in a transaction of
the test's own: its admission's try of that key, and its other counts' wait for it.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from apcore_a2a.errors import StoreUnavailableError
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.quota_slots import TASK_SCOPE

from .test_lowered_quota import NEW, _one_past, counting
from .test_quota_slots_freed import CALLER, _replica

pytestmark = pytest.mark.postgres

#: the key the earlier releases hashed, as they spelt it
EARLIER = f"apcore-a2a quota {TASK_SCOPE} {CALLER}"


async def test_an_earlier_releases_count_and_this_ones_take_turns(pg_url: str) -> None:
    a, slots = await _replica(pg_url)
    earlier = create_engine(parse_store_url(pg_url))
    try:
        await _one_past(slots)  # room for one at the new quota
        async with earlier.begin() as counts:  # an earlier replica's count, under way
            await counts.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": EARLIER})
            with pytest.raises(StoreUnavailableError):  # was: served at once, beside it
                await slots.take(TASK_SCOPE, CALLER, "beside-an-earlier-count", NEW)
        async with counting(pg_url), earlier.begin() as takes:  # this release's count
            tried = text("SELECT pg_try_advisory_xact_lock(hashtext(:k))")
            assert (await takes.execute(tried, {"k": EARLIER})).scalar_one() is False  # was: True
        assert await slots.take(TASK_SCOPE, CALLER, "after", NEW)  # no count: room for one
    finally:
        await earlier.dispose()
        await a.aclose()

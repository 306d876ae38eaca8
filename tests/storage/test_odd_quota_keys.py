"""Quota slots count callers whose keys no text column holds (cluster mode on PostgreSQL).

A caller key is the task owner, or ``ip:<address>``: a token's JSON can spell a lone
surrogate or a NUL in its ``sub`` (``"\\ud800"``, ``"\\u0000"``), which PostgreSQL's text
refuses. Before, a take for such a caller failed with the driver's error: the stream of a
caller at ``max_streams_per_caller`` was answered HTTP 500 with a traceback logged
(``tests/auth/test_odd_caller_streams.py``). Such a key is counted under its SHA-256, as
an owner longer than a column holds is (``execution/identity.py``).
"""

from __future__ import annotations

from .test_quota_slots_freed import _replica

ODD = {
    "lone surrogate": "jwt::\ud800",
    "another surrogate": "jwt::\udc00",
    "NUL": "jwt::a\x00b",
    "long": "ip:" + "x" * 300,
    "unicode": "jwt::ключ🔑",
    "empty": "",
}


async def test_each_odd_key_has_its_own_quota(pg_url: str) -> None:
    a, slots = await _replica(pg_url)
    try:
        for name, key in ODD.items():
            assert await slots.take("stream", key, f"{name}-1", 1), name  # was: DBAPIError
            assert not await slots.take("stream", key, f"{name}-2", 1), name  # one each
            assert len(await slots.holders("stream", key)) == 1, name
        for name in ODD:
            await slots.give_back("stream", f"{name}-1")
        for name, key in ODD.items():
            assert await slots.take("stream", key, f"{name}-3", 1), name  # its lease
    finally:
        await a.aclose()

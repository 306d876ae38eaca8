"""A quota slot update the database cuts off is logged by its error's type, never with its
SQL or parameters (cluster mode on PostgreSQL).

SQLAlchemy's error text carries the statement and its parameters (the caller's key among
them in a take's count); the rest of the storage logs name the error's type. Before, a
stop during an outage logged ``could not free this replica's quota slots`` with the whole
``DELETE FROM apcore_a2a_quota_slots ...`` and its parameters at WARNING, and a retried
rename or recount each failure with its statement at DEBUG.
"""

from __future__ import annotations

import logging

import pytest

from .._postgres import kill_slot_renames
from .test_quota_slots_freed import CALLER, _replica, rename_dropped
from .test_recovery import eventually


def _no_sql(text: str) -> None:
    for leaked in ("[SQL", "[parameters", "apcore_a2a_quota_slots", CALLER):
        assert leaked not in text, text


async def test_a_stop_during_an_outage_logs_no_sql(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    schema = pg_url.rsplit("schema=", 1)[1]
    a, slots = await _replica(pg_url)
    assert await slots.take("streams", CALLER, "stream", 2)
    await kill_slot_renames(schema, "streams", True, deletes=True, rowless=True)
    try:
        await a.aclose()
    finally:
        await kill_slot_renames(schema, "streams", False, deletes=True, rowless=True)
    assert "could not free this replica's quota slots" in caplog.text
    _no_sql(caplog.text)


async def test_a_retried_rename_logs_no_sql(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="apcore_a2a.storage")
    a, slots = await _replica(pg_url)
    try:
        async with rename_dropped(pg_url, slots, "task-1", 2):
            await eventually(lambda: "could not rename a quota slot" in caplog.text)
        _no_sql(caplog.text)
    finally:
        await a.aclose()

"""A quota slot update the database cuts off is logged by its error's type, never with its
SQL or parameters (cluster mode on PostgreSQL).

SQLAlchemy's error text carries the statement and its parameters (the caller's key among
them in a take's count); the rest of the storage logs name the error's type. Before, a
stop during an outage logged ``could not free this replica's quota slots`` with the whole
``DELETE FROM apcore_a2a_quota_slots ...`` and its parameters at WARNING, and a retried
rename or recount each failure with its statement at DEBUG.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

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


def test_no_storage_log_line_carries_a_raw_database_error() -> None:
    """The rule above, for every log call of the storage and the quotas: an exception a
    handler caught goes to a log line as its type (or a text made from it on purpose),
    never as itself, whose text is SQLAlchemy's statement and parameters."""
    root = Path(__file__).resolve().parents[2] / "apcore_a2a"
    files = [*(root / "storage").glob("*.py"), root / "server" / "task_quota.py"]
    raw: list[str] = []
    for path in files:
        for handler in ast.walk(ast.parse(path.read_text())):
            if not isinstance(handler, ast.ExceptHandler) or handler.name is None:
                continue
            for call in ast.walk(handler):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and isinstance(call.func.value, ast.Name)
                    and call.func.value.id == "logger"
                    and any(isinstance(a, ast.Name) and a.id == handler.name for a in call.args)
                ):
                    raw.append(f"{path.relative_to(root)}:{call.lineno}")
    assert raw == []

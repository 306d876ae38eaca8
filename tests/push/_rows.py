"""Stored push-config rows of a SQL task store, read and damaged behind the agent's back."""

from __future__ import annotations

from typing import Any

from a2a.server.models import PushNotificationConfigModel
from sqlalchemy import func, select, update

from apcore_a2a.push.status import ConfigStatusBook
from apcore_a2a.storage._urls import create_engine, parse_store_url


async def config_rows(url: str) -> set[tuple[Any, ...]]:
    """Every row of ``push_notification_configs`` in the store at *url*."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(PushNotificationConfigModel.__table__))).all()
    finally:
        await engine.dispose()
    return {tuple(row) for row in rows}


async def record_rows(url: str, task_id: str) -> list[int]:
    """How many rows of *task_id* the push status tables (failures, versions) hold."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.connect() as conn:
            return [
                (
                    await conn.execute(select(func.count()).where(t.c.task_id == task_id))
                ).scalar_one()
                for t in ConfigStatusBook.tables
            ]
    finally:
        await engine.dispose()


async def damage_rows(url: str, task_id: str, damages: dict[str, tuple[str | None, bytes]]) -> None:
    """Overwrite stored configs of *task_id*: config id -> (protocol_version, config_data)."""
    engine = create_engine(parse_store_url(url))
    try:
        async with engine.begin() as conn:
            for config_id, (version, data) in damages.items():
                row = PushNotificationConfigModel
                where = (row.task_id == task_id) & (row.config_id == config_id)
                changed = await conn.execute(
                    update(row).where(where).values(protocol_version=version, config_data=data)
                )
                assert changed.rowcount == 1
    finally:
        await engine.dispose()

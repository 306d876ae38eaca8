"""Tripwire of ``upstream/unreadable_push_configs.py``: the SDK's config store reads a row
of a ``protocol_version`` it does not know as 0.3 (under the id its JSON names) and logs a
row it cannot read at ERROR with a traceback (quoting the row's values), on every read; and it reads good rows as
ours does.

The first test fails the day a2a-sdk refuses such rows and logs them without their
errors' chain: then ``ReadableConfigStore`` can go.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.compat.v0_3.model_conversions import core_to_compat_push_notification_config_model
from a2a.server.models import PushNotificationConfigModel
from a2a.server.tasks import DatabasePushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig
from cryptography.fernet import Fernet
from sqlalchemy import update

from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.upstream.unreadable_push_configs import ReadableConfigStore
from tests.storage._helpers import ctx

KEY = Fernet.generate_key()


@pytest.fixture
async def sdk_store(tmp_path: Path) -> AsyncIterator[DatabasePushNotificationConfigStore]:
    engine = create_engine(parse_store_url(f"sqlite:///{tmp_path / 'p.db'}"))
    store = DatabasePushNotificationConfigStore(engine, encryption_key=KEY)
    await store.initialize()
    yield store
    await engine.dispose()


def _config(config_id: str) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        id=config_id, task_id="t", url=f"http://127.0.0.1:9/{config_id}", token="tok"
    )


async def _store_row(
    store: DatabasePushNotificationConfigStore, config_id: str, **values: object
) -> None:
    await store.set_info("t", _config(config_id), ctx())
    if not values:
        return
    async with store.engine.begin() as conn:
        row = PushNotificationConfigModel
        where = (row.task_id == "t") & (row.config_id == config_id)
        await conn.execute(update(row).where(where).values(**values))


async def test_the_sdk_store_reads_unknown_versions_and_logs_unreadable_rows_with_tracebacks(
    sdk_store: DatabasePushNotificationConfigStore, caplog: pytest.LogCaptureFixture
) -> None:
    other = json.dumps({"id": "x", "url": "http://127.0.0.1:9/x"}).encode()
    await _store_row(sdk_store, "v", protocol_version="9.9", config_data=Fernet(KEY).encrypt(other))
    await _store_row(sdk_store, "k", config_data=Fernet(Fernet.generate_key()).encrypt(other))
    secret = json.dumps({"url": "http://h/p", "authentication": "Bearer s3cret"}).encode()
    await _store_row(
        sdk_store, "p", protocol_version="0.3", config_data=Fernet(KEY).encrypt(secret)
    )
    await _store_row(sdk_store, "good")

    caplog.set_level(logging.WARNING)
    read = await sdk_store.get_info("t", ctx())
    assert sorted(c.id for c in read) == ["good", "x"]  # "v" read as 0.3, under the JSON's id
    errors = [
        r for r in caplog.records if r.levelno >= logging.ERROR and "config k" in r.getMessage()
    ]
    assert errors and all(r.exc_info for r in errors)
    assert "s3cret" in caplog.text  # the traceback's pydantic error quotes the token

    ours = ReadableConfigStore(sdk_store.engine, encryption_key=KEY.decode())
    caplog.clear()
    for _ in range(2):
        assert [c.id for c in await ours.get_info("t", ctx())] == ["good"]
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 3 and not [r for r in warned if r.exc_info]
    assert "s3cret" not in caplog.text
    for config_id in ("k", "v", "p"):
        assert await ours.unreadable("t", config_id, ctx())
    assert not await ours.unreadable("t", "good", ctx())
    assert not await ours.unreadable("t", "k", ctx("bob"))


async def test_our_reading_of_good_rows_is_the_sdks(
    sdk_store: DatabasePushNotificationConfigStore,
) -> None:
    await _store_row(sdk_store, "v10")
    # A 0.3 row as the SDK's compat conversion writes it, and one stored before the key.
    v03 = core_to_compat_push_notification_config_model("t", _config("v03"), "x", Fernet(KEY))
    await _store_row(sdk_store, "v03", protocol_version="0.3", config_data=v03.config_data)
    plain = json.dumps({"id": "plain", "taskId": "t", "url": "http://127.0.0.1:9/plain"})
    await _store_row(sdk_store, "plain", config_data=plain.encode())

    ours = ReadableConfigStore(sdk_store.engine, encryption_key=KEY.decode())
    read = sorted(await ours.get_info("t", ctx()), key=lambda c: c.id)
    assert read == sorted(await sdk_store.get_info("t", ctx()), key=lambda c: c.id)
    assert [c.id for c in read] == ["plain", "v03", "v10"]
    assert read == sorted(await ours.get_info_for_dispatch("t"), key=lambda c: c.id)

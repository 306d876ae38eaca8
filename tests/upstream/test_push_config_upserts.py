"""Tripwire of ``upstream/push_config_upserts.py``, on PostgreSQL: a registration of a config
whose row another session deletes, or inserts, while the registration writes it.

The test's own session holds the row (``FOR UPDATE``), or an uncommitted insert of it,
until the registration waits for it; then deletes it, or commits the insert. a2a-sdk 1.3's
store (``session.merge``: a read, then an update or an insert) fails with SQLAlchemy's
``StaleDataError`` and ``IntegrityError``; ours stores the config. The first two tests fail
the day the SDK's store writes atomically: then ``UpsertingConfigStore`` can go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from a2a.server.tasks import DatabasePushNotificationConfigStore
from a2a.types import TaskPushNotificationConfig
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.exc import StaleDataError

from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.upstream.push_config_upserts import UpsertingConfigStore
from tests._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, pg_schema_url
from tests.storage._helpers import ctx

Store = DatabasePushNotificationConfigStore


@pytest.fixture
async def schema() -> AsyncIterator[tuple[str, str]]:
    """A fresh schema's store URL and name."""
    pytest.importorskip("asyncpg")
    async with pg_schema_url() as url:
        yield url, url.rsplit("schema=", 1)[1]


def _config(url: str) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(id="hook", task_id="t", url=url)


async def _race(
    kind: type[Store], schema: tuple[str, str], held: str, then: str
) -> tuple[Any, list[str]]:
    """Register ``hook`` of task ``t`` (a row already stored, or not) while the test's
    session runs *held* (the row held), then, once the registration waits for it, *then*
    before it commits: the registration's outcome, and the stored rows' URLs."""
    import asyncpg

    url, name = schema
    engine = create_engine(parse_store_url(url))
    store = kind(engine)
    await store.initialize()
    session = await asyncpg.connect(
        host=PG_HOST,
        port=PG_PORT,
        user=PG_USER,
        database=PG_DB,
        server_settings={"search_path": name},
    )
    try:
        if "UPDATE" in held:  # the row exists
            await store.set_info("t", _config("http://127.0.0.1:9/old"), ctx())
        await session.execute("BEGIN")
        await session.execute(held)
        registering = asyncio.ensure_future(
            store.set_info("t", _config("http://127.0.0.1:9/new"), ctx())
        )
        await _until(_blocked_by(session), registering)
        await session.execute(then)
        await session.execute("COMMIT")
        try:
            outcome: Any = await registering
        except Exception as exc:
            outcome = exc
        stored = [c.url for c in await store.get_info("t", ctx())]
        return outcome, stored
    finally:
        await session.close()
        await engine.dispose()


HOLD_ROW = "SELECT 1 FROM push_notification_configs WHERE config_id = 'hook' FOR UPDATE"
DELETE_ROW = "DELETE FROM push_notification_configs WHERE config_id = 'hook'"
INSERT_ROW = (
    "INSERT INTO push_notification_configs (task_id, config_id, config_data, owner, "
    "protocol_version) VALUES ('t', 'hook', convert_to('{\"url\": \"http://127.0.0.1:9/other\"}', "
    "'UTF8'), '', '1.0')"
)


async def test_the_sdk_store_fails_a_registration_whose_row_is_deleted_meanwhile(
    schema: tuple[str, str],
) -> None:
    outcome, _ = await _race(Store, schema, HOLD_ROW, DELETE_ROW)
    assert isinstance(outcome, StaleDataError), outcome


async def test_the_sdk_store_fails_a_registration_whose_id_is_inserted_meanwhile(
    schema: tuple[str, str],
) -> None:
    outcome, _ = await _race(Store, schema, INSERT_ROW, "SELECT 1")
    assert isinstance(outcome, IntegrityError), outcome


async def test_ours_stores_a_registration_whose_row_is_deleted_meanwhile(
    schema: tuple[str, str],
) -> None:
    outcome, stored = await _race(UpsertingConfigStore, schema, HOLD_ROW, DELETE_ROW)
    assert isinstance(outcome, TaskPushNotificationConfig), outcome
    assert stored == ["http://127.0.0.1:9/new"]


async def test_ours_stores_a_registration_whose_id_is_inserted_meanwhile(
    schema: tuple[str, str],
) -> None:
    outcome, stored = await _race(UpsertingConfigStore, schema, INSERT_ROW, "SELECT 1")
    assert isinstance(outcome, TaskPushNotificationConfig), outcome
    assert stored == ["http://127.0.0.1:9/new"]  # the last registration wins


def _blocked_by(session: Any) -> Callable[[], Awaitable[Any]]:
    pid = session.get_server_pid()
    query = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"

    async def check() -> Any:
        # Another connection: the session's own is inside the transaction it holds.
        import asyncpg

        probe = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            return await probe.fetchval(query, pid)
        finally:
            await probe.close()

    return check


async def _until(condition: Callable[[], Awaitable[Any]], running: asyncio.Future[Any]) -> None:
    deadline = time.monotonic() + 30  # a hang guard
    while not await condition():
        assert not running.done(), f"the registration never waited: {running.result()!r}"
        assert time.monotonic() < deadline, "the registration never waited for the row"
        await asyncio.sleep(0.02)

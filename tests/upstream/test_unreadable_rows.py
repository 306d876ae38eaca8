"""Tripwire of ``upstream/unreadable_rows.py``: the SDK's store raises its parse errors for a
row whose JSON its protocol version does not describe, and reads the others as we do.

The first test fails the day a2a-sdk answers such a row with an A2A error of its own (or
reads it): then ``RowReader`` and ``read_rows_safely`` can go.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.server.models import TaskModel
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Task, TaskState
from a2a.utils.errors import A2AError
from sqlalchemy import update

from apcore_a2a.errors import TaskUnreadableError
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.upstream.unreadable_rows import read_rows_safely
from tests.storage._helpers import ctx, make_task


@pytest.fixture
async def sdk_store(tmp_path: Path) -> AsyncIterator[DatabaseTaskStore]:
    store = DatabaseTaskStore(create_engine(parse_store_url(f"sqlite:///{tmp_path / 't.db'}")))
    await store.initialize()
    yield store
    await store.engine.dispose()


async def test_the_sdk_store_raises_no_a2a_error_for_a_row_it_cannot_read(
    sdk_store: DatabaseTaskStore,
) -> None:
    task = make_task(TaskState.TASK_STATE_COMPLETED)
    await sdk_store.save(task, ctx())
    async with sdk_store.engine.begin() as conn:
        damaged = {"state": "completed"}  # a 0.3 state name in a 1.0 row
        await conn.execute(update(TaskModel).where(TaskModel.id == task.id).values(status=damaged))
    with pytest.raises(Exception) as raised:
        await sdk_store.get(task.id, ctx())
    assert not isinstance(raised.value, A2AError), raised.value

    read_rows_safely(sdk_store)
    with pytest.raises(TaskUnreadableError, match=task.id):
        await sdk_store.get(task.id, ctx())


async def test_our_reading_of_a_good_row_is_the_sdks(sdk_store: DatabaseTaskStore) -> None:
    task = make_task(TaskState.TASK_STATE_WORKING)
    task.metadata.update({"k": "v"})
    await sdk_store.save(task, ctx())
    hooked = DatabaseTaskStore(sdk_store.engine)
    read_rows_safely(hooked)
    assert await hooked.get(task.id, ctx()) == await sdk_store.get(task.id, ctx()) == task


async def test_a_stores_own_conversion_still_reads_its_rows(sdk_store: DatabaseTaskStore) -> None:
    task = make_task(TaskState.TASK_STATE_WORKING)
    await sdk_store.save(task, ctx())

    def own(model: TaskModel) -> Task:
        if model.context_id != task.context_id:
            raise ValueError(model.context_id)
        return Task(id=model.id, context_id="theirs")

    sdk_store.model_to_core_conversion = own
    read_rows_safely(sdk_store)
    read_rows_safely(sdk_store)  # twice (a store handed to two agents): one reader
    found = await sdk_store.get(task.id, ctx())
    assert found == Task(id=task.id, context_id="theirs")
    async with sdk_store.engine.begin() as conn:
        await conn.execute(update(TaskModel).values(context_id="damaged"))
    with pytest.raises(TaskUnreadableError, match=task.id):
        await sdk_store.get(task.id, ctx())

"""The agent's own stores (a ``task_store`` URL) read their indexes only where those are
the ones their reads need. ``CREATE INDEX IF NOT EXISTS`` takes any index of the name for
built: one an operator made beforehand as docs/storage.md (*Database schema upgrades*)
advises, but partial, with a misspelt status expression, or (PostgreSQL) left invalid by a
``CREATE INDEX CONCURRENTLY`` cut short, was used by no query and said nothing. The start
now logs one WARNING per such index, naming what it covers, on SQLite and PostgreSQL, one
process and cluster mode; a start with the right ones says nothing.
"""

from __future__ import annotations

import logging

import pytest
from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy import text

from apcore_a2a.storage import open_stores
from apcore_a2a.storage._urls import create_engine, parse_store_url
from apcore_a2a.storage.contexts import INDEX_NAME
from apcore_a2a.storage.event_index import INDEX_NAME as EVENT_INDEX_NAME
from apcore_a2a.storage.listing import STATE_INDEX_NAME
from apcore_a2a.storage.running import INDEX_NAME as RUNNING_INDEX_NAME

from ._helpers import settings


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("apcore_a2a.storage")
    ]


@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
async def test_an_index_of_our_name_no_read_can_use_whole_is_said_at_start(
    sql_url: str, cluster: bool, caplog: pytest.LogCaptureFixture
) -> None:
    engine = create_engine(parse_store_url(sql_url))
    dialect = engine.dialect.name
    other_state = "(status ->> 'id')" if dialect == "postgresql" else "json_extract(status, '$.id')"
    try:
        await DatabaseTaskStore(engine).initialize()  # the tasks table, as a first start left it
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    f"CREATE INDEX {INDEX_NAME} ON tasks (context_id, owner, last_updated, id) "
                    "WHERE owner <> ''"
                )
            )
            await conn.execute(
                text(
                    f"CREATE INDEX {STATE_INDEX_NAME} ON tasks (owner, ({other_state}), last_updated, id)"
                )
            )
            # the running tasks' index of every task: no query of recovery's can use it
            await conn.execute(text(f"CREATE INDEX {RUNNING_INDEX_NAME} ON tasks (id)"))
    finally:
        await engine.dispose()
    for _ in range(2):  # each start says it, until the index is dropped
        caplog.clear()
        stores = open_stores(sql_url, settings(cluster=cluster))
        await stores.start()
        await stores.aclose()
        said = _warnings(caplog)
        ours = {
            name: [m for m in said if f"index {name} covers" in m]
            for name in (INDEX_NAME, STATE_INDEX_NAME, RUNNING_INDEX_NAME)
        }
        assert [len(v) for v in ours.values()] == [1, 1, 1], said
        assert "WHERE" in ours[INDEX_NAME][0] and "drop it and restart" in ours[INDEX_NAME][0]
        assert "'$.id'" in ours[STATE_INDEX_NAME][0] or "'id'" in ours[STATE_INDEX_NAME][0]
        assert EVENT_INDEX_NAME not in " ".join(said)


async def test_a_start_on_the_indexes_it_made_says_nothing(
    sql_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(2):
        caplog.clear()
        stores = open_stores(sql_url, settings(cluster=True))
        await stores.start()
        await stores.aclose()
        assert not [m for m in _warnings(caplog) if " covers " in m], caplog.text

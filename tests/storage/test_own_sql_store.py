"""An application's own a2a-sdk ``DatabaseTaskStore`` object as ``task_store`` (used as is,
docs/storage.md): its tasks are kept in its database and read back through the agent."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from a2a.server.tasks import DatabaseTaskStore
from sqlalchemy.ext.asyncio import create_async_engine

from tests.ops._agent import message_params, rpc, served


async def test_an_apps_own_sql_store_keeps_the_agents_tasks(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'own.db'}"
    engine = create_async_engine(url)
    try:
        async with served(task_store=DatabaseTaskStore(engine)) as (http, _app):
            sent = await rpc(http, "SendMessage", message_params("ops.add", {"a": 1, "b": 2}))
            task = sent["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            got = await rpc(http, "GetTask", {"id": task["id"]})
            assert got["result"]["id"] == task["id"]
    finally:
        await engine.dispose()
    # In the application's database, in the SDK's own table.
    with sqlite3.connect(tmp_path / "own.db") as db:
        rows = db.execute("SELECT status FROM tasks WHERE id = ?", (task["id"],)).fetchall()
    assert len(rows) == 1 and "COMPLETED" in str(rows[0][0]), rows

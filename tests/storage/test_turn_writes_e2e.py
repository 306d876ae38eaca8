"""A save of a task writes only the columns that changed (PostgreSQL, with and without
``--cluster``): a long conversation's history is not written again by each status change
of each turn (``docs/storage.md``, *What a long conversation writes*).

Triggers on ``UPDATE OF history`` / ``UPDATE OF artifacts`` note every update that names
the column with the value it already had: PostgreSQL writes a column named in an UPDATE
again (its TOAST too), and keeps one left out where it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .._postgres import pg_database_url
from .._support import ROOT, TLS, cli_server
from .test_cluster_write_path_e2e import FAST
from .test_write_path_e2e import V1, _body, _sql

BENCH = str(ROOT / "benchmarks" / "extensions")


@pytest.fixture(params=["single", "cluster"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url() -> Iterator[str]:
    with pg_database_url() as url:
        yield url


def _answer(task_id: str, turn: int) -> dict[str, Any]:
    body = _body("bench.turns", {"turn": turn})
    message = body["params"]["message"]  # type: ignore[index]
    message["taskId"] = task_id
    del message["metadata"]
    return body


async def test_a_save_rewrites_only_the_columns_that_changed(url: str, mode: str) -> None:
    args = ["--extensions-dir", BENCH, "--task-store", url, "--log-level", "warning"]
    args += ["--cluster"] * (mode == "cluster")
    with cli_server(args, env=FAST) as (base, _proc):
        async with httpx.AsyncClient(headers=V1, timeout=60, verify=TLS) as http:
            reply = await http.post(base + "/", json=_body("bench.turns", {"turns": 10}))
            task_id = reply.json()["result"]["task"]["id"]
            await _sql(
                url,
                "CREATE TABLE same_written (task_id TEXT, what TEXT)",
                "CREATE FUNCTION note_same() RETURNS trigger AS $$ BEGIN "
                "INSERT INTO same_written VALUES (NEW.id, TG_ARGV[0]); RETURN NEW; END $$ "
                "LANGUAGE plpgsql",
                "CREATE TRIGGER history_same AFTER UPDATE OF history ON tasks FOR EACH ROW "
                "WHEN (OLD.history::text = NEW.history::text) "
                "EXECUTE FUNCTION note_same('history')",
                "CREATE TRIGGER artifacts_same AFTER UPDATE OF artifacts ON tasks FOR EACH ROW "
                "WHEN (OLD.artifacts::text = NEW.artifacts::text) "
                "EXECUTE FUNCTION note_same('artifacts')",
            )
            for turn in range(1, 11):
                reply = await http.post(base + "/", json=_answer(task_id, turn))
                state = reply.json()["result"]["task"]["status"]["state"]
            assert state == "TASK_STATE_COMPLETED"
            assert len(reply.json()["result"]["task"]["history"]) >= 20
            rewritten = await _sql(url, "SELECT what, count(*) FROM same_written GROUP BY what")
    assert rewritten == []

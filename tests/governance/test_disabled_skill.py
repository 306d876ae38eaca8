"""A skill apcore's toggle disabled is an expected refusal, not a failure.

Before: the call reached apcore, whose ``MODULE_DISABLED`` the executor raised to the SDK,
whose producer and consumer each logged it at ERROR with a traceback, and a failed task
was left in the store. Now the request-context builder refuses it (-32601, "Skill is
disabled") before a task exists, with one INFO line.
"""

from __future__ import annotations

import logging

import pytest

from ._agent import V1, apcore_client, call, served


def _said(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(("a2a", "apcore", "uvicorn"))]


async def test_a_disabled_skill_is_refused_in_one_line_and_leaves_no_task(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    client = apcore_client()
    async with served(client.executor) as http:
        client.toggle_state.disable("demo.echo")
        caplog.clear()
        refused = await call(http, "demo.echo", {"text": "hi"})
        assert refused["error"]["code"] == -32601
        assert refused["error"]["message"] == "Skill is disabled: demo.echo"
        said = _said(caplog)
        listed = {"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}
        tasks = (await http.post("/", json=listed, headers=V1)).json()["result"]
        assert tasks.get("tasks", []) == []
        client.toggle_state.enable("demo.echo")
        again = await call(http, "demo.echo", {"text": "hi"})
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [r.exc_info for r in said if r.exc_info] == []
    assert [r.levelname for r in said if r.levelno >= logging.ERROR] == []
    lines = [r.getMessage() for r in said]
    assert lines == ["Skill demo.echo is disabled; refused"], lines

"""``max_unfinished_tasks_per_caller``: one caller cannot park tasks without bound.

A caller at its quota gets ``QuotaExceededError`` for a new task (JSON-RPC -32091 with
``retryAfter``, REST 429 with ``Retry-After``) while another caller is still served;
continuing, finishing or canceling one of its tasks frees a slot.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ._agent import agent_server
from ._client import V1, rpc, wire_message

KEY_A = {"X-API-Key": "key-a"}
KEY_B = {"X-API-Key": "key-b"}


async def _send(http: httpx.AsyncClient, key: dict[str, str], message: dict[str, Any]) -> Any:
    response = await http.post(
        "/", json=rpc("SendMessage", {"message": message}), headers={**V1, **key}
    )
    assert response.status_code == 200, response.text
    return response.json()


def _transfer() -> dict[str, Any]:
    return wire_message("life.transfer", {"to": "ann", "amount": 5})


async def test_a_caller_over_its_task_quota_is_refused_while_others_are_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        agent_server(
            caplog, max_unfinished_tasks_per_caller=3, api_keys=("key-a", "key-b")
        ) as agent,
        httpx.AsyncClient(base_url=agent.url, timeout=30) as http,
    ):
        parked = []
        for _ in range(3):
            answer = await _send(http, KEY_A, _transfer())
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            parked.append(answer["result"]["task"]["id"])

        over = await _send(http, KEY_A, _transfer())
        assert over["error"]["code"] == -32091, over
        assert "at most 3 unfinished tasks" in over["error"]["message"]
        (info,) = over["error"]["data"]
        assert info["reason"] == "QUOTA_EXCEEDED" and info["metadata"]["retryAfter"] == 30
        rest = await http.post(
            "/message:send", json={"message": _transfer()}, headers={**V1, **KEY_A}
        )
        assert rest.status_code == 429, rest.text
        assert rest.headers["retry-after"] == "30"
        assert rest.json()["error"]["status"] == "RESOURCE_EXHAUSTED"

        # Another caller is not affected.
        other = await _send(http, KEY_B, _transfer())
        assert other["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        # Continuing a parked task is never refused by the quota, and finishing it frees
        # a slot; so does a cancel.
        approve = wire_message(None, {"approved": True}, taskId=parked[0])
        done = await _send(http, KEY_A, approve)
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        again = await _send(http, KEY_A, _transfer())
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert (await _send(http, KEY_A, _transfer()))["error"]["code"] == -32091
        cancel = await http.post(
            "/", json=rpc("CancelTask", {"id": parked[1]}), headers={**V1, **KEY_A}
        )
        assert cancel.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        last = await _send(http, KEY_A, _transfer())
        assert last["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        # Refused requests created no task.
        listed = await http.post(
            "/", json=rpc("ListTasks", {"pageSize": 100}), headers={**V1, **KEY_A}
        )
        assert listed.json()["result"]["totalSize"] == 5

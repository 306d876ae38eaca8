"""``max_unfinished_tasks_per_caller``: one caller cannot park tasks without bound.

A caller at its quota gets ``QuotaExceededError`` for a new task (JSON-RPC -32091 with
``retryAfter``, REST 429 with ``Retry-After``) while another caller is still served;
continuing, finishing or canceling one of its tasks frees a slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from apcore_a2a.storage.quota_slots import TASK_SCOPE
from tests._postgres import PG_DB, PG_HOST, PG_PORT, PG_USER, kill_slot_renames, pg_schema_url
from tests._support import TLS

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


@contextlib.asynccontextmanager
async def _one_slot_cluster(
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """An agent in cluster mode on PostgreSQL with one unfinished task per caller: the
    schema of its store, and a client of it."""
    with pg_schema_url() as url:
        async with (
            agent_server(
                caplog, max_unfinished_tasks_per_caller=1, task_store=url, cluster=True
            ) as agent,
            httpx.AsyncClient(base_url=agent.url, timeout=60, verify=TLS) as http,
        ):
            yield url.rsplit("schema=", 1)[1], http


def _transfer() -> dict[str, Any]:
    return wire_message("life.transfer", {"to": "ann", "amount": 5})


async def test_a_caller_over_its_task_quota_is_refused_while_others_are_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        agent_server(
            caplog, max_unfinished_tasks_per_caller=3, api_keys=("key-a", "key-b")
        ) as agent,
        httpx.AsyncClient(base_url=agent.url, timeout=30, verify=TLS) as http,
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
        assert info["reason"] == "QUOTA_EXCEEDED" and info["metadata"]["retryAfter"] == "30"
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


async def test_a_cancel_answers_after_its_slot_is_free_in_cluster_mode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Cluster mode keeps the slots in the database: the answer of a cancel leaves only once
    the canceled task's slot is given back there, so the caller's next task (on any replica)
    is never refused by a slot that is about to be freed."""
    import asyncpg

    async with _one_slot_cluster(caplog) as (schema, http):
        parked = (await _send(http, KEY_A, _transfer()))["result"]["task"]["id"]
        locker = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database=PG_DB)
        try:
            # The slot table held: the cancel's give-back waits on it.
            lock = locker.transaction()
            await lock.start()
            await locker.execute(f"LOCK TABLE {schema}.apcore_a2a_quota_slots")
            cancel = asyncio.ensure_future(
                http.post("/", json=rpc("CancelTask", {"id": parked}), headers={**V1, **KEY_A})
            )
            for _ in range(600):
                waiting = await locker.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = "
                    f"'{schema}.apcore_a2a_quota_slots'::regclass"
                )
                if waiting or cancel.done():
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            assert not cancel.done(), "the cancel answered before its slot was given back"
            await lock.rollback()
        finally:
            await locker.close()
        answer = (await cancel).json()
        assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED", answer
        again = await _send(http, KEY_A, _transfer())
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_a_slot_whose_rename_failed_counts_until_its_task_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Cluster mode: a request whose task outlives it hands its slot to the task (renamed to
    the task's id); here the database drops the connection of that rename. Before, the slot
    stayed under the request's name, which nothing gives back: the task's end freed
    nothing, and the caller was refused every new task for that replica's life. Now the
    rename is retried once the database is back: the parked task still counts, and its end
    frees the slot."""
    async with _one_slot_cluster(caplog) as (schema, http):
        await kill_slot_renames(schema, TASK_SCOPE, True)
        parked = (await _send(http, KEY_A, _transfer()))["result"]["task"]
        await kill_slot_renames(schema, TASK_SCOPE, False)
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", parked
        # The parked task holds the caller's one slot.
        assert (await _send(http, KEY_A, _transfer()))["error"]["code"] == -32091
        approve = wire_message(None, {"approved": True}, taskId=parked["id"])
        done = await _send(http, KEY_A, approve)
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        again = await _send(http, KEY_A, _transfer())
        assert "result" in again, again  # was: -32091, for good
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_a_slot_whose_free_failed_is_freed_when_the_caller_reaches_its_quota(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Cluster mode: a request whose task finishes in it gives its slot back, kept a second
    for the caller's next request, then freed; here the database drops the connection of
    that free. Before, the row stayed leased to the replica, which no longer knew it: the
    caller, back under its quota, was refused every new task (-32091) for that replica's
    life. Now the take that finds the quota full frees it."""
    async with _one_slot_cluster(caplog) as (schema, http):
        await kill_slot_renames(schema, TASK_SCOPE, True, deletes=True)
        echo = wire_message("life.echo", {"text": "x"})
        done = (await _send(http, KEY_A, echo))["result"]["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
        for _ in range(600):  # a hang guard: the free fails a second later
            if "could not free 1 quota slots" in caplog.text:
                break
            await asyncio.sleep(0.05)
        await kill_slot_renames(schema, TASK_SCOPE, False, deletes=True)
        again = await _send(http, KEY_A, _transfer())
        assert "result" in again, again  # was: -32091, for good
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert (await _send(http, KEY_A, _transfer()))["error"]["code"] == -32091

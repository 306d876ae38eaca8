"""``max_task_history_messages`` / ``max_task_history_bytes``: one task's conversation is
bounded.

Every follow-up of a task rewrites and answers its whole history, so a caller answering
an ``input-required`` skill forever (one task, well inside its unfinished-task quota) made
each turn cost more than the last, without end: measured on the memory store, 18 ms per
turn at the start and over 100 ms at 1,600 messages (store bytes per turn:
``python -m benchmarks.growth --dimensions turns``). A
follow-up to a task whose history holds the bound is refused with the quota error on
every binding and version, the task stays as it was, and the conversation goes on in a
new task of the same context.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest

from tests._sdk import make_client, request
from tests._support import TLS

from ._outputs_agent import ALL_TRANSPORTS, INPUT_REQUIRED, send, serve_outputs, text_request

V1 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def bounded_url() -> Iterator[str]:
    with serve_outputs(max_task_history_messages=6, max_task_history_bytes=4000) as url:
        yield url


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_a_follow_up_past_the_history_bound_is_refused_and_the_task_kept(
    bounded_url: str, binding: str, version: str
) -> None:
    client = await make_client(bounded_url, binding, version)
    try:
        first = await send(client, text_request("out.reply", "?"))
        for _ in range(3):  # each turn adds the answer and the question asked again
            asked = await send(client, text_request(None, "?", task_id=first.id))
            assert asked.status.state == INPUT_REQUIRED
        with pytest.raises(Exception) as refused:
            await send(client, text_request(None, "?", task_id=first.id))
        # The SDK client keeps the HTTP status of REST errors only; the codes, raw, below.
        shown = {"JSONRPC": "may (7 messages, ", "HTTP+JSON": "429", "GRPC": "RESOURCE_EXHAUSTED"}
        assert shown[binding] in str(refused.value), refused.value
        kept = await client.get_task(GetTaskRequest(id=first.id))
        assert (kept.status.state, len(kept.history)) == (INPUT_REQUIRED, 7)
        # The conversation goes on in a new task of its context; the full one can be canceled.
        again = request("out.reply", text="?", context_id=first.context_id)
        assert (await send(client, again)).status.state == INPUT_REQUIRED
        await client.cancel_task(CancelTaskRequest(id=first.id))
    finally:
        await client.close()


def _message(data: dict[str, Any], task_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        "metadata": {"skillId": "out.trip"},
    }
    if task_id:
        message["taskId"] = task_id
    return message


async def test_a_history_over_its_bytes_is_refused_without_a_retry_hint(bounded_url: str) -> None:
    async with httpx.AsyncClient(base_url=bounded_url, timeout=60, verify=TLS) as http:

        async def send_rpc(message: dict[str, Any]) -> Any:
            params = {"message": message}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
            return (await http.post("/", json=body, headers=V1)).json()

        task = (await send_rpc(_message({"origin": "SFO"})))["result"]["task"]
        # One answer that does not fit (seats is an integer) but is large: asked again.
        big = await send_rpc(_message({"seats": "x" * 5000}, task["id"]))
        assert big["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        over = await send_rpc(_message({"destination": "JFK"}, task["id"]))
        assert over["error"]["code"] == -32091, over
        assert "(3 messages, " in over["error"]["message"]
        (info,) = over["error"]["data"]
        assert info["reason"] == "QUOTA_EXCEEDED" and "retryAfter" not in info["metadata"]
        rest = await http.post(
            "/message:send",
            json={"message": _message({"destination": "JFK"}, task["id"])},
            headers=V1,
        )
        assert rest.status_code == 429 and "retry-after" not in rest.headers, rest.text
        assert rest.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
        held = await http.get(f"/tasks/{task['id']}", headers=V1)
        assert held.json()["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert len(held.json()["history"]) == 3


async def test_the_bound_holds_in_cluster_mode_on_sqlite(tmp_path: Path) -> None:
    """Cluster mode claims a wait in the shared database: the refusal comes before it."""
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    with serve_outputs(task_store=store, cluster=True, max_task_history_messages=4) as url:
        client = await make_client(url, "JSONRPC", "1.0")
        try:
            first = await send(client, text_request("out.reply", "?"))
            for _ in range(2):  # each adds the answer and the question: 5 messages
                await send(client, text_request(None, "?", task_id=first.id))
            for _ in range(2):  # refused, and again: the wait was never claimed
                with pytest.raises(Exception, match="may \\(5 messages, "):
                    await send(client, text_request(None, "?", task_id=first.id))
            kept = await client.get_task(GetTaskRequest(id=first.id))
            assert (kept.status.state, len(kept.history)) == (INPUT_REQUIRED, 5)
        finally:
            await client.close()


async def test_a_count_bound_alone_names_no_byte_size() -> None:
    """With the byte bound off (0) the history's size is not read: the refusal said "0
    bytes" of a history of several kB."""
    with serve_outputs(max_task_history_messages=3, max_task_history_bytes=0) as url:
        client = await make_client(url, "JSONRPC", "1.0")
        try:
            first = await send(client, text_request("out.reply", "?"))
            await send(client, text_request(None, "?", task_id=first.id))
            with pytest.raises(Exception) as refused:
                await send(client, text_request(None, "?", task_id=first.id))
        finally:
            await client.close()
    assert "may (3 messages): cancel it" in str(refused.value), refused.value

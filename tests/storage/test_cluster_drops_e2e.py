"""``cancel_on_disconnect`` across replicas: a stream on another replica keeps the task.

Two cluster replicas (``--cancel-on-disconnect``) on one store. A task streams on A while
a client subscribes to it on B; A's client hangs up. The docs promise that a dropped
stream cancels its task only when no other stream follows it: B's subscription does, so
the task runs to its end. Once B's subscriber, the last, hangs up too, the task is
canceled as for any last dropped stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from .._support import TLS, rpc_stream
from .test_replicas_e2e import PROBES, _pair

V10 = {"A2A-Version": "1.0"}
#: generous bound on any one wait of these tests (no timing is asserted)
WAIT = 60.0


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("drops")
    with _pair(request.param, folder, "--cancel-on-disconnect", extensions=PROBES) as (a, b):
        yield a[0], b[0]


def _chunks(count: int) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"count": count, "size": 16, "delay": 0.05}}],
        "metadata": {"skillId": "probe.chunks"},
    }


def _state(result: dict[str, Any]) -> str | None:
    for key in ("task", "statusUpdate"):
        if key in result:
            return str(result[key]["status"]["state"])
    return None


async def _stored_state(url: str, task_id: str) -> str:
    async with httpx.AsyncClient(timeout=WAIT, verify=TLS) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        answer = (await http.post(url + "/", json=body, headers=V10)).json()
    return str(answer["result"]["status"]["state"])


async def _results(frames: AsyncIterator[tuple[str | None, Any]]) -> AsyncIterator[Any]:
    async for _sse_id, result in frames:
        yield result


async def _first_two(results: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [await anext(results), await anext(results)]


async def _followed_on_b(
    a: str, b: str, stack_a: contextlib.AsyncExitStack, stack_b: contextlib.AsyncExitStack
) -> tuple[str, AsyncIterator[dict[str, Any]]]:
    """A task streaming on A (long enough to outlive the test's hang-ups) that a client
    on B follows: (its id, B's remaining results). Each stream is closed with its stack."""
    on_a = _results(
        await stack_a.enter_async_context(
            rpc_stream(a, "SendStreamingMessage", {"message": _chunks(100)}, timeout=WAIT)
        )
    )
    task_id = str((await asyncio.wait_for(_first_two(on_a), WAIT))[0]["task"]["id"])
    on_b = _results(
        await stack_b.enter_async_context(
            rpc_stream(b, "SubscribeToTask", {"id": task_id}, timeout=WAIT)
        )
    )
    # B's first frames are out: its subscription follows the task from here on.
    await asyncio.wait_for(_first_two(on_b), WAIT)
    return task_id, on_b


async def test_a_subscriber_on_another_replica_keeps_a_dropped_streams_task(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    async with contextlib.AsyncExitStack() as stack_b:
        async with contextlib.AsyncExitStack() as stack_a:
            task_id, on_b = await _followed_on_b(a, b, stack_a, stack_b)
        # A's client has hung up; B's still reads, to the task's end.
        states = [_state(result) async for result in on_b]
    assert states[-1] == "TASK_STATE_COMPLETED", states[-3:]
    assert await _stored_state(b, task_id) == "TASK_STATE_COMPLETED"


async def test_the_last_stream_dropped_on_any_replica_cancels(replicas: tuple[str, str]) -> None:
    a, b = replicas
    async with contextlib.AsyncExitStack() as stack_b, contextlib.AsyncExitStack() as stack_a:
        task_id, _on_b = await _followed_on_b(a, b, stack_a, stack_b)
    # Both clients hung up, A's first: B's subscriber was the last to follow the task.
    deadline = asyncio.get_running_loop().time() + WAIT
    while (state := await _stored_state(a, task_id)) != "TASK_STATE_CANCELED":
        assert state == "TASK_STATE_WORKING", state
        assert asyncio.get_running_loop().time() < deadline, "never canceled"
        await asyncio.sleep(0.1)

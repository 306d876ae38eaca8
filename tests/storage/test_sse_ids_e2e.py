"""One SSE id, one event: a message stream and a subscription never differ at an id.

A task streams on replica A (``SendStreamingMessage``) while a client subscribes to it on
B; the task is canceled through B. With two replicas, B writes ``canceled`` as a status
update at the next position of the task's event log, and A's run, which learns of it at
its next save, ends A's stream with the whole ``Task`` as stored. Every id both streams
carry must name the same event: a client resuming from an id it saw on one stream gets
what follows that event on the other. Also with one server and its memory log (the
cancel then reaches the run itself), and with ``--workers 2``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from .._support import TLS, cli_server, rpc_stream
from .test_replicas_e2e import PROBES, _pair

V10 = {"A2A-Version": "1.0"}
#: generous bound on any one wait (no timing is asserted)
WAIT = 60.0
Frames = list[tuple[str | None, dict[str, Any]]]


@pytest.fixture(scope="module", params=["memory", "workers", "sqlite", "postgresql"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    # one server: its memory log, or two workers on one port (the cancel reaches the
    # other worker on some runs only)
    if request.param in ("memory", "workers"):
        store = f"sqlite:///{tmp_path_factory.mktemp('ids') / 'tasks.db'}"
        extra = ["--workers", "2", "--cluster", "--task-store", store]
        if request.param == "memory":
            extra = ["--task-store", "memory://"]
        with cli_server(["--extensions-dir", PROBES, *extra]) as (a, _p):
            yield a, a
        return
    with _pair(request.param, tmp_path_factory.mktemp("ids"), extensions=PROBES) as (a, b):
        yield a[0], b[0]


async def _take(frames: AsyncIterator[Any], count: int) -> Frames:
    return [await anext(frames) for _ in range(count)]


def _kind(result: dict[str, Any]) -> str:
    (kind,) = result
    return kind


def _ids_of(frames: Frames) -> dict[str, str]:
    """Each id of *frames* with the kind of event it names (an id twice: the test fails)."""
    ids = [sse_id for sse_id, _result in frames if sse_id is not None]
    assert len(ids) == len(set(ids)), f"an id twice on one stream: {ids}"
    return {sse_id: _kind(result) for sse_id, result in frames if sse_id is not None}


async def test_a_canceled_streams_ids_name_the_subscribers_events(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"count": 400, "size": 16, "delay": 0.05}}],
        "metadata": {"skillId": "probe.chunks"},
    }
    async with rpc_stream(a, "SendStreamingMessage", {"message": message}, timeout=WAIT) as on_a:
        seen_a = await asyncio.wait_for(_take(on_a, 2), WAIT)
        task_id = seen_a[0][1]["task"]["id"]
        async with rpc_stream(b, "SubscribeToTask", {"id": task_id}, timeout=WAIT) as on_b:
            seen_b = await asyncio.wait_for(_take(on_b, 2), WAIT)
            cancel = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task_id}}
            async with httpx.AsyncClient(timeout=WAIT, verify=TLS) as http:
                canceled = (await http.post(b + "/", json=cancel, headers=V10)).json()
            assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED", canceled

            async def rest(frames: AsyncIterator[Any]) -> Frames:
                return [frame async for frame in frames]

            tails = asyncio.gather(rest(on_a), rest(on_b))
            tail_a, tail_b = await asyncio.wait_for(tails, WAIT)
    seen_a += tail_a
    seen_b += tail_b
    for frames in (seen_a, seen_b):  # both end at the cancel
        last = frames[-1][1]
        assert last[_kind(last)]["status"]["state"] == "TASK_STATE_CANCELED", frames[-3:]
    ids_a, ids_b = _ids_of(seen_a), _ids_of(seen_b)
    # The subscription's first event, the task as it stood, has an id of its own.
    assert seen_b[0][0] not in ids_a, seen_b[0]
    shared = ids_a.keys() & ids_b.keys()
    assert shared, (ids_a, ids_b)
    differ = {i: (ids_a[i], ids_b[i]) for i in shared if ids_a[i] != ids_b[i]}
    assert not differ, f"one id, two events (message stream, subscription): {differ}"

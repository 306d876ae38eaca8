"""A whole stream within ``timeout=`` seconds (``stream_message``, ``resubscribe``): an agent
that keeps a stream alive for ever, with keep-alive comments or with one new event per
connection it then drops (each resumed), is given up on with the client's typed
:class:`A2AConnectionError`, and the connection is closed. Real uvicorn servers on
127.0.0.1, scripted as such agents."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from apcore_a2a.client import A2AClient, A2AConnectionError
from tests._support import running_server

from ._stub_agent import CARD_V10, StubAgent

#: how long a scripted agent keeps a stream up at most (a guard: the test never waits it)
_GUARD_SECONDS = 60.0


def _task_event(request_id: Any, version: str) -> bytes:
    task: dict[str, Any] = {"id": "t-1", "contextId": "c-1"}
    if version == "0.3":
        result = task | {"kind": "task", "status": {"state": "working"}}
    else:
        result = {"task": task | {"status": {"state": "TASK_STATE_WORKING"}}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()


class _Lively:
    """Every stream: the task (SSE id ``n``, one more than the ``Last-Event-ID`` it resumes
    from), then keep-alive comments (*drops*: False) or the connection cut (True)."""

    def __init__(self, *, drops: bool, version: str = "1.0") -> None:
        self.stub = StubAgent(card=dict(CARD_V10), card_paths=())
        self.drops, self.version = drops, version
        self.streams = 0
        self.gone = 0  # streams whose client went away

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stub(scope, receive, send)
            return
        request = json.loads((await receive())["body"])
        self.streams += 1
        since = dict(scope["headers"]).get(b"last-event-id", b"0")
        start = {"type": "http.response.start", "status": 200}
        await send(start | {"headers": [(b"content-type", b"text/event-stream")]})
        event = b"id: %d\ndata: %s\n\n" % (int(since) + 1, _task_event(request["id"], self.version))
        await send({"type": "http.response.body", "body": event, "more_body": True})
        if self.drops:
            raise ConnectionAbortedError("cut after one event")  # uvicorn aborts it

        async def alive() -> None:
            while True:
                await asyncio.sleep(0.05)
                await send({"type": "http.response.body", "body": b": ka\n\n", "more_body": True})

        beating = asyncio.ensure_future(alive())
        try:
            async with asyncio.timeout(_GUARD_SECONDS):
                while (await receive())["type"] != "http.disconnect":
                    pass
            self.gone += 1
        finally:
            beating.cancel()


async def _collect(stream: AsyncIterator[dict[str, Any]], into: list[dict[str, Any]]) -> None:
    async for event in stream:
        into.append(event)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize("drops", [False, True], ids=["keep-alives", "one-event-per-connection"])
@pytest.mark.parametrize("method", ["stream_message", "resubscribe"])
async def test_a_stream_kept_alive_for_ever_ends_at_its_timeout(
    method: str, drops: bool, version: Any
) -> None:
    agent = _Lively(drops=drops, version=version)
    seen: list[dict[str, Any]] = []
    async with running_server(agent) as url, A2AClient(url, protocol=version) as client:
        stream = (
            client.stream_message("x", timeout=1.5)
            if method == "stream_message"
            else client.resubscribe("t-1", timeout=1.5)
        )
        async with asyncio.timeout(30):  # a hang guard, not a speed target
            with pytest.raises(A2AConnectionError, match=r"did not end within 1\.5 s") as ended:
                await _collect(stream, seen)
        if not drops:
            async with asyncio.timeout(10):  # the agent sees the connection go
                while agent.gone < agent.streams:
                    await asyncio.sleep(0.01)
    assert seen, "the stream's events came up to the timeout"
    assert {e["id"] for e in seen} == {"t-1"}
    assert (agent.streams > 1) is drops, "resumed while it dropped, once while it lived"
    assert ended.value.status_code is None
    assert ended.value.__cause__ is None


@pytest.mark.parametrize("timeout", [0, -1, float("nan")])
async def test_a_stream_timeout_must_be_positive(timeout: float) -> None:
    client = A2AClient("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="timeout must be positive"):
        client.stream_message("x", timeout=timeout)
    with pytest.raises(ValueError, match="timeout must be positive"):
        client.resubscribe("t-1", timeout=timeout)
    await client.aclose()

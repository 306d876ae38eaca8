"""A replica killed (SIGKILL) while it serves a caller's streams, two agent processes on
one PostgreSQL schema: what the caller's quota and a subscriber on the other replica see.

Quota 3 streams per caller. The caller streams two long tasks on A and subscribes on B
to the first. A is killed. At once, a fourth stream on B is refused (-32091: A's two
slots are held until A counts as dead, never handed out beside them). Then B's subscriber
ends with the task ``failed`` (recovery on B, "Interrupted by server restart"), and the
caller gets its three streams on B, not a fourth.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from .._postgres import pg_schema_url
from .._support import EXAMPLES, TLS, ServerProcess, cli_server, sse_frames

QUOTA = 3
ENV = {
    "A2A_MAX_STREAMS_PER_CALLER": str(QUOTA),
    "A2A_CLUSTER_HEARTBEAT_INTERVAL": "0.5",
    "A2A_CLUSTER_REPLICA_TIMEOUT": "5",
    "A2A_CLUSTER_POLL_INTERVAL": "0.1",
    "A2A_SHUTDOWN_TIMEOUT": "1",  # B stops with its streams' tasks still running
}
V1 = {"A2A-Version": "1.0"}


@pytest.fixture
def replicas() -> Iterator[tuple[tuple[str, ServerProcess], str]]:
    with pg_schema_url(agents=2) as url:
        args = ["--extensions-dir", str(EXAMPLES / "extensions"), "--task-store", url]
        args.append("--cluster")
        with cli_server(args, env=ENV) as a, cli_server(args, env=ENV) as (b, _pb):
            yield a, b


def _countdown() -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"start": 100, "delay": 1}}],
        "metadata": {"skillId": "text.countdown"},
    }
    return {"message": message}


@contextlib.asynccontextmanager
async def _stream(
    http: httpx.AsyncClient, base: str, method: str, params: dict[str, Any]
) -> AsyncIterator[tuple[dict[str, Any] | None, AsyncIterator[tuple[str | None, Any]]]]:
    """``(None, frames)`` for an open stream, ``(its JSON error, _)`` for a refused one."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.stream("POST", base + "/", json=body, headers=V1) as answer:
        if not answer.headers["content-type"].startswith("text/event-stream"):
            await answer.aread()
            yield answer.json()["error"], sse_frames(answer)
            return
        async with contextlib.aclosing(sse_frames(answer)) as frames:
            yield None, frames


def _state(result: dict[str, Any]) -> str | None:
    task = result.get("task") or result.get("statusUpdate") or {}
    return task.get("status", {}).get("state")


async def test_a_killed_replicas_streams_free_their_slots_only_once_it_is_dead(
    replicas: tuple[tuple[str, ServerProcess], str],
) -> None:
    (a, pa), b = replicas
    async with (
        contextlib.AsyncExitStack() as on_a,
        httpx.AsyncClient(timeout=60, verify=TLS) as http,
    ):
        ids = []
        for _ in range(2):
            refused, frames = await on_a.enter_async_context(
                _stream(http, a, "SendStreamingMessage", _countdown())
            )
            assert refused is None, refused
            _, first = await anext(frames)
            ids.append(first["result"]["task"]["id"])
        async with _stream(http, b, "SubscribeToTask", {"id": ids[0]}) as (refused, watch):
            assert refused is None, refused
            await anext(watch)
            async with _stream(http, b, "SendStreamingMessage", _countdown()) as (over, _):
                assert over is not None and over["code"] == -32091, over
            pa.kill9()
            pa.wait()
            # A's slots are A's until A counts as dead: the quota holds.
            async with _stream(http, b, "SendStreamingMessage", _countdown()) as (over, _):
                assert over is not None and over["code"] == -32091, over
            last = None
            with contextlib.suppress(httpx.HTTPError):
                async for _, frame in watch:
                    last = frame["result"]
            assert last is not None and _state(last) == "TASK_STATE_FAILED", last
        # The caller's three streams, on B alone now.
        async with contextlib.AsyncExitStack() as on_b:
            held = 0
            deadline = time.monotonic() + 60  # a hang guard: A counts as dead after 5 s
            while held < QUOTA:
                stream = _stream(http, b, "SendStreamingMessage", _countdown())
                refused, frames = await on_b.enter_async_context(stream)
                if refused is None:
                    await anext(frames)
                    held += 1
                    continue
                assert refused["code"] == -32091, refused
                assert time.monotonic() < deadline, "A's slots were never freed"
                await asyncio.sleep(0.2)
            async with _stream(http, b, "SendStreamingMessage", _countdown()) as (over, _):
                assert over is not None and over["code"] == -32091, over

"""Sync modules run on a bounded pool of ``sync_workers`` threads (default 32)."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests._support import TLS

from ._agent import Agent
from ._client import V1, rpc, wire_message


async def _until(condition: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} not reached within {timeout}s"
        await asyncio.sleep(0.01)


async def test_32_concurrent_sync_calls_run_at_once_and_the_loop_stays_responsive(
    agent: Agent,
) -> None:
    assert agent.state.settings.sync_workers == 32
    limits = httpx.Limits(max_connections=40)
    # Two anonymous callers, 16 calls each: one caller alone holds at most 24 threads by
    # default (sync_workers_per_caller, tests/lifecycle/test_fair_sync_pool.py).
    other = httpx.AsyncHTTPTransport(local_address="127.0.0.2", limits=limits)
    async with (
        httpx.AsyncClient(base_url=agent.url, limits=limits, timeout=60, verify=TLS) as http,
        httpx.AsyncClient(base_url=agent.url, transport=other, timeout=60) as http2,
    ):

        async def call(client: httpx.AsyncClient) -> dict[str, object]:
            body = rpc("SendMessage", {"message": wire_message("life.hold", {})})
            return (await client.post("/", json=body, headers=V1)).json()  # type: ignore[no-any-return]

        calls = [asyncio.create_task(call(c)) for c in (http, http2) for _ in range(16)]
        # Each call holds its worker thread until released: 32 of them running at once
        # is only possible with 32 threads (the default pool, 6 threads here, stalls at 6).
        await _until(lambda: agent.probe.running == 32, "32 sync calls running at once")
        # The event loop still answers other requests while every worker is held.
        health = await http.get("/health")
        assert health.status_code == 200
        assert health.json()["status"] == "healthy"
        assert agent.probe.running == 32
        agent.probe.release.set()
        results = await asyncio.gather(*calls)

    assert agent.probe.peak == 32
    states = [r["result"]["task"]["status"]["state"] for r in results]  # type: ignore[index]
    assert states == ["TASK_STATE_COMPLETED"] * 32
    outputs = [r["result"]["task"]["artifacts"][0]["parts"][0]["data"] for r in results]  # type: ignore[index]
    assert outputs == [{"opened": True}] * 32

"""Sync modules run on a bounded pool of ``sync_workers`` threads (default 32)."""

from __future__ import annotations

import asyncio
import time

import httpx

from ._agent import Agent
from ._client import V1, rpc, wire_message


async def test_32_concurrent_sync_calls_run_at_once_and_the_loop_stays_responsive(
    agent: Agent,
) -> None:
    assert agent.state.settings.sync_workers == 32
    limits = httpx.Limits(max_connections=40)
    async with httpx.AsyncClient(base_url=agent.url, limits=limits, timeout=30) as http:

        async def call() -> dict[str, object]:
            body = rpc("SendMessage", {"message": wire_message("life.deaf", {"seconds": 0.5})})
            return (await http.post("/", json=body, headers=V1)).json()  # type: ignore[no-any-return]

        started = time.monotonic()
        calls = [asyncio.create_task(call()) for _ in range(32)]
        while agent.probe.running < 32 and time.monotonic() - started < 5:
            await asyncio.sleep(0.01)
        # The event loop still answers other requests while every worker is busy.
        health = await http.get("/health")
        assert health.status_code == 200
        assert health.json()["status"] == "healthy"
        assert agent.probe.running > 0
        results = await asyncio.gather(*calls)
        elapsed = time.monotonic() - started

    assert agent.probe.peak == 32  # all 32 ran side by side, none waited for a thread
    states = [r["result"]["task"]["status"]["state"] for r in results]
    assert states == ["TASK_STATE_COMPLETED"] * 32
    assert elapsed < 1.5  # one 0.5 s wave; the default pool (6 threads here) needs ~3 s

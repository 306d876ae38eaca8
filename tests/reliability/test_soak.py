"""Soak: 200,000 tasks through the default (bounded) memory store, RSS sampled.

Runs only in the nox ``soak``/``reliability`` sessions (``A2A_RELIABILITY_FULL=1``). The
store keeps at most ``task_max_capacity`` tasks (10,000), so once it is full the agent's
resident memory must level off: the last sample may not exceed the one taken after the
store filled by more than 25 %.
"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest

from tests._support import TLS

from . import _report
from ._load import message
from ._serve import agent_process

pytestmark = pytest.mark.skipif(
    not _report.FULL, reason="long-running: nox -s soak / reliability only"
)
TOTAL = int(os.environ.get("A2A_SOAK_TASKS", "200000"))
SAMPLE_EVERY = 10_000
TALLY = _report.tally("soak: memory store")


async def test_soak_memory_store_rss_is_bounded() -> None:
    samples: list[tuple[int, int]] = []
    failures = 0
    with agent_process() as served:
        limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
        async with httpx.AsyncClient(
            base_url=served.url, timeout=30, limits=limits, verify=TLS
        ) as http:
            samples.append((0, served.rss_kib()))
            next_id = 0

            async def worker() -> None:
                nonlocal next_id, failures
                while next_id < TOTAL:
                    n = next_id
                    next_id += 1
                    body = {
                        "jsonrpc": "2.0",
                        "id": n,
                        "method": "SendMessage",
                        "params": {"message": message("rel.add", {"a": n, "b": 1})},
                    }
                    reply = (await http.post("/", json=body, headers={"A2A-Version": "1.0"})).json()
                    task = reply.get("result", {}).get("task", {})
                    if task.get("status", {}).get("state") != "TASK_STATE_COMPLETED":
                        failures += 1
                    if (n + 1) % SAMPLE_EVERY == 0:
                        samples.append((n + 1, served.rss_kib()))

            await asyncio.gather(*(worker() for _ in range(16)))
            listed = (
                await http.post(
                    "/",
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "ListTasks",
                        "params": {"pageSize": 1},
                    },
                    headers={"A2A-Version": "1.0"},
                )
            ).json()
            assert (await http.get("/health")).status_code == 200
            fds = served.fd_count()
    samples.sort()
    filled = next(rss for n, rss in samples if n >= 20_000)
    TALLY.cases += TOTAL
    TALLY.violations += failures
    TALLY.rss_start_kib = samples[0][1]
    TALLY.rss_end_kib = samples[-1][1]
    TALLY.notes.append(
        f"RSS KiB by tasks: {samples}; store holds {listed['result'].get('totalSize')}; agent fds at end {fds}"
    )
    assert failures == 0
    assert listed["result"]["totalSize"] <= 10_000
    assert samples[-1][1] <= filled * 1.25, samples

"""SendMessage throughput per task store, side by side in one run.

Not a test (no assertions on speed): ``python -m tests.storage.bench_throughput``.
Starts the example agent as a real server process per backend (memory, SQLite file,
PostgreSQL schema), then a bounded asyncio client sends blocking JSON-RPC SendMessage
calls (``math.add``) at a fixed concurrency for a fixed time. Client and server share
the machine, so numbers are comparable with each other, not absolute.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack

import httpx

from .._postgres import pg_schema_url
from .._support import cli_server
from ._a2a import EXTENSIONS


async def load(base_url: str, concurrency: int, seconds: float) -> tuple[int, int, list[float]]:
    ok = errors = 0
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    headers = {"A2A-Version": "1.0"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits) as http:

        async def worker() -> None:
            nonlocal ok, errors
            while time.monotonic() < deadline:
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": uuid.uuid4().hex,
                            "role": "ROLE_USER",
                            "parts": [{"data": {"a": 1, "b": 2}}],
                            "metadata": {"skillId": "math.add"},
                        }
                    },
                }
                start = time.perf_counter()
                try:
                    response = await http.post("/", json=body, timeout=30)
                    state = response.json()["result"]["task"]["status"]["state"]
                except Exception:
                    errors += 1
                    continue
                if state == "TASK_STATE_COMPLETED":
                    ok += 1
                    latencies.append(time.perf_counter() - start)
                else:
                    errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return ok, errors, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    opts = parser.parse_args()
    rows = []
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        urls = {
            "memory": "memory://",
            "sqlite": f"sqlite:///{tmp}/bench.db",
            "postgresql": stack.enter_context(pg_schema_url(pool_size=None)),  # the default pool
        }
        for name, url in urls.items():
            args = ["--extensions-dir", EXTENSIONS, "--task-store", url, "--log-level", "warning"]
            with cli_server(args) as (base, _):
                asyncio.run(load(base, opts.concurrency, opts.warmup))
                ok, errors, lat = asyncio.run(load(base, opts.concurrency, opts.seconds))
            lat.sort()
            p50 = statistics.median(lat) * 1000 if lat else float("nan")
            p99 = lat[int(len(lat) * 0.99) - 1] * 1000 if lat else float("nan")
            rows.append((name, ok / opts.seconds, p50, p99, errors))
    print(f"SendMessage (blocking, math.add), c={opts.concurrency}, {opts.seconds:g}s each")
    print(f"{'store':<12}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for name, rps, p50, p99, errors in rows:
        print(f"{name:<12}{rps:>10.1f}{p50:>10.1f}{p99:>10.1f}{errors:>8}")


if __name__ == "__main__":
    main()

"""R: the in-process floor, ``apcore.Executor.call_async()`` of the echo module.

``python -m benchmarks.inproc --calls N`` prints one JSON line with CPU and wall microseconds per
call. It runs in its own process, like the servers, so the harness's own work is not counted.

Two executors are measured: ``cpu_us``/``wall_us`` is the one our server runs for a bare
registry (``default_executor``: apcore's standard pipeline with ``cache_schemas``), which is
what O - S - R subtracts; ``apcore_cpu_us`` is apcore's ``Executor`` as shipped, for the row
that shows what the schema cache saves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from benchmarks.apps import ECHO_MODULE_ID, echo_registry


async def _per_call(executor: Any, calls: int, warmup: int) -> tuple[float, float]:
    inputs = {"text": "hello"}
    for _ in range(warmup):
        await executor.call_async(ECHO_MODULE_ID, inputs)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        result = await executor.call_async(ECHO_MODULE_ID, inputs)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if result != {"text": "hello"}:
        raise RuntimeError(f"echo module returned {result!r}")
    return cpu / calls * 1e6, wall / calls * 1e6


async def measure(calls: int, warmup: int) -> dict[str, float]:
    from apcore import Executor

    from apcore_a2a.execution.governance import default_executor

    cpu, wall = await _per_call(default_executor(echo_registry()), calls, warmup)
    apcore_cpu, apcore_wall = await _per_call(Executor(echo_registry()), calls, warmup)
    return {
        "calls": calls, "cpu_us": cpu, "wall_us": wall,
        "apcore_cpu_us": apcore_cpu, "apcore_wall_us": apcore_wall,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inproc")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(measure(args.calls, args.warmup))))


if __name__ == "__main__":
    main()

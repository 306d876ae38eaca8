"""R: the in-process floor, ``apcore.Executor.call_async()`` of the echo module.

``python -m benchmarks.inproc --calls N`` prints one JSON line with CPU and wall microseconds per
call. It runs in its own process, like the servers, so the harness's own work is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from benchmarks.apps import ECHO_MODULE_ID, echo_registry


async def measure(calls: int, warmup: int) -> dict[str, float]:
    from apcore import Executor

    executor = Executor(echo_registry())
    inputs = {"text": "hello"}
    for _ in range(warmup):
        await executor.call_async(ECHO_MODULE_ID, inputs)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        result = await executor.call_async(ECHO_MODULE_ID, inputs)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    if result != {"text": "hello"}:
        raise RuntimeError(f"echo module returned {result!r}")
    return {"calls": calls, "cpu_us": cpu / calls * 1e6, "wall_us": wall / calls * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inproc")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(measure(args.calls, args.warmup))))


if __name__ == "__main__":
    main()
